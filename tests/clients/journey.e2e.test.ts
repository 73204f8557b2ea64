/**
 * The agent developer's journey with the clients as shipped (the built vlt-setup and vlt-mcp,
 * the OpenClaw plugin fed the configuration vlt-setup wrote), against the all-in-one started
 * here and once against the split shape behind a path-routing edge:
 *
 *   setup → verify (exit 0, nothing changed) → execute → approval required → approved by a
 *   person over the API → the plugin's watcher wakes the agent → the replay runs once; the same
 *   through the MCP server; the agent disabled → the second 401 → "needs a new bootstrap
 *   secret" from every client; verify against a stopped vault → exit 1 within 6 s.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminClient, type AdminClient } from '@vlt/sdk';
import {
  createVaultPlugin,
  parseConfig,
  type ApprovalWakeEvent,
  type SessionRef,
  type VaultPlugin,
} from '../../clients/agent-plugin/src/index.js';
import {
  Client,
  StdioClientTransport,
  type CallToolResult,
} from '../../clients/mcp-server/test/mcp-client.js';
import {
  apiJwt,
  bearerAdmin,
  createAgent,
  createIssueTrackerConnection,
  createPat,
  createPolicy,
  signUp,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { ProcessGroup, freePort, repoRoot } from '../support/processes.js';
import { ownDatabase, realServices } from '../support/services.js';

const SESSION: SessionRef = { agentId: 'main', sessionKey: 'agent:main:journey' };
let built: string;
let fx: E2eFixtures;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** A built client bin as its own process, with nothing of the test runner's environment. */
function runBuilt(file: string, args: string[], home: string): Promise<Run> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(built, file), ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - started }));
  });
}

