/**
 * @vlt/sdk against the real all-in-one gateway and the HTTPS mock issue tracker: enrolment,
 * Model B calls (buffered and streamed), step-up approvals decided with a PAT, token refresh
 * and its single retry, a disabled agent, typed errors, and that no error carries a secret.
 * Admin-side setup uses the test helpers; the agent side goes through the SDK only.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  VaultApprovalError,
  VaultAuthError,
  VaultError,
  VaultPolicyDeniedError,
  VaultUsageError,
  bootstrapAgent,
  createAdminClient,
  exportAgentKeyBase64,
  createAgentClient,
  generateAgentKeys,
  importAgentKey,
  type AdminClient,
  type AgentClient,
  type AgentKeys,
  type FetchLike,
} from '@vlt/sdk';

let fx: E2eFixtures;
let gw: InProcessGateway;
let admin: Admin;
let pat: string;
let adminSdk: AdminClient;
let connectionId: string;

interface Enrolled {
  agentId: string;
  keys: AgentKeys;
  bootstrapSecret: string;
  policyId: string;
}

/** An agent created by the admin, enrolled and bound to the connection through the SDK. */
async function enrol(settings: PolicySettings = { allowedModels: ['B'] }): Promise<Enrolled> {
  const created = await createAgent(admin, `sdk-${randomBytes(3).toString('hex')}`);
  const keys = await generateAgentKeys();
  const boot = await bootstrapAgent({
    baseUrl: gw.baseUrl,
    bootstrapSecret: created.bootstrapSecret,
    publicJwk: keys.publicJwk,
  });
  expect(boot).toMatchObject({ agentId: created.agent.id, status: 'active', name: created.agent.name });
  const { policy } = await createPolicy(admin, boot.agentId, connectionId, settings);
  return { agentId: boot.agentId, keys, bootstrapSecret: created.bootstrapSecret, policyId: policy.id };
}

/** A fetch that records every request path and can answer chosen requests itself. */
function recordingFetch(
  answer?: (path: string, init: RequestInit | undefined, n: number) => Response | null,
) {
  const calls: { path: string; authorization: string | undefined }[] = [];
  const fn: FetchLike = async (input, init) => {
    const path = new URL(String(input)).pathname;
    const authorization = (init?.headers as Record<string, string> | undefined)?.authorization;
    calls.push({ path, authorization });
    const n = calls.filter((c) => c.path === path).length;
    return answer?.(path, init, n) ?? fetch(input, init);
  };
  const count = (path: string) => calls.filter((c) => c.path === path).length;
  return { fn, calls, count };
}

const json401 = () =>
  new Response(JSON.stringify({ error: 'invalid or expired agent token', code: 'UNAUTHORIZED' }), {
    status: 401,
    headers: { 'content-type': 'application/json' },
  });

async function rejection(p: Promise<unknown>): Promise<VaultError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(VaultError);
    return err as VaultError;
  }
  throw new Error('expected the call to fail');
}

let reader: Enrolled;
let readerClient: AgentClient;

beforeAll(async () => {
  fx = await startE2eFixtures();
  gw = await startInProcessGateway({ ...fx.commonEnv }, { upstreamCa: [fx.pki.caPem] });
  const { user } = await signUp(
    gw.baseUrl,
    `owner-${randomBytes(4).toString('hex')}@sdk.test`,
    'correct horse battery',
  );
  admin = bearerAdmin(gw.baseUrl, (await apiJwt(gw.baseUrl, user.session)).token);
  pat = (await createPat(admin, 'sdk-tests')).plainToken;
  adminSdk = createAdminClient({ baseUrl: gw.baseUrl, token: pat });
  const conn = await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount });
  connectionId = conn.connection.id;
  reader = await enrol();
  // Built from the stored PEM, as an agent restarting from disk would.
  readerClient = createAgentClient({
    baseUrl: gw.baseUrl,
    agentId: reader.agentId,
    privateKey: reader.keys.privateKeyPem,
  });
});
afterAll(async () => {
  await gw?.close();
  await fx?.dispose();
});

