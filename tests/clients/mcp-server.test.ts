/**
 * vlt-mcp (clients/mcp-server) against the real all-in-one gateway and the HTTPS mock issue
 * tracker, driven by the official MCP client: the real server process over stdio and over
 * streamable HTTP. Covers the tool list, Model B calls, step-up approvals decided with a PAT,
 * policy refusals, a disabled agent, the HTTP endpoint's bearer/Host/Origin checks, downloads,
 * and that no secret reaches a tool result, an error or the server's stderr.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { exportJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createAgent,
  createIssueTrackerConnection,
  createPat,
  createPolicy,
  signUp,
  type Admin,
  type PolicySettings,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';
import {
  bootstrapAgent,
  createAdminClient,
  createAgentClient,
  generateAgentKeys,
  type AdminClient,
  type AgentKeys,
  type VaultError,
} from '@vlt/sdk';
import {
  decodeAgentPrivateKey,
  parseConfig,
  PendingCalls,
  type ParsedCommandLine,
  type VaultMcpConfig,
} from '../../clients/mcp-server/src/index.js';
import { filenameFromDisposition, safeFilename } from '../../clients/mcp-server/src/download.js';
import { hostnameOf } from '../../clients/mcp-server/src/http.js';
import type { CallToolResult } from '../../clients/mcp-server/test/mcp-client.js';
import {
  runToExit,
  startHttpServer,
  startStdioSession,
  type HttpServerProcess,
  type McpSession,
  type ServerEnv,
} from './mcp-server/harness.js';

const TOOLS = [
  'request_capability',
  'request_permission',
  'vault_await_approval',
  'vault_connection_revoke',
  'vault_connections_list',
  'vault_download',
  'vault_execute',
];

let fx: E2eFixtures;
let gw: InProcessGateway;
let admin: Admin;
let pat: string;
let adminSdk: AdminClient;
let connectionId: string;
let workDir: string;

/** Every tool result seen, and the secrets none of them (nor any stderr) may contain. */
const seen: string[] = [];
const secrets: string[] = [];
const stderrs: (() => string)[] = [];

interface McpAgent {
  agentId: string;
  key: AgentKeys['privateKey'];
  env: ServerEnv;
}

/** An agent created by the admin, enrolled with a fresh key and bound to the connection. */
async function enrol(settings: PolicySettings): Promise<McpAgent> {
  const created = await createAgent(admin, `mcp-${randomBytes(3).toString('hex')}`);
  const keys = await generateAgentKeys();
  const boot = await bootstrapAgent({
    baseUrl: gw.baseUrl,
    bootstrapSecret: created.bootstrapSecret,
    publicJwk: keys.publicJwk,
  });
  await createPolicy(admin, boot.agentId, connectionId, settings);
  // The agent plugin's format: base64 of the private JWK's JSON.
  const jwk = await exportJWK(keys.privateKey);
  const privateKey = Buffer.from(JSON.stringify(jwk)).toString('base64');
  secrets.push(jwk.d!, privateKey, created.bootstrapSecret);
  const downloads = await mkdtemp(path.join(workDir, 'dl-'));
  return {
    agentId: boot.agentId,
    key: keys.privateKey,
    env: {
      VLT_BASE_URL: gw.baseUrl,
      VLT_AGENT_ID: boot.agentId,
      VLT_AGENT_PRIVATE_KEY: privateKey,
      VLT_MCP_DOWNLOAD_DIR: downloads,
    },
  };
}

const data = (r: CallToolResult) => r.structuredContent as Record<string, unknown>;
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');

/** Requests the mock saw from `from` on: the stored credential, never an agent token. */
function expectOnlyStoredCredential(from: number) {
  for (const req of fx.mock.requests.slice(from)) {
    expect(req.headers.authorization).toBe(fx.mock.expectedAuthorization);
    expect(JSON.stringify(req.headers)).not.toMatch(/vltt_/);
  }
}