/** The production edge in miniature: /v1/vault/* to the data planes (round robin), the rest to the control plane. */
async function startEdge(port: number, controlPlane: string, dataPlanes: string[]) {
  let next = 0;
  // The agent machine's address as the vault sees it: its own, since per-IP limits (bootstrap,
  // token) are counted in the database the run's split suites share.
  const client = `198.18.${randomBytes(1)[0]}.${1 + (randomBytes(1)[0]! % 250)}`;
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const target = req.url!.startsWith('/v1/vault/') ? dataPlanes[next++ % dataPlanes.length]! : controlPlane;
    const upstream = http.request(
      new URL(req.url!, target),
      { method: req.method, headers: { ...req.headers, 'x-forwarded-for': client } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

interface Vault {
  baseUrl: string;
  /** Makes the vault unreachable at baseUrl. */
  stop(): Promise<void>;
}

function text(r: CallToolResult): string {
  return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

async function journey(vault: Vault) {
  const base = vault.baseUrl;
  const home = await mkdtemp(path.join(tmpdir(), 'vlt-journey-'));
  const openclawDir = path.join(home, '.openclaw');
  const plugins: VaultPlugin[] = [];
  let mcp: Client | undefined;
  try {
    // The workspace side: a person connects the tracker, creates the agent and its policy.
    const { user } = await signUp(
      base,
      `owner-${randomBytes(4).toString('hex')}@journey.test`,
      'correct horse battery',
    );
    const admin = bearerAdmin(base, (await apiJwt(base, user.session)).token);
    const adminSdk: AdminClient = createAdminClient({
      baseUrl: base,
      token: (await createPat(admin, 'journey')).plainToken,
    });
    const conn = await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount });
    const connectionId = conn.connection.id;
    const created = await createAgent(admin, `journey-${randomBytes(3).toString('hex')}`);
    await createPolicy(admin, created.agent.id, connectionId, {
      allowedModels: ['B'],
      defaultMode: 'read_write',
      stepUpApproval: 'always',
    });

    // 1. vlt-setup, then verify: exit 0 and the configuration unchanged.
    const setup = await runBuilt(
      'setup-cli/vlt-setup.js',
      [
        '--base-url',
        base,
        '--bootstrap-secret',
        created.bootstrapSecret,
        '--non-interactive',
        '--skip-onboard',
        '--skip-plugin-install',
        '--openclaw-dir',
        openclawDir,
      ],
      home,
    );
    expect(setup.code, setup.stderr).toBe(0);
    expect(`${setup.stdout}${setup.stderr}`).not.toContain(created.bootstrapSecret);
    const configPath = path.join(openclawDir, 'openclaw.json');
    const written = await readFile(configPath, 'utf8');
    const verify = await runBuilt(
      'setup-cli/vlt-setup.js',
      ['--mode', 'verify', '--openclaw-dir', openclawDir],
      home,
    );
    expect(verify.code, `${verify.stdout}${verify.stderr}`).toBe(0);
    expect(await readFile(configPath, 'utf8')).toBe(written);

    // 2. The plugin with what vlt-setup wrote (the host resolves the key file reference).
    const config = JSON.parse(written) as {
      plugins: { entries: Record<string, { config: { auth: Record<string, unknown> } }> };
      secrets: { providers: Record<string, { path: string }> };
    };
    const entry = config.plugins.entries['vlt-vault']!.config;
    const keyFile = config.secrets.providers['vlt-vault-agent-key']!.path;
    const privateKey = (await readFile(keyFile, 'utf8')).trim();
    const wakes: ApprovalWakeEvent[] = [];
    const plugin = createVaultPlugin({
      config: parseConfig({ ...entry, auth: { ...entry.auth, privateKey } }),
      watcherPollMs: 50,
      wake: (e) => wakes.push(e),
      log: { info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    plugins.push(plugin);
    const tools = new Map<string, ReturnType<VaultPlugin['tools']>[number]>(
      plugin.tools(SESSION).map((t) => [t.name, t]),
    );
    const call = (name: string, params: unknown) => tools.get(name)!.execute(params);

    const listed = (await call('vault_connections_list', {})) as { connections: { id: string }[] };
    expect(listed.connections.map((c) => c.id)).toContain(connectionId);
    const read = (await call('vault_execute', {
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    })) as { status: number };
    expect(read.status).toBe(200);

    const issue = (summary: string) => ({
      connectionId,
      method: 'POST',
      url: `${fx.mock.baseUrl}/rest/api/3/issue`,
      body: { fields: { project: { key: 'VLT' }, summary, issuetype: { name: 'Task' } } },
    });
    const before = fx.mock.requests.length;
    const paused = (await call('vault_execute', issue('through the plugin'))) as {
      approvalRequired: boolean;
      approvalRequestId: string;
    };
    expect(paused).toMatchObject({ approvalRequired: true, approvalRequestId: expect.any(String) });
    expect(fx.mock.requests.length).toBe(before);
    await adminSdk.approve(paused.approvalRequestId);
    await expect
      .poll(() => wakes.map((w) => [w.approvalRequestId, w.status]), { timeout: 10_000 })
      .toEqual([[paused.approvalRequestId, 'approved']]);
    const ran = (await call('vault_execute', {
      ...issue('through the plugin'),
      approvalId: paused.approvalRequestId,
    })) as {
      status: number;
    };
    expect(ran.status).toBe(201);
    expect(fx.mock.requests.length).toBe(before + 1);

    // 3. The MCP server, built, over stdio, with the same enrolment.
    mcp = new Client({ name: 'journey', version: '1.0.0' });
    await mcp.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [path.join(built, 'mcp-server/vlt-mcp.js')],
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: home,
          VLT_BASE_URL: base,
          VLT_AGENT_ID: created.agent.id,
          VLT_AGENT_PRIVATE_KEY_FILE: keyFile,
          VLT_MCP_DOWNLOAD_DIR: path.join(home, 'downloads'),
          VLT_MCP_APPROVAL_POLL_MS: '50',
        },
        stderr: 'pipe',
      }),
    );
    const pausedMcp = (await mcp.callTool({
      name: 'vault_execute',
      arguments: issue('through MCP'),
    })) as CallToolResult;
    expect(pausedMcp.isError).toBeFalsy();
    const mcpApproval =
      (pausedMcp.structuredContent as { approvalRequestId?: string } | undefined)?.approvalRequestId ??
      (JSON.parse(text(pausedMcp)) as { approvalRequestId: string }).approvalRequestId;
    expect(mcpApproval).toMatch(/^[0-9a-f-]{36}$/);
    await adminSdk.approve(mcpApproval);
    const awaited = (await mcp.callTool({
      name: 'vault_await_approval',
      arguments: { approvalRequestId: mcpApproval },
    })) as CallToolResult;
    expect(awaited.isError, text(awaited)).toBeFalsy();
    expect(text(awaited)).toMatch(/201/);
    expect(fx.mock.requests.length).toBe(before + 2);

    // 4. The agent disabled: every client says it needs a new bootstrap secret.
    await adminSdk.disableAgent(created.agent.id);
    await expect(call('vault_connections_list', {})).rejects.toThrow(/new bootstrap secret/);
    const refused = (await mcp.callTool({ name: 'vault_connections_list', arguments: {} })) as CallToolResult;
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(/new bootstrap secret/);
    const verifyDisabled = await runBuilt(
      'setup-cli/vlt-setup.js',
      ['--mode', 'verify', '--openclaw-dir', openclawDir],
      home,
    );
    expect(verifyDisabled.code).toBe(1);
    expect(`${verifyDisabled.stdout}${verifyDisabled.stderr}`).toMatch(/new bootstrap secret/);

    // 5. The vault stopped: verify fails on the refused connection, not on its 5 s health deadline.
    await vault.stop();
    const verifyStopped = await runBuilt(
      'setup-cli/vlt-setup.js',
      ['--mode', 'verify', '--openclaw-dir', openclawDir],
      home,
    );
    expect(verifyStopped.code).toBe(1);
    expect(verifyStopped.stdout).toMatch(/^FAIL +vault: .*connection failed/m);
    expect(verifyStopped.stdout).not.toMatch(/no answer within/);

    // Nothing secret in anything the clients printed.
    const jwk = JSON.parse(Buffer.from(privateKey, 'base64').toString('utf8')) as { d: string };
    for (const out of [setup, verify, verifyDisabled, verifyStopped]) {
      expect(`${out.stdout}${out.stderr}`).not.toContain(jwk.d);
    }
  } finally {
    for (const p of plugins) p.close();
    await mcp?.close().catch(() => undefined);
    await rm(home, { recursive: true, force: true });
  }
}

beforeAll(async () => {
  const out = await mkdtemp(path.join(tmpdir(), 'vlt-built-clients-'));
  built = out;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ['scripts/build-clients.mjs', out], {
      cwd: repoRoot,
      stdio: 'ignore',
    });
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`build-clients exited ${code}`)),
    );
  });
  fx = await startE2eFixtures();
}, 120_000);
afterAll(async () => {
  await fx?.dispose();
  if (built) await rm(built, { recursive: true, force: true });
});