describe('keys and enrolment', () => {
  it('generates an ES256 key whose PEM imports back and whose JWK carries only public members', async () => {
    const keys = await generateAgentKeys();
    expect(keys.publicJwk).toEqual({
      kty: 'EC',
      crv: 'P-256',
      x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      y: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(keys.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const imported = await importAgentKey(keys.privateKeyPem);
    expect(imported.type).toBe('private');
    expect(imported.algorithm).toMatchObject({ name: 'ECDSA', namedCurve: 'P-256' });
    // The agent plugin's format: the private JWK as base64 JSON; imported non-extractable.
    const b64 = await exportAgentKeyBase64(keys.privateKey);
    const fromJwk = await importAgentKey(b64);
    expect(fromJwk.type).toBe('private');
    expect(fromJwk.extractable).toBe(false);
  });

  it('refuses a key that is not an ES256 private key, without echoing it', async () => {
    const publicOnly = Buffer.from(JSON.stringify((await generateAgentKeys()).publicJwk)).toString('base64');
    for (const bad of [
      publicOnly,
      'not-a-key',
      Buffer.from('{"kty":"oct","k":"c2VjcmV0"}').toString('base64'),
    ]) {
      const err = await importAgentKey(bad).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(err).toBeInstanceOf(TypeError);
      expect(err!.message).not.toContain(bad);
    }
  });

  it('refuses a secret that is not a bootstrap secret without sending anything', async () => {
    const rec = recordingFetch();
    const keys = await generateAgentKeys();
    const err = await rejection(
      bootstrapAgent({ baseUrl: gw.baseUrl, bootstrapSecret: pat, publicJwk: keys.publicJwk, fetch: rec.fn }),
    );
    expect(err).toBeInstanceOf(VaultUsageError);
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.status).toBe(0);
    expect(rec.calls).toHaveLength(0);
    expect(String(err)).not.toContain(pat);
  });

  it('a used bootstrap secret is refused by the vault with a typed error that does not echo it', async () => {
    const keys = await generateAgentKeys();
    const err = await rejection(
      bootstrapAgent({
        baseUrl: gw.baseUrl,
        bootstrapSecret: reader.bootstrapSecret,
        publicJwk: keys.publicJwk,
      }),
    );
    expect(err.status).toBeGreaterThanOrEqual(400);
    expect(err.status).toBeLessThan(500);
    expect(`${String(err)} ${err.stack} ${JSON.stringify(err)}`).not.toContain(reader.bootstrapSecret);
  });
});

describe('Model B through the SDK', () => {
  it('executes a GET and returns the provider status and body with the audit id', async () => {
    const before = fx.mock.requests.length;
    const r = await readerClient.execute({
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(r.kind).toBe('result');
    if (r.kind !== 'result') return;
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ accountId: 'acc-1', emailAddress: fx.mockAccount.email });
    expect(r.auditId).toMatch(/\S/);
    expect(fx.mock.requests.length).toBe(before + 1);
    expect(fx.mock.requests.at(-1)!.authorized).toBe(true);
  });

  it('a provider error status is a result, not an exception', async () => {
    fx.mock.respondOnce({ status: 404, body: { errorMessages: ['no such issue'] } });
    const r = await readerClient.execute({
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/project`,
    });
    expect(r).toMatchObject({ kind: 'result', status: 404, body: { errorMessages: ['no such issue'] } });
  });

  it('stream: true hands back the relayed body as a stream', async () => {
    const r = await readerClient.execute({
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/project`,
      stream: true,
    });
    expect(r.kind).toBe('stream');
    if (r.kind !== 'stream') return;
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toContain('application/json');
    expect(r.auditId).toMatch(/^[0-9a-f-]{36}$/);
    const text = await new Response(r.body).text();
    expect(JSON.parse(text).map((p: { key: string }) => p.key)).toEqual(['VLT', 'OPS']);
  });

  it('sends extra headers, but never lets them replace the agent credential', async () => {
    const seen: Headers[] = [];
    const client = createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKeyPem,
      fetch: async (input, init) => {
        seen.push(new Headers(init?.headers));
        return fetch(input, init);
      },
    });
    const r = await client.execute(
      { connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` },
      {
        headers: {
          'X-Vlt-Session-Key': `agent:${reader.agentId}:main`,
          Authorization: 'Bearer stolen',
          'X-API-Key': 'vltp_x',
        },
      },
    );
    expect(r).toMatchObject({ kind: 'result', status: 200 });
    const call = seen.at(-1)!;
    expect(call.get('x-vlt-session-key')).toBe(`agent:${reader.agentId}:main`);
    expect(call.get('authorization')).toMatch(/^Bearer vltt_[^,]+$/);
    expect(call.get('x-api-key')).toBeNull();
  });

  it('stream: true with a provider error gives the buffered envelope as a result', async () => {
    fx.mock.respondOnce({ status: 500, body: { errorMessages: ['boom'] } });
    const r = await readerClient.execute({
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/project`,
      stream: true,
    });
    expect(r).toMatchObject({ kind: 'result', status: 500, body: { errorMessages: ['boom'] } });
  });

  it('a URL outside the allowlist throws VaultPolicyDeniedError with an audit id, never reaching the provider', async () => {
    const before = fx.mock.requests.length;
    const err = await rejection(
      readerClient.execute({ connectionId, method: 'GET', url: `${fx.mock.baseUrl}/admin` }),
    );
    expect(err).toBeInstanceOf(VaultPolicyDeniedError);
    expect(err.status).toBe(403);
    expect(err.code).toBe('POLICY_DENIED');
    expect(err.auditId).toMatch(/\S/);
    expect(err.message).toMatch(/\S/);
    expect(fx.mock.requests.length).toBe(before);
  });

  it('Model A on a Model-B-only binding is a typed refusal', async () => {
    const err = await rejection(readerClient.vend({ connectionId }));
    expect(err.status).toBe(400);
    expect(err.code).toBe('MODEL_NOT_AVAILABLE');
  });

  it('reads its capabilities and connections', async () => {
    const caps = await readerClient.capabilities();
    expect(caps.agentId).toBe(reader.agentId);
    expect(caps.activeConnections.map((c) => c.connectionId)).toContain(connectionId);
    const conns = await readerClient.listConnections();
    expect(conns.map((c) => c.id)).toContain(connectionId);
  });

  it('points official SDKs at the vault LLM proxy', () => {
    expect(readerClient.llmBaseUrl('openai')).toBe(`${gw.baseUrl}/v1/vault/llm/openai`);
  });
});