let writer: McpAgent;
let stdio: McpSession;

beforeAll(async () => {
  workDir = await mkdtemp(path.join(tmpdir(), 'vlt-mcp-test-'));
  fx = await startE2eFixtures();
  gw = await startInProcessGateway({ ...fx.commonEnv }, { upstreamCa: [fx.pki.caPem] });
  const { user } = await signUp(
    gw.baseUrl,
    `owner-${randomBytes(4).toString('hex')}@mcp.test`,
    'correct horse battery',
  );
  admin = bearerAdmin(gw.baseUrl, (await apiJwt(gw.baseUrl, user.session)).token);
  pat = (await createPat(admin, 'mcp-tests')).plainToken;
  adminSdk = createAdminClient({ baseUrl: gw.baseUrl, token: pat });
  const conn = await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount });
  connectionId = conn.connection.id;
  secrets.push(pat, fx.mockAccount.apiToken, fx.mock.expectedAuthorization.slice('Basic '.length));
  // Reads run, every write waits for a person.
  writer = await enrol({ allowedModels: ['B'], defaultMode: 'read_write', stepUpApproval: 'always' });
  stdio = await startStdioSession(writer.env, seen);
  stderrs.push(stdio.stderr);
});

afterAll(async () => {
  await stdio?.close();
  await gw?.close();
  await fx?.dispose();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe('tools over stdio', () => {
  it('lists exactly the seven tools, with their required parameters', async () => {
    const { tools } = await stdio.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema]));
    const required = (name: string) => [...((byName[name]!.required as string[] | undefined) ?? [])].sort();
    expect(required('vault_execute')).toEqual(['method', 'url']);
    expect(Object.keys(byName.vault_execute!.properties ?? {}).sort()).toEqual(
      ['approvalId', 'body', 'connectionId', 'headers', 'method', 'query', 'service', 'url'].sort(),
    );
    expect(required('request_permission')).toEqual(['actionDescription', 'connectionId', 'method', 'url']);
    expect(required('request_capability')).toEqual(['actionTemplateId', 'reason']);
    expect(required('vault_await_approval')).toEqual(['approvalRequestId']);
    expect(byName.vault_await_approval!.properties).toHaveProperty('timeoutMs');
    expect(required('vault_connections_list')).toEqual([]);
    expect(required('vault_connection_revoke')).toEqual(['connectionId']);
    expect(required('vault_download')).toEqual(['url']);
  });

  it('vault_connections_list shows the bound connection', async () => {
    const r = await stdio.call('vault_connections_list');
    expect(r.isError).toBeFalsy();
    const list = data(r).connections as { id: string; provider: string; status: string }[];
    expect(list).toContainEqual(expect.objectContaining({ id: connectionId, status: 'healthy' }));
  });

  it("vault_execute returns the provider's answer; the provider saw the stored credential only", async () => {
    const before = fx.mock.requests.length;
    const r = await stdio.call('vault_execute', {
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(r.isError).toBeFalsy();
    expect(data(r)).toMatchObject({
      status: 200,
      body: { accountId: 'acc-1', emailAddress: fx.mockAccount.email },
      auditId: expect.stringMatching(/\S/),
    });
    expect(fx.mock.requests.length).toBe(before + 1);
    expectOnlyStoredCredential(before);
  });

  it('a provider error status is a result, not a tool error', async () => {
    fx.mock.respondOnce({ status: 404, body: { errorMessages: ['no such issue'] } });
    const r = await stdio.call('vault_execute', {
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/project`,
    });
    expect(r.isError).toBeFalsy();
    expect(data(r)).toMatchObject({ status: 404, body: { errorMessages: ['no such issue'] } });
  });

  it("a URL outside the allowlist is a tool error with the vault's message; the provider is not reached", async () => {
    const url = `${fx.mock.baseUrl}/admin`;
    // The same refusal as the SDK reports it, for the vault's own wording.
    const sdk = createAgentClient({ baseUrl: gw.baseUrl, agentId: writer.agentId, privateKey: writer.key });
    const vaultMessage = await sdk.execute({ connectionId, method: 'GET', url }).then(
      () => '',
      (err: VaultError) => err.message,
    );
    expect(vaultMessage).toMatch(/\S/);

    const before = fx.mock.requests.length;
    const r = await stdio.call('vault_execute', { connectionId, method: 'GET', url });
    expect(r.isError).toBe(true);
    expect(text(r)).toContain(vaultMessage);
    expect(text(r)).toContain('POLICY_DENIED');
    expect(data(r).error).toMatchObject({ status: 403, code: 'POLICY_DENIED', auditId: expect.any(String) });
    expect(fx.mock.requests.length).toBe(before);
  });

  it('without connectionId or service the call is refused before reaching the vault', async () => {
    const r = await stdio.call('vault_execute', {
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/connectionId or service/);
  });

  it('request_capability files a permission request', async () => {
    const r = await stdio.call('request_capability', {
      actionTemplateId: 'suite_a-mail.read',
      reason: 'to read the support mailbox',
    });
    expect(r.isError).toBeFalsy();
    expect(data(r)).toMatchObject({
      success: true,
      requestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      actionTemplateId: 'suite_a-mail.read',
      message: expect.any(String),
    });
  });

  it('request_permission files a call for a decision, sends nothing, and vault_await_approval runs it once approved', async () => {
    const before = fx.mock.requests.length;
    const r = await stdio.call('request_permission', {
      connectionId,
      actionDescription: 'Check which account I act as',
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(r.isError).toBeFalsy();
    expect(data(r)).toEqual({
      approvalRequestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      auditId: expect.any(String),
    });
    const id = data(r).approvalRequestId as string;
    expect(await adminSdk.getApproval(id)).toMatchObject({
      status: 'pending',
      requestDetails: expect.objectContaining({ actionDescription: 'Check which account I act as' }),
    });
    expect(fx.mock.requests.length).toBe(before);
    await adminSdk.approve(id);
    const run = await stdio.call('vault_await_approval', { approvalRequestId: id });
    expect(run.isError).toBeFalsy();
    expect(data(run)).toMatchObject({ status: 200 });
    expect(fx.mock.requests.length).toBe(before + 1);
  });

  it('vault_download saves the file under a safe name in the download directory', async () => {
    fx.mock.respondOnce({
      status: 200,
      headers: {
        'content-type': 'text/plain',
        'content-disposition': 'attachment; filename="../../evil.txt"',
      },
      body: 'file contents',
    });
    const r = await stdio.call('vault_download', {
      connectionId,
      url: `${fx.mock.baseUrl}/rest/api/3/project`,
    });
    expect(r.isError).toBeFalsy();
    const out = data(r) as { success: boolean; path: string; filename: string };
    expect(out).toMatchObject({ success: true, filename: 'evil.txt' });
    expect(path.dirname(out.path)).toBe(writer.env.VLT_MCP_DOWNLOAD_DIR);
    expect(await readFile(out.path, 'utf8')).toBe(JSON.stringify('file contents'));
    expect((await stat(out.path)).mode & 0o777).toBe(0o600);
    expect(await readdir(writer.env.VLT_MCP_DOWNLOAD_DIR)).toEqual(['evil.txt']);
  });
});

describe('step-up approval over stdio', () => {
  const issue = (summary: string) => ({
    connectionId,
    method: 'POST',
    url: `${fx.mock.baseUrl}/rest/api/3/issue`,
    body: { fields: { project: { key: 'VLT' }, summary, issuetype: { name: 'Task' } } },
  });

  async function paused(summary: string): Promise<string> {
    const r = await stdio.call('vault_execute', issue(summary));
    expect(r.isError).toBeFalsy();
    expect(data(r)).toMatchObject({ approvalRequired: true, auditId: expect.any(String) });
    expect(text(r)).toMatch(/vault_await_approval/);
    return data(r).approvalRequestId as string;
  }

  it('approval_required → approved with a PAT → vault_await_approval runs it once', async () => {
    const before = fx.mock.requests.length;
    const id = await paused('approved through MCP');
    expect(fx.mock.requests.length).toBe(before);

    const waiting = stdio.call('vault_await_approval', { approvalRequestId: id });
    await new Promise((r) => setTimeout(r, 150));
    await adminSdk.approve(id);
    const r = await waiting;
    expect(r.isError).toBeFalsy();
    expect(data(r)).toMatchObject({ status: 201, body: { key: expect.stringMatching(/^VLT-\d+$/) } });
    expect(fx.mock.requests.length).toBe(before + 1);
    expectOnlyStoredCredential(before);

    // Used: waiting again says so and runs nothing.
    const again = await stdio.call('vault_await_approval', { approvalRequestId: id });
    expect(again.isError).toBe(true);
    expect(text(again)).toMatch(/already used/);
    expect(fx.mock.requests.length).toBe(before + 1);
  });

  it('a denied approval ends vault_await_approval with a tool error; nothing runs', async () => {
    const before = fx.mock.requests.length;
    const id = await paused('denied through MCP');
    await adminSdk.deny(id);
    const r = await stdio.call('vault_await_approval', { approvalRequestId: id });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/denied/);
    expect(data(r).error).toMatchObject({ code: 'APPROVAL_DENIED', approvalRequestId: id });
    expect(fx.mock.requests.length).toBe(before);
  });

  it('vault_await_approval gives up at timeoutMs while the approval is pending', async () => {
    const id = await paused('left pending');
    const r = await stdio.call('vault_await_approval', { approvalRequestId: id, timeoutMs: 100 });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/still pending/);
    await adminSdk.deny(id);
  });
});

describe('a disabled agent', () => {
  it('gets a tool error saying a new bootstrap secret is needed', async () => {
    const agent = await enrol({ allowedModels: ['B'] });
    const s = await startStdioSession(agent.env, seen);
    stderrs.push(s.stderr);
    try {
      const url = `${fx.mock.baseUrl}/rest/api/3/myself`;
      expect((await s.call('vault_execute', { connectionId, method: 'GET', url })).isError).toBeFalsy();
      await adminSdk.disableAgent(agent.agentId);
      const before = fx.mock.requests.length;
      const r = await s.call('vault_execute', { connectionId, method: 'GET', url });
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/enrolment is broken: a new bootstrap secret is needed/);
      expect(data(r).error).toMatchObject({ status: 401 });
      expect(fx.mock.requests.length).toBe(before);
    } finally {
      await s.close();
    }
  });
});

describe('streamable HTTP', () => {
  const token = randomBytes(32).toString('hex');
  let server: HttpServerProcess;

  beforeAll(async () => {
    secrets.push(token);
    server = await startHttpServer({ ...writer.env, VLT_MCP_HTTP_TOKEN: token });
    stderrs.push(server.stderr);
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** A raw request, to set Host and Origin as a browser or an attacker would. */
  function raw(
    headers: Record<string, string>,
    body: unknown = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
  ): Promise<{ status: number; body: string }> {
    const u = new URL(server.url);
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
          );
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  }

  it('with the token: lists the seven tools and runs vault_execute', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const s = await server.connect(token, seen);
    try {
      const { tools } = await s.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
      const before = fx.mock.requests.length;
      const r = await s.call('vault_execute', {
        connectionId,
        method: 'GET',
        url: `${fx.mock.baseUrl}/rest/api/3/myself`,
      });
      expect(r.isError).toBeFalsy();
      expect(data(r)).toMatchObject({ status: 200, body: { accountId: 'acc-1' } });
      expectOnlyStoredCredential(before);
    } finally {
      await s.close();
    }
  });

  it("completes an approval another process filed, from the vault's record, with progress while waiting", async () => {
    const filed = await stdio.call('vault_execute', {
      connectionId,
      method: 'POST',
      url: `${fx.mock.baseUrl}/rest/api/3/issue`,
      body: { fields: { project: { key: 'OPS' }, summary: 'filed on stdio', issuetype: { name: 'Task' } } },
    });
    const id = data(filed).approvalRequestId as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const before = fx.mock.requests.length;
    const s = await server.connect(token, seen);
    try {
      let progress = 0;
      const waiting = s.client.callTool(
        { name: 'vault_await_approval', arguments: { approvalRequestId: id } },
        undefined,
        {
          timeout: 20_000,
          resetTimeoutOnProgress: true,
          onprogress: () => {
            progress += 1;
          },
        },
      );
      // Approved only once a keep-alive (every second while waiting) has arrived.
      await vi.waitFor(() => expect(progress).toBeGreaterThanOrEqual(1), { timeout: 10_000, interval: 50 });
      await adminSdk.approve(id);
      const r = (await waiting) as CallToolResult;
      seen.push(JSON.stringify(r));
      expect(r.isError).toBeFalsy();
      expect(data(r)).toMatchObject({ status: 201, body: { key: expect.stringMatching(/^OPS-\d+$/) } });
      expect(progress).toBeGreaterThanOrEqual(1);
      expect(fx.mock.requests.length).toBe(before + 1);
      expectOnlyStoredCredential(before);
    } finally {
      await s.close();
    }
  });

  it("an approval of a body over 256 KiB is not replayed from the vault's preview: the agent sends it again with approvalId, and it runs once", async () => {
    const request = {
      connectionId,
      method: 'POST',
      url: `${fx.mock.baseUrl}/rest/api/3/issue`,
      body: {
        fields: {
          project: { key: 'OPS' },
          summary: 'a long report',
          description: 'd'.repeat(300 * 1024),
          issuetype: { name: 'Task' },
        },
      },
    };
    const id = data(await stdio.call('vault_execute', request)).approvalRequestId as string;
    await adminSdk.approve(id);
    const before = fx.mock.requests.length;
    const s = await server.connect(token, seen);
    try {
      const r = await s.call('vault_await_approval', { approvalRequestId: id });
      expect(r.isError).toBe(true);
      expect(JSON.stringify(r.content)).toContain('call vault_execute again with exactly the same request');
      expect(fx.mock.requests.length).toBe(before);
      const run = await s.call('vault_execute', { ...request, approvalId: id });
      expect(run.isError).toBeFalsy();
      expect(data(run)).toMatchObject({ status: 201 });
      expect(fx.mock.requests.length).toBe(before + 1);
    } finally {
      await s.close();
    }
  });

  it('without the token, or with a wrong one, answers 401 and runs no tool', async () => {
    await expect(server.connect(undefined, seen)).rejects.toThrow();
    await expect(server.connect(`${token.slice(0, -1)}x`, seen)).rejects.toThrow();
    const before = fx.mock.requests.length;
    const call = {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: {
        name: 'vault_execute',
        arguments: { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` },
      },
    };
    const u = new URL(server.url);
    const host = `${u.hostname}:${u.port}`;
    for (const authorization of [undefined, 'Bearer wrong', `Basic ${token}`, `Bearer ${token}x`]) {
      const r = await raw({ host, ...(authorization && { authorization }) }, call);
      expect(r.status).toBe(401);
      expect(r.body).not.toContain(token);
    }
    expect(fx.mock.requests.length).toBe(before);
  });

  it('refuses a foreign Host or Origin (DNS rebinding), even with the token', async () => {
    const u = new URL(server.url);
    const authorization = `Bearer ${token}`;
    expect((await raw({ host: `attacker.example:${u.port}`, authorization })).status).toBe(403);
    expect(
      (await raw({ host: `127.0.0.1:${u.port}`, origin: 'http://attacker.example', authorization })).status,
    ).toBe(403);
    // The same request from an allowed Host and no Origin is served.
    expect((await raw({ host: `localhost:${u.port}`, authorization })).status).toBe(200);
  });

  it('will not start without a token unless on loopback and told so explicitly', async () => {
    const refused = await runToExit(writer.env, ['--http', '--port', '0', '--host', '0.0.0.0']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/VLT_MCP_HTTP_TOKEN/);
    const weak = await runToExit({ ...writer.env, VLT_MCP_HTTP_TOKEN: 'short' }, ['--http', '--port', '0']);
    expect(weak.code).toBe(2);
    expect(weak.stderr).toMatch(/at least 32 characters/);
    expect(weak.stderr).not.toContain(writer.env.VLT_AGENT_PRIVATE_KEY);
  });
});

