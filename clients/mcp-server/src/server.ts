/**
 * One MCP server exposing the vault's agent tools. Cheap to build: the streamable HTTP
 * transport builds one per request, all sharing one tool context (one agent client, one token
 * cache, one table of paused requests).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerVaultTools, type VaultToolContext } from './tools.js';

export const SERVER_NAME = 'vlt-mcp';
export const SERVER_VERSION = '0.1.0';

/** Bounds a tools/call's arguments (array items plus object members) before validation. */
const MAX_TOOL_INPUT_ELEMENTS = 10_000;

const INSTRUCTIONS = `These tools call the APIs of services connected to the vault, as this agent.
The vault holds the credentials and enforces the agent's policy: results never contain credentials.
- vault_connections_list first, to find connection ids.
- vault_execute returns the provider's answer (also its HTTP errors) or {approvalRequired, approvalRequestId}: then a person must approve; call vault_await_approval, which runs the request once approved.
- A tool error means the vault refused (policy, allowlist, rate limit, denied approval) or the agent's enrolment is broken; do not retry a refusal unchanged.
- request_capability asks a person for a new kind of access.`;

export function createVaultMcpServer(ctx: VaultToolContext): McpServer {
  const server = new McpServer(
    { name: SERVER_NAME, version: SERVER_VERSION },
    {
      capabilities: { tools: {} },
      instructions: INSTRUCTIONS,
      maxToolInputElements: MAX_TOOL_INPUT_ELEMENTS,
    },
  );
  registerVaultTools(server, ctx);
  return server;
}