describe('tokens', () => {
  it('caches the token and concurrent callers share one token request', async () => {
    const rec = recordingFetch();
    const client = createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKey,
      fetch: rec.fn,
    });
    const all = await Promise.all([client.capabilities(), client.capabilities(), client.capabilities()]);
    expect(all.map((c) => c.agentId)).toEqual([reader.agentId, reader.agentId, reader.agentId]);
    await client.listConnections();
    expect(rec.count('/v1/agents/token')).toBe(1);
    expect(rec.count('/v1/capabilities/me')).toBe(3);
  });

  it('on a 401 gets a fresh token once and retries the call exactly once', async () => {
    const rec = recordingFetch((path, _init, n) =>
      path === '/v1/vault/execute' && n === 1 ? json401() : null,
    );
    const client = createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKey,
      fetch: rec.fn,
    });
    const r = await client.execute({
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(r).toMatchObject({ kind: 'result', status: 200 });
    expect(rec.count('/v1/agents/token')).toBe(2);
    const executes = rec.calls.filter((c) => c.path === '/v1/vault/execute');
    expect(executes).toHaveLength(2);
    expect(executes[0]!.authorization).toMatch(/^Bearer vltt_/);
    expect(executes[1]!.authorization).toMatch(/^Bearer vltt_/);
    expect(executes[1]!.authorization).not.toBe(executes[0]!.authorization);
  });

  it('a second 401 throws VaultAuthError after exactly one retry', async () => {
    const rec = recordingFetch((path) => (path === '/v1/vault/execute' ? json401() : null));
    const client = createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKey,
      fetch: rec.fn,
    });
    const err = await rejection(
      client.execute({ connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` }),
    );
    expect(err).toBeInstanceOf(VaultAuthError);
    expect(err.status).toBe(401);
    expect(err.message).toMatch(/new bootstrap secret/);
    expect(rec.count('/v1/vault/execute')).toBe(2);
    expect(rec.count('/v1/agents/token')).toBe(2);
  });

  it('a disabled agent gets VaultAuthError saying it needs a new bootstrap secret', async () => {
    const a = await enrol();
    const rec = recordingFetch();
    const client = createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: a.agentId,
      privateKey: a.keys.privateKey,
      fetch: rec.fn,
    });
    const ok = await client.execute({
      connectionId,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(ok).toMatchObject({ kind: 'result', status: 200 });
    const token = await client.accessToken();

    const disabled = await adminSdk.disableAgent(a.agentId);
    expect(disabled.success).toBe(true);
    expect(disabled.tokensRevoked).toBeGreaterThanOrEqual(1);
    expect((await adminSdk.getAgent(a.agentId)).status).toBe('disabled');

    const before = fx.mock.requests.length;
    const err = await rejection(
      client.execute({ connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` }),
    );
    expect(err).toBeInstanceOf(VaultAuthError);
    expect(err.status).toBe(401);
    expect(err.message).toMatch(/new bootstrap secret/);
    expect(err.message).toContain(a.agentId);
    // One refused call, one refused token request: no loop.
    expect(rec.count('/v1/vault/execute')).toBe(2);
    expect(rec.count('/v1/agents/token')).toBe(2);
    expect(fx.mock.requests.length).toBe(before);
    for (const secret of [token, a.keys.privateKeyPem, a.bootstrapSecret]) {
      expect(`${String(err)} ${err.stack} ${JSON.stringify(err)}`).not.toContain(secret);
    }
  });
});

