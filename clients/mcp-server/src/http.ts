/**
 * Streamable HTTP on node:http, at one path (`/mcp`). The endpoint acts with the agent's
 * powers, so every request passes three checks before the MCP SDK sees it:
 *
 * 1. Host: its hostname must be one we serve under (DNS rebinding: a hostile page whose name
 *    resolves to 127.0.0.1 still sends its own name);
 * 2. Origin: absent (non-browser clients) or explicitly allowed (none by default);
 * 3. `Authorization: Bearer <VLT_MCP_HTTP_TOKEN>`, compared in constant time.
 *
 * The SDK's transport runs stateless (a fresh server and transport per POST; no session ids,
 * no standalone GET stream): nothing to bound or expire per client, and since each request is
 * authenticated on its own, a session id would add no authority anyway.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { normaliseHostname } from './config.js';
import type { Logger } from './log.js';

export const MCP_PATH = '/mcp';

export interface HttpTransportOptions {
  host: string;
  port: number;
  /** undefined only for an explicitly unauthenticated loopback server (checked by the config). */
  token: string | undefined;
  /** Lower-case hostnames, IPv6 in brackets, without ports. */
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
  /** A new MCP server over the shared tool context, one per request. */
  createServer(): McpServer;
  log: Logger;
}

export interface RunningHttpServer {
  /** `http://host:port/mcp` as bound (the real port when 0 was asked). */
  url: string;
  close(): Promise<void>;
}

/** The hostname of a Host header, normalised like the allowed list; undefined when malformed. */
export function hostnameOf(hostHeader: string | undefined): string | undefined {
  if (!hostHeader) return undefined;
  try {
    const u = new URL(`http://${hostHeader}`);
    // Anything beyond host[:port] (credentials, a path) is not a Host header.
    if (u.username || u.password || u.pathname !== '/' || u.search || u.hash) return undefined;
    return normaliseHostname(u.hostname);
  } catch {
    return undefined;
  }
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Fixed-length digests make the comparison's time independent of the presented value. */
function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? '');
  // Still compare on a miss, so a malformed header takes as long as a wrong one.
  const presented = digest(m?.[1] ?? '');
  return timingSafeEqual(presented, expected) && m !== null;
}

function refuse(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  // JSON-RPC's shape, as the SDK answers its own transport-level refusals.
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(body);
}

export async function startHttpTransport(o: HttpTransportOptions): Promise<RunningHttpServer> {
  const expected = o.token === undefined ? undefined : digest(o.token);
  const hosts = new Set(o.allowedHosts);
  const origins = new Set(o.allowedOrigins);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const remote = req.socket.remoteAddress ?? 'unknown';
    if (path !== MCP_PATH) return refuse(res, 404, 'not found');
    const hostname = hostnameOf(req.headers.host);
    if (hostname === undefined || !hosts.has(hostname)) {
      o.log.warn('http request refused', { reason: 'host not allowed', remote });
      return refuse(res, 403, 'Host not allowed');
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !origins.has(origin)) {
      o.log.warn('http request refused', { reason: 'origin not allowed', remote });
      return refuse(res, 403, 'Origin not allowed');
    }
    if (expected !== undefined && !bearerMatches(req.headers.authorization, expected)) {
      o.log.warn('http request refused', { reason: 'missing or wrong bearer token', remote });
      return refuse(res, 401, 'a valid bearer token is required', {
        'www-authenticate': 'Bearer realm="vlt-mcp"',
      });
    }
    if (req.method !== 'POST') {
      // Stateless: no standalone server-to-client stream (GET) and no session to end (DELETE).
      return refuse(res, 405, 'method not allowed', { allow: 'POST' });
    }
    const server = o.createServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  }

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      o.log.error('http request failed', { error: err instanceof Error ? err.name : 'unknown' });
      if (!res.headersSent) refuse(res, 500, 'internal error');
      else res.destroy();
    });
  });
  // Bounds on slow clients; responses (a long approval wait) are not limited by these.
  http.headersTimeout = 20_000;
  http.requestTimeout = 60_000;

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(o.port, o.host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const addr = http.address() as AddressInfo;
  const shownHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shownHost}:${addr.port}${MCP_PATH}`,
    close: () =>
      new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  };
}
