/**
 * Every route the SDK calls, in one table: method, OpenAPI path template, success status and the
 * contract schemas of the body it sends and the answer it accepts. The clients build their
 * requests from this table, and a test checks each entry against the server's OpenAPI
 * document, so a renamed route, a changed status or a field the server stops sending fails
 * the build instead of an agent in production.
 */
import {
  AgentResponse,
  AgentTokenBody,
  AgentTokenResponse,
  ApprovalListResponse,
  ApprovalRequiredResponse,
  ApprovalResponse,
  ApproveResponse,
  BootstrapBody,
  BootstrapResponse,
  CapabilitiesMeResponse,
  ConnectionListResponse,
  ConnectionSummary,
  CreateAgentBody,
  CreateAgentResponse,
  CreateConnectionResponse,
  DenyResponse,
  DisableAgentResponse,
  EnableAgentResponse,
  ExecuteModelA,
  ExecuteModelAResponse,
  ExecuteModelB,
  ExecuteModelBResponse,
  PermissionRequestBody,
  PermissionRequestCreated,
  PermissionRequestList,
  PermissionToActBody,
  PermissionToActResponse,
  ResolveCredentialBody,
  ResolveCredentialResponse,
} from './contracts.js';
import type { Schema } from './transport.js';

/** The revoke route's answer: the connection without its service name, and the audit id. */
export const RevokeConnectionResponse = CreateConnectionResponse.extend({
  connection: ConnectionSummary.omit({ service: true }),
});

export interface Endpoint<T = unknown> {
  method: 'GET' | 'POST';
  /** The OpenAPI path template: `{name}` marks a path parameter. */
  path: string;
  /** The status of the answer `response` describes. */
  ok: number;
  response: Schema<T>;
  /** The JSON body the SDK sends, when it sends one. */
  request?: unknown;
}

function endpoint<T>(e: Endpoint<T>): Endpoint<T> {
  return e;
}

export const endpoints = {
  bootstrap: endpoint({
    method: 'POST',
    path: '/v1/agents/bootstrap',
    ok: 200,
    request: BootstrapBody,
    response: BootstrapResponse,
  }),
  token: endpoint({
    method: 'POST',
    path: '/v1/agents/token',
    ok: 200,
    request: AgentTokenBody,
    response: AgentTokenResponse,
  }),
  executeModelB: endpoint({
    method: 'POST',
    path: '/v1/vault/execute',
    ok: 200,
    request: ExecuteModelB,
    response: ExecuteModelBResponse,
  }),
  executeApprovalRequired: endpoint({
    method: 'POST',
    path: '/v1/vault/execute',
    ok: 202,
    request: ExecuteModelB,
    response: ApprovalRequiredResponse,
  }),
  executeModelA: endpoint({
    method: 'POST',
    path: '/v1/vault/execute',
    ok: 200,
    request: ExecuteModelA,
    response: ExecuteModelAResponse,
  }),
  getApproval: endpoint({ method: 'GET', path: '/v1/approvals/{id}', ok: 200, response: ApprovalResponse }),
  listApprovals: endpoint({ method: 'GET', path: '/v1/approvals', ok: 200, response: ApprovalListResponse }),
  approve: endpoint({
    method: 'POST',
    path: '/v1/approvals/{id}/approve',
    ok: 200,
    response: ApproveResponse,
  }),
  deny: endpoint({ method: 'POST', path: '/v1/approvals/{id}/deny', ok: 200, response: DenyResponse }),
  capabilities: endpoint({
    method: 'GET',
    path: '/v1/capabilities/me',
    ok: 200,
    response: CapabilitiesMeResponse,
  }),
  listConnections: endpoint({
    method: 'GET',
    path: '/v1/connections',
    ok: 200,
    response: ConnectionListResponse,
  }),
  revokeConnection: endpoint({
    method: 'POST',
    path: '/v1/connections/{id}/revoke',
    ok: 200,
    response: RevokeConnectionResponse,
  }),
  requestCapability: endpoint({
    method: 'POST',
    path: '/v1/agent-permission-requests',
    ok: 201,
    request: PermissionRequestBody,
    response: PermissionRequestCreated,
  }),
  requestPermissionToAct: endpoint({
    method: 'POST',
    path: '/v1/vault/permission-requests',
    ok: 201,
    request: PermissionToActBody,
    response: PermissionToActResponse,
  }),
  listCapabilityRequests: endpoint({
    method: 'GET',
    path: '/v1/agent-permission-requests',
    ok: 200,
    response: PermissionRequestList,
  }),
  resolveCredential: endpoint({
    method: 'POST',
    path: '/v1/credentials/resolve',
    ok: 200,
    request: ResolveCredentialBody,
    response: ResolveCredentialResponse,
  }),
  createAgent: endpoint({
    method: 'POST',
    path: '/v1/agents',
    ok: 201,
    request: CreateAgentBody,
    response: CreateAgentResponse,
  }),
  getAgent: endpoint({ method: 'GET', path: '/v1/agents/{id}', ok: 200, response: AgentResponse }),
  disableAgent: endpoint({
    method: 'POST',
    path: '/v1/agents/{id}/disable',
    ok: 200,
    response: DisableAgentResponse,
  }),
  enableAgent: endpoint({
    method: 'POST',
    path: '/v1/agents/{id}/enable',
    ok: 200,
    response: EnableAgentResponse,
  }),
};

/** The concrete path of an endpoint, each parameter percent-encoded. */
export function pathOf(e: Endpoint, params: Record<string, string> = {}): string {
  return e.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new TypeError(`missing path parameter ${name} for ${e.path}`);
    return encodeURIComponent(v);
  });
}