describe('configuration and helpers (no gateway)', () => {
  const AGENT = '6b1f0a4e-7c55-4d1c-8a43-2f1e9b8a1c11';
  let key: string;
  const io = { readFile: () => key, homedir: () => '/home/agent', cwd: () => '/work' };
  const env = (more: Record<string, string> = {}) => ({
    VLT_BASE_URL: 'https://vault.example/',
    VLT_AGENT_ID: AGENT,
    VLT_AGENT_PRIVATE_KEY: key,
    ...more,
  });
  const run = (r: ParsedCommandLine): VaultMcpConfig => {
    if (r.kind !== 'run') throw new Error('expected a configuration');
    return r.config;
  };
  const refusal = (f: () => unknown): string => {
    try {
      f();
    } catch (err) {
      expect((err as Error).name).toBe('ConfigError');
      return (err as Error).message;
    }
    throw new Error('expected a ConfigError');
  };

  beforeAll(async () => {
    const jwk = await exportJWK((await generateAgentKeys()).privateKey);
    key = Buffer.from(JSON.stringify(jwk)).toString('base64');
  });

  it('defaults to stdio, normalises the base URL and resolves the download directory', () => {
    const c = run(parseConfig([], env(), io));
    expect(c).toMatchObject({
      baseUrl: 'https://vault.example',
      agentId: AGENT,
      transport: { kind: 'stdio' },
      downloadDir: '/home/agent/.vlt/mcp-downloads',
      approvalPollMs: 3000,
      logLevel: 'info',
    });
    expect(run(parseConfig(['--download-dir', 'dl'], env(), io)).downloadDir).toBe('/work/dl');
    expect(parseConfig(['--help'], {}, io)).toEqual({ kind: 'help' });
  });

  it('reads the key from a file, refuses two sources, and never quotes a secret', () => {
    const fromFile = { ...env(), VLT_AGENT_PRIVATE_KEY: '', VLT_AGENT_PRIVATE_KEY_FILE: '/k' };
    expect(run(parseConfig([], fromFile, io)).agentKey.kty).toBe('EC');
    expect(refusal(() => parseConfig([], { ...env(), VLT_AGENT_PRIVATE_KEY_FILE: '/k' }, io))).toMatch(
      /not both/,
    );
    const pasted = `pasted-${randomBytes(8).toString('hex')}`;
    const bad = refusal(() => parseConfig([], env({ VLT_AGENT_PRIVATE_KEY: pasted }), io));
    expect(bad).toMatch(/VLT_AGENT_PRIVATE_KEY/);
    expect(bad).not.toContain(pasted);
    expect(refusal(() => parseConfig([pasted], env(), io))).not.toContain(pasted);
    const publicOnly = JSON.parse(Buffer.from(key, 'base64').toString()) as Record<string, string>;
    delete publicOnly.d;
    expect(() => decodeAgentPrivateKey(JSON.stringify(publicOnly), 'k')).toThrow(/not a private key/);
    expect(refusal(() => parseConfig([], env({ VLT_BASE_URL: 'http://vault.example' }), io))).toMatch(
      /plain http/,
    );
  });

  it('HTTP: a token, or an explicit unauthenticated loopback; wildcard binds must name their hosts', () => {
    const token = 't'.repeat(32);
    const http = run(parseConfig(['--http', '--port', '0'], env({ VLT_MCP_HTTP_TOKEN: token }), io));
    expect(http.transport).toMatchObject({
      kind: 'http',
      host: '127.0.0.1',
      port: 0,
      token,
      allowedOrigins: [],
    });
    if (http.transport.kind === 'http') {
      expect(http.transport.allowedHosts.sort()).toEqual(['127.0.0.1', '[::1]', 'localhost']);
    }
    expect(refusal(() => parseConfig(['--http', '--port', '0'], env(), io))).toMatch(/VLT_MCP_HTTP_TOKEN/);
    const open = run(parseConfig(['--http', '--port', '0', '--allow-unauthenticated-loopback'], env(), io));
    expect(open.transport).toMatchObject({ kind: 'http', token: undefined });
    expect(
      refusal(() =>
        parseConfig(
          ['--http', '--port', '0', '--host', '10.1.2.3', '--allow-unauthenticated-loopback'],
          env(),
          io,
        ),
      ),
    ).toMatch(/VLT_MCP_HTTP_TOKEN/);
    expect(
      refusal(() =>
        parseConfig(['--http', '--port', '0', '--host', '0.0.0.0'], env({ VLT_MCP_HTTP_TOKEN: token }), io),
      ),
    ).toMatch(/--allowed-host/);
    expect(refusal(() => parseConfig(['--port', '1'], env(), io))).toMatch(/only with --http/);
    expect(refusal(() => parseConfig(['--http'], env({ VLT_MCP_HTTP_TOKEN: token }), io))).toMatch(/--port/);
  });

  it('reduces file names to one safe segment', () => {
    expect(safeFilename('../../etc/passwd')).toBe('passwd');
    expect(safeFilename('..\\..\\boot.ini')).toBe('boot.ini');
    expect(safeFilename('.bashrc')).toBe('bashrc');
    expect(safeFilename('..')).toBe('download');
    expect(safeFilename('a\u0000b\u202ec<d>.txt')).toBe('a_b_c_d_.txt');
    expect(Buffer.byteLength(safeFilename(`${'é'.repeat(300)}.pdf`))).toBeLessThanOrEqual(200);
    expect(safeFilename(`${'é'.repeat(300)}.pdf`)).toMatch(/\.pdf$/);
    expect(filenameFromDisposition(`attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf; filename="x"`)).toBe(
      'résumé.pdf',
    );
    expect(filenameFromDisposition('attachment; filename="a \\"b\\".txt"')).toBe('a "b".txt');
  });

  it('compares Host headers by hostname, and forgets the oldest paused calls first', () => {
    expect(hostnameOf('LOCALHOST:8080')).toBe('localhost');
    expect(hostnameOf('[::1]:80')).toBe('[::1]');
    expect(hostnameOf('evil.example@127.0.0.1')).toBeUndefined();
    expect(hostnameOf(undefined)).toBeUndefined();
    const pending = new PendingCalls(2);
    const call = { kind: 'execute' as const, request: { method: 'GET' as const, url: 'https://x' } };
    pending.remember('a', call);
    pending.remember('b', call);
    pending.remember('c', call);
    expect([pending.get('a'), pending.size]).toEqual([undefined, 2]);
  });
});

describe('secrets', () => {
  it('no secret appears in any tool result, error or server stderr', () => {
    const everything = [...seen, ...stderrs.map((s) => s())].join('\n');
    expect(seen.length).toBeGreaterThan(10);
    expect(everything).toMatch(/"tool":"vault_execute"/);
    expect(everything).not.toMatch(/vltt_|vltb_|vltp_/);
    for (const secret of secrets) expect(everything).not.toContain(secret);
  });
});
