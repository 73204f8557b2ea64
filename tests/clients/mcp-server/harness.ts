/**
 * Runs the real vlt-mcp process from source (`node --import tsx clients/mcp-server/src/main.ts`)
 * and connects the official MCP client to it: over stdio (the client spawns it) or over
 * streamable HTTP (spawned here, its address read from its start-up log line). Everything the
 * process writes to stderr is kept for secret-leak assertions.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  Client,
  StdioClientTransport,
  StreamableHTTPClientTransport,
  type CallToolResult,
} from '../../../clients/mcp-server/test/mcp-client.js';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const MAIN = 'clients/mcp-server/src/main.ts';

export interface ServerEnv {
  VLT_BASE_URL: string;
  VLT_AGENT_ID: string;
  VLT_AGENT_PRIVATE_KEY: string;
  VLT_MCP_DOWNLOAD_DIR: string;
  [name: string]: string;
}

/** A minimal environment: nothing of the test runner's leaks into the server. */
function childEnv(env: ServerEnv): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: env.VLT_MCP_DOWNLOAD_DIR,
    VLT_MCP_APPROVAL_POLL_MS: '50',
    VLT_MCP_LOG_LEVEL: 'debug',
    ...env,
  };
}

export interface McpSession {
  client: Client;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** Calls a tool and records its result for the leak check. */
  call(name: string, args?: Record<string, unknown>, timeoutMs?: number): Promise<CallToolResult>;
  close(): Promise<void>;
}

function session(
  client: Client,
  stderr: () => string,
  seen: string[],
  close: () => Promise<void>,
): McpSession {
  return {
    client,
    stderr,
    async call(name, args = {}, timeoutMs = 20_000) {
      const r = (await client.callTool({ name, arguments: args }, undefined, {
        timeout: timeoutMs,
      })) as CallToolResult;
      seen.push(JSON.stringify(r));
      return r;
    },
    close,
  };
}

export async function startStdioSession(env: ServerEnv, seen: string[]): Promise<McpSession> {
  const chunks: string[] = [];
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--import', 'tsx', MAIN],
    cwd: REPO_ROOT,
    env: childEnv(env),
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
  const client = new Client({ name: 'vitest', version: '0.0.0' });
  await client.connect(transport);
  return session(
    client,
    () => chunks.join(''),
    seen,
    () => client.close(),
  );
}

export interface HttpServerProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  connect(token: string | undefined, seen: string[]): Promise<McpSession>;
  stop(): Promise<void>;
}

/** Waits for the line saying where it listens; fails with its stderr if it exits first. */
export async function startHttpServer(env: ServerEnv, args: string[] = []): Promise<HttpServerProcess> {
  const chunks: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, '--http', '--port', '0', ...args], {
    cwd: REPO_ROOT,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`vlt-mcp did not start:\n${chunks.join('')}`)), 15_000);
    child.stderr!.on('data', (c: Buffer) => {
      chunks.push(c.toString('utf8'));
      const m = /"url":"(http:\/\/[^"]+)"/.exec(chunks.join(''));
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`vlt-mcp exited with ${code}:\n${chunks.join('')}`));
    });
  });
  const stderr = () => chunks.join('');
  return {
    url,
    child,
    stderr,
    async connect(token, seen) {
      const transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } },
      });
      const client = new Client({ name: 'vitest-http', version: '0.0.0' });
      await client.connect(transport);
      return session(client, stderr, seen, () => client.close());
    },
    stop: () => stopChild(child),
  };
}

/** Runs vlt-mcp to completion (for start-up refusals): exit code and stderr. */
export function runToExit(env: ServerEnv, args: string[]): Promise<{ code: number | null; stderr: string }> {
  const chunks: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    cwd: REPO_ROOT,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr!.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
  child.stdout!.on('data', (c: Buffer) => chunks.push(c.toString('utf8')));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stderr: chunks.join('') })));
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
