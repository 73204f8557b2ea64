/**
 * The vlt-mcp command: the only module that touches the process (argv, env, stdio, signals,
 * exit code). Logs go to stderr; in stdio mode stdout carries nothing but the protocol.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createAgentClient } from '@vlt/sdk';
import { importAgentPrivateKey } from './agent-key.js';
import { isLoopbackHost, parseConfig, USAGE, type VaultMcpConfig } from './config.js';
import { ConfigError, scrubText } from './errors.js';
import { startHttpTransport } from './http.js';
import { createLogger, type Logger } from './log.js';
import { PendingCalls } from './pending.js';
import { createVaultMcpServer, SERVER_VERSION } from './server.js';
import type { VaultToolContext } from './tools.js';

async function run(config: VaultMcpConfig, log: Logger): Promise<() => Promise<void>> {
  // Non-extractable: whatever runs in this process later cannot export the key.
  const privateKey = await importAgentPrivateKey(config.agentKey);
  const client = createAgentClient({
    baseUrl: config.baseUrl,
    agentId: config.agentId,
    privateKey,
    ...(config.tokenAudience !== undefined && { audience: config.tokenAudience }),
  });
  const ctx: VaultToolContext = {
    client,
    pending: new PendingCalls(),
    downloadDir: config.downloadDir,
    approvalPollMs: config.approvalPollMs,
    log,
  };
  const common = {
    version: SERVER_VERSION,
    agentId: config.agentId,
    vault: config.baseUrl,
    downloadDir: config.downloadDir,
  };

  if (config.transport.kind === 'stdio') {
    const server = createVaultMcpServer(ctx);
    await server.connect(new StdioServerTransport());
    log.info('serving on stdio', common);
    return () => server.close();
  }

  const t = config.transport;
  if (t.token === undefined) {
    log.warn('HTTP without a bearer token: any local process can act as this agent', { host: t.host });
  } else if (!isLoopbackHost(t.host)) {
    log.warn('HTTP on a non-loopback address: terminate TLS in front of vlt-mcp', { host: t.host });
  }
  const http = await startHttpTransport({
    host: t.host,
    port: t.port,
    token: t.token,
    allowedHosts: t.allowedHosts,
    allowedOrigins: t.allowedOrigins,
    createServer: () => createVaultMcpServer(ctx),
    log,
  });
  log.info('serving streamable HTTP', { ...common, url: http.url, authenticated: t.token !== undefined });
  return () => http.close();
}

async function main(): Promise<void> {
  const parsed = parseConfig(process.argv.slice(2), process.env, {
    readFile: (p) => readFileSync(p, 'utf8'),
    homedir,
    cwd: () => process.cwd(),
  });
  if (parsed.kind === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  const { config } = parsed;
  const log = createLogger((line) => process.stderr.write(`${line}\n`), config.logLevel);
  const stop = await run(config, log);

  let stopping = false;
  const shutdown = (why: string) => {
    if (stopping) return;
    stopping = true;
    log.info('stopping', { why });
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  // A stdio client that goes away closes our stdin: nothing left to serve.
  if (config.transport.kind === 'stdio') process.stdin.once('end', () => shutdown('stdin closed'));
}

main().catch((err: unknown) => {
  const message =
    err instanceof ConfigError
      ? err.message
      : `failed to start: ${err instanceof Error ? `${err.name}: ${err.message}` : 'unknown error'}`;
  process.stderr.write(`vlt-mcp: ${scrubText(message)}\n`);
  process.exitCode = err instanceof ConfigError ? 2 : 1;
});
