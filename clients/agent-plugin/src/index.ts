/**
 * @vlt/agent-plugin: the vault's seven agent tools for agent frameworks. `createVaultPlugin` is
 * host-independent; the OpenClaw entry is `./entry.ts` (see openclaw.plugin.json).
 */
export {
  DEBUG_LEVELS,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_POLL_TIMEOUT_MS,
  DEFAULT_WATCHER_POLL_MS,
  PluginConfigSchema,
  SECRET_INPUT_PATHS,
  checkSourceConfig,
  configJsonSchema,
  isSecretRef,
  manifestConfigSchema,
  parseConfig,
  watcherPollMsFrom,
  type DebugLevel,
  type PluginConfigInput,
  type ResolvedAuth,
  type ResolvedConfig,
} from './config.js';
export { createVaultPlugin, type VaultPlugin, type VaultPluginOptions } from './plugin.js';
export { TOOL_NAMES, type ToolName, type VaultTool } from './tools.js';
export { wakeText, type ApprovalWakeEvent, type ReplayTool } from './approvals.js';
export type { ApprovalResolution, TerminalStatus } from './watcher.js';
export type { ApprovalRequired, DownloadResult, ExecutionResult, LlmReplayResult } from './execution.js';
export { sessionKeyHeader, type SessionRef } from './session.js';
export { APPROVAL_ID_HEADER, SESSION_KEY_HEADER } from './transport.js';
export { dispositionFileName, safeFileName } from './download.js';
export { Secret } from './secret.js';
export {
  ConfigError,
  VaultApprovalError,
  VaultBlockedError,
  VaultDownloadError,
  VaultInvalidResponseError,
  VaultParamsError,
  VaultPluginError,
  VaultPolicyDeniedError,
  VaultReenrolmentError,
  type VaultPluginErrorKind,
} from './errors.js';
