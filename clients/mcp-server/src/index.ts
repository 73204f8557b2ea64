/**
 * @vlt/mcp-server: the vault's agent tools over the Model Context Protocol. The `vlt-mcp`
 * command is src/main.ts; these exports are for embedding the server in another process.
 */
export { decodeAgentPrivateKey, importAgentPrivateKey, type AgentPrivateJwk } from './agent-key.js';
export {
  isLoopbackHost,
  parseConfig,
  USAGE,
  type ConfigIo,
  type ParsedCommandLine,
  type TransportConfig,
  type VaultMcpConfig,
} from './config.js';
export { ConfigError, DownloadError } from './errors.js';
export { MCP_PATH, startHttpTransport, type HttpTransportOptions, type RunningHttpServer } from './http.js';
export { createLogger, silentLogger, type LogLevel, type Logger } from './log.js';
export { PendingCalls, type PendingCall } from './pending.js';
export { createVaultMcpServer, SERVER_NAME, SERVER_VERSION } from './server.js';
export {
  registerVaultTools,
  TOOL_NAMES,
  toolError,
  type ToolName,
  type VaultAgentClient,
  type VaultToolContext,
} from './tools.js';
