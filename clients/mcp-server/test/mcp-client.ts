/**
 * The official MCP client, re-exported for the repository's end-to-end tests: the SDK is a
 * dependency of this package only, so tests/ cannot import it by name.
 */
export { Client } from '@modelcontextprotocol/sdk/client/index.js';
export { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
export { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
export type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