describe('step-up approval', () => {
  let b: Enrolled;
  let client: AgentClient;
  const issue = (summary: string) => ({
    connectionId,
    method: 'POST' as const,
    url: `${fx.mock.baseUrl}/rest/api/3/issue`,
    body: { fields: { project: { key: 'VLT' }, summary, issuetype: { name: 'Task' } } },
  });

  beforeAll(async () => {
    b = await enrol({ allowedModels: ['B'], defaultMode: 'read_write', stepUpApproval: 'always' });
    client = createAgentClient({ baseUrl: gw.baseUrl, agentId: b.agentId, privateKey: b.keys.privateKey });
  });

  it('approval_required → approved with a PAT → waitForApproval → the replay runs once', async () => {
    const req = issue('approved through the SDK');
    const before = fx.mock.requests.length;
    const paused = await client.execute(req);
    expect(paused.kind).toBe('approval_required');
    if (paused.kind !== 'approval_required') return;
    expect(paused.auditId).toMatch(/\S/);
    expect(new Date(paused.expiresAt).getTime()).toBeGreaterThan(Date.now());
    expect(fx.mock.requests.length).toBe(before);

    const pending = await client.getApproval(paused.approvalRequestId);
    expect(pending).toMatchObject({ id: paused.approvalRequestId, status: 'pending', agentId: b.agentId });
    expect((await client.listApprovals()).map((a) => a.id)).toContain(paused.approvalRequestId);

    // Re-submitting before the decision does not run it.
    const early = await rejection(client.execute({ ...req, approvalId: paused.approvalRequestId }));
    expect(early).toBeInstanceOf(VaultApprovalError);
    expect(early.code).toBe('APPROVAL_PENDING');

    const waiting = client.waitForApproval(paused.approvalRequestId, { pollMs: 20 });
    const decided = await adminSdk.approve(paused.approvalRequestId);
    expect(decided).toMatchObject({ approved: true, approvalRequestId: paused.approvalRequestId });
    const final = await waiting;
    expect(final.status).toBe('approved');

    const run = await client.execute({ ...req, approvalId: paused.approvalRequestId });
    expect(run.kind).toBe('result');
    if (run.kind !== 'result') return;
    expect(run.status).toBe(201);
    expect(run.body).toMatchObject({ key: expect.stringMatching(/^VLT-\d+$/) });
    expect(fx.mock.requests.length).toBe(before + 1);

    const replay = await rejection(client.execute({ ...req, approvalId: paused.approvalRequestId }));
    expect(replay).toBeInstanceOf(VaultApprovalError);
    expect(replay.status).toBe(409);
    expect(replay.code).toBe('APPROVAL_CONSUMED');
    expect(fx.mock.requests.length).toBe(before + 1);
  });

  it('requestPermissionToAct files a call for a decision without sending it; approved, it runs once', async () => {
    const before = fx.mock.requests.length;
    const target = { connectionId, method: 'GET' as const, url: `${fx.mock.baseUrl}/rest/api/3/myself` };
    const filed = await readerClient.requestPermissionToAct({
      ...target,
      actionDescription: 'Who am I on the tracker?',
    });
    expect(filed.approvalRequestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(fx.mock.requests.length).toBe(before);
    expect(await readerClient.getApproval(filed.approvalRequestId)).toMatchObject({ status: 'pending' });
    await adminSdk.approve(filed.approvalRequestId);
    const run = await readerClient.execute({ ...target, approvalId: filed.approvalRequestId });
    expect(run).toMatchObject({ kind: 'result', status: 200 });
    expect(fx.mock.requests.length).toBe(before + 1);
  });

  it('a denied approval ends the wait as denied and the call never runs', async () => {
    const req = issue('denied through the SDK');
    const paused = await client.execute(req);
    if (paused.kind !== 'approval_required')
      throw new Error(`expected approval_required, got ${paused.kind}`);
    const denied = await adminSdk.deny(paused.approvalRequestId);
    expect(denied).toMatchObject({ denied: true, approvalRequestId: paused.approvalRequestId });
    expect((await client.waitForApproval(paused.approvalRequestId, { pollMs: 20 })).status).toBe('denied');
    const before = fx.mock.requests.length;
    const err = await rejection(client.execute({ ...req, approvalId: paused.approvalRequestId }));
    expect(err).toBeInstanceOf(VaultApprovalError);
    expect(err.code).toBe('APPROVAL_DENIED');
    expect(fx.mock.requests.length).toBe(before);
  });

  it('waitForApproval gives up at its timeout and stops when aborted', async () => {
    const paused = await client.execute(issue('left pending'));
    if (paused.kind !== 'approval_required')
      throw new Error(`expected approval_required, got ${paused.kind}`);
    const timedOut = await rejection(
      client.waitForApproval(paused.approvalRequestId, { pollMs: 10, timeoutMs: 30 }),
    );
    expect(timedOut).toBeInstanceOf(VaultApprovalError);
    expect(timedOut.code).toBe('APPROVAL_WAIT_TIMEOUT');

    const ac = new AbortController();
    const waiting = client.waitForApproval(paused.approvalRequestId, { pollMs: 60_000, signal: ac.signal });
    ac.abort(new Error('stopped by the caller'));
    await expect(waiting).rejects.toThrow('stopped by the caller');
    // Tidy: no pending request left behind for the other tests' counts.
    await adminSdk.deny(paused.approvalRequestId);
  });

  it("an agent's own token cannot decide approvals", async () => {
    const paused = await client.execute(issue('self-approval attempt'));
    if (paused.kind !== 'approval_required')
      throw new Error(`expected approval_required, got ${paused.kind}`);
    const token = await client.accessToken();
    const asAgent = createAdminClient({ baseUrl: gw.baseUrl, token });
    const err = await rejection(asAgent.approve(paused.approvalRequestId));
    expect(err.status).toBe(403);
    expect(`${String(err)} ${err.stack}`).not.toContain(token);
    expect((await client.getApproval(paused.approvalRequestId)).status).toBe('pending');
    await adminSdk.deny(paused.approvalRequestId);
  });
});

describe('error bodies', () => {
  it('a non-JSON error body becomes a VaultError with a short preview, credentials scrubbed', async () => {
    let seen = '';
    const rec = recordingFetch((path, init) => {
      if (path !== '/v1/vault/execute') return null;
      seen = (init?.headers as Record<string, string>).authorization!.slice('Bearer '.length);
      // A misbehaving proxy that echoes the request into its error page.
      return new Response(`<html>bad gateway; request had Bearer ${seen} ${'z'.repeat(1000)}</html>`, {
        status: 502,
        headers: { 'content-type': 'text/html' },
      });
    });
    const client = createAgentClient({
      baseUrl: gw.baseUrl,
      agentId: reader.agentId,
      privateKey: reader.keys.privateKeyPem,
      fetch: rec.fn,
    });
    const err = await rejection(
      client.execute({ connectionId, method: 'GET', url: `${fx.mock.baseUrl}/rest/api/3/myself` }),
    );
    expect(err.constructor).toBe(VaultError);
    expect(err.status).toBe(502);
    expect(err.message).toContain('<html>bad gateway; request had Bearer [redacted]');
    const preview = err.message.slice(err.message.indexOf('<html>'));
    expect(preview.length).toBeLessThanOrEqual(200);
    expect(seen).toMatch(/^vltt_/);
    for (const secret of [seen, reader.keys.privateKeyPem]) {
      expect(`${String(err)} ${err.stack} ${JSON.stringify(err)}`).not.toContain(secret);
    }
    expect(rec.count('/v1/vault/execute')).toBe(1);
  });
});

describe('connections', () => {
  it('an agent revokes a connection it is bound to', async () => {
    const conn = await createIssueTrackerConnection(admin, {
      siteUrl: fx.mock.baseUrl,
      ...fx.mockAccount,
      label: 'to revoke',
    });
    await createPolicy(admin, reader.agentId, conn.connection.id, { allowedModels: ['B'] });
    const revoked = await readerClient.revokeConnection(conn.connection.id);
    expect(revoked.connection).toMatchObject({ id: conn.connection.id, status: 'revoked' });
    expect(revoked.auditId).toMatch(/\S/);
    // Revoked connections drop out of the agent's list; the other binding stays.
    const after = (await readerClient.listConnections()).map((c) => c.id);
    expect(after).not.toContain(conn.connection.id);
    expect(after).toContain(connectionId);
  });
});