describe('agent journey with the built clients', () => {
  it('all-in-one', async () => {
    const gw = await startInProcessGateway({ ...fx.commonEnv }, { upstreamCa: [fx.pki.caPem] });
    let closed = false;
    try {
      await journey({
        baseUrl: gw.baseUrl,
        stop: async () => {
          closed = true;
          await gw.close();
        },
      });
    } finally {
      if (!closed) await gw.close();
    }
  }, 90_000);

  const unavailable = !realServices.hasPostgres() || !realServices.hasNats();
  it.skipIf(unavailable)(
    'split shape behind an edge',
    async () => {
      const group = new ProcessGroup();
      const edgePort = await freePort();
      const publicBaseUrl = `http://127.0.0.1:${edgePort}`;
      let edge: Awaited<ReturnType<typeof startEdge>> | undefined;
      const db = await ownDatabase('journey');
      try {
        const bus = {
          ...fx.commonEnv,
          PUBLIC_BASE_URL: publicBaseUrl,
          NATS_URL: realServices.natsUrl(),
          VLT_NATS_PREFIX: `${realServices.busPrefix()}_journey`,
        };
        const withDb = { ...bus, DATABASE_URL: db.url };
        const cp = await group.start('control-plane', { env: { ...withDb, VLT_MASTER_KEY: fx.masterKey } });
        const [dp1, dp2] = await Promise.all([
          group.start('data-plane', { label: 'data-plane-1', env: bus }),
          group.start('data-plane', { label: 'data-plane-2', env: bus }),
          group.start('audit', { env: withDb }),
        ]);
        edge = await startEdge(edgePort, cp.baseUrl, [dp1!.baseUrl, dp2!.baseUrl]);
        const running = edge;
        await journey({ baseUrl: publicBaseUrl, stop: () => running.close() });
        edge = undefined;
      } finally {
        await edge?.close();
        await group.stopAll();
        await db.drop();
      }
    },
    150_000,
  );
});
