/**
 * The agent tools every agent-side client exposes (the OpenClaw plugin, the MCP server), by the
 * names of the client tooling contract, so the clients cannot drift apart.
 */
export const AGENT_TOOL_NAMES = [
  'vault_execute',
  'request_permission',
  'request_capability',
  'vault_await_approval',
  'vault_connections_list',
  'vault_connection_revoke',
  'vault_download',
] as const;
export type AgentToolName = (typeof AGENT_TOOL_NAMES)[number];
