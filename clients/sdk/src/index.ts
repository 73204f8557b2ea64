/**
 * @vlt/sdk: a typed client of the vault's public HTTP API. Agents generate a key, enrol it
 * with a bootstrap secret and call the vault with short-lived tokens the client manages;
 * admins' scripts decide approvals and manage agents with a personal access token.
 */
export { exportAgentKeyBase64, generateAgentKeys, importAgentKey, type AgentKeys } from './keys.js';
export {
  bootstrapAgent,
  createAgentClient,
  type AgentClient,
  type AgentClientOptions,
  type ApprovalView,
  type BootstrapOptions,
  type BootstrapResult,
  type CallOptions,
  type Capabilities,
  type ConnectionListItem,
  type ExecuteRequest,
  type ExecuteResult,
  type ExecuteStreamResult,
  type ModelAResult,
  type CapabilityRequest,
  type CapabilityRequestResult,
  type CapabilityRequestView,
  type PermissionToActRequest,
  type PermissionToActResult,
  type ResolveCredentialRequest,
  type ResolvedCredential,
  type RevokedConnection,
  type WaitOptions,
} from './agent.js';
export {
  createAdminClient,
  type AdminClient,
  type AdminClientOptions,
  type AgentView,
  type CreatedAgent,
} from './admin.js';
export {
  VaultApprovalError,
  VaultAuthError,
  VaultError,
  VaultPolicyDeniedError,
  VaultRateLimitedError,
  VaultUsageError,
  type VaultErrorInit,
} from './errors.js';
export type { FetchLike } from './transport.js';
export { endpoints, pathOf, type Endpoint } from './endpoints.js';
export { AGENT_TOOL_NAMES, type AgentToolName } from './agent-tools.js';
