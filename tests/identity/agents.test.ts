/**
 * Agent lifecycle (spec: Agents; Agent state table; Events agent_updated / agent_deleted):
 * list envelope, update rules and audit, delete cascade, bootstrap-secret rules, re-bootstrap
 * and disable/enable transitions, each checked over HTTP and in the database.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectStatus, http, pollAudit } from '../support/api-client.js';
import {
  assertionFor,
  bootstrapRequest,
  createAgentAs,
  dataPlaneStatus,
  enrolledAgent,
  missingServices,
  newAgentKeys,
  newUser,
  nextIp,
  refusalAfter,
  seedApproval,
  seedConnection,
  startIdentityGateway,
  tokenRequestFrom,
  type IdentityGateway,
  type TestAgent,
  type TestUser,
} from '../support/identity-harness.js';

const skip = missingServices();

interface AgentBody {
  agent: {
    id: string;
    name: string;
    description: string | null;
    iconUrl: string | null;
    status: string;
    enrolledAt: string | null;
    createdAt: string;
    updatedAt: string;
  };
}

describe.skipIf(skip)(skip ? `agents (skipped: ${skip})` : 'agents', () => {
  let g: IdentityGateway;
  let owner: TestUser;

  const api = <T = unknown>(method: string, path: string, json?: unknown) =>
    http<T & { error?: string }>(method, `${g.baseUrl}${path}`, {
      headers: owner.admin.headers,
      ...(json === undefined ? {} : { json }),
    });
  const tokenOf = async (a: TestAgent) => {
    const r = await tokenRequestFrom(g.baseUrl, await assertionFor(a, { audience: g.baseUrl }), nextIp());
    return r;
  };
  const rows = async (table: string, agentId: string) =>
    (await g.sql<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE agent_id = $1`, [agentId]))[0]!
      .n;

  beforeAll(async () => {
    g = await startIdentityGateway('agents');
    owner = await newUser(g.baseUrl, 'owner');
  });
  afterAll(async () => {
    await g?.close();
  });

  it('POST creates a `created` agent with a one-time vltb_ secret; name must be non-empty (400)', async () => {
    const r = await api<AgentBody & { bootstrapSecret: string; auditId: string }>('POST', '/v1/agents', {
      name: 'Builder',
      description: 'builds',
      iconUrl: 'https://icons.example/b.png',
    });
    expect(r.status, r.text).toBe(201);
    expect(r.body.agent).toMatchObject({
      name: 'Builder',
      description: 'builds',
      status: 'created',
      enrolledAt: null,
    });
    expect(r.body.bootstrapSecret).toMatch(/^vltb_/);
    const stored = await g.sql<{ secret_hash: string }>(
      'SELECT secret_hash FROM bootstrap_secrets WHERE agent_id = $1',
      [r.body.agent.id],
    );
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(r.body.bootstrapSecret.slice(5));
    for (const name of ['', '   ']) expect((await api('POST', '/v1/agents', { name })).status).toBe(400);
    expect((await api('POST', '/v1/agents', {})).status).toBe(400);
  });

  it('GET /v1/agents answers {agents: [...]} with each status; GET by id adds updatedAt', async () => {
    const created = await createAgentAs(owner.admin, 'listed-created');
    const active = await enrolledAgent(owner.admin);
    const list = await api<{ agents: { id: string; status: string }[] }>('GET', '/v1/agents');
    expect(list.status).toBe(200);
    expect(Object.keys(list.body)).toEqual(['agents']);
    const byId = new Map(list.body.agents.map((a) => [a.id, a.status]));
    expect(byId.get(created.agent.id)).toBe('created');
    expect(byId.get(active.id)).toBe('active');
    const one = await api<AgentBody>('GET', `/v1/agents/${active.id}`);
    expect(one.status).toBe(200);
    expect(one.body.agent.status).toBe('active');
    expect(one.body.agent.enrolledAt).not.toBeNull();
    expect(typeof one.body.agent.updatedAt).toBe('string');
  });

  it('PUT needs at least one field (400), updates, and audits agent_updated', async () => {
    const created = await createAgentAs(owner.admin, 'to-update');
    const id = created.agent.id;
    expect((await api('PUT', `/v1/agents/${id}`, {})).status).toBe(400);
    expect((await api('PUT', `/v1/agents/${id}`, { name: '' })).status).toBe(400);
    expect((await api('PUT', `/v1/agents/${id}`, { status: 'active' })).status).toBe(400);
    const r = await api<AgentBody & { auditId: string }>('PUT', `/v1/agents/${id}`, {
      name: 'updated',
      description: 'new',
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body.agent).toMatchObject({ id, name: 'updated', description: 'new', status: 'created' });
    expect(typeof r.body.auditId).toBe('string');
    const events = await pollAudit(
      owner.admin,
      { agentId: id, action: 'agent_updated' },
      (e) => e.length >= 1,
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      auditId: r.body.auditId,
      actor: owner.id,
      agentId: id,
      action: 'agent_updated',
    });
  });

  it('DELETE cascades (policies, tokens, secrets, approvals gone; tokens refused) and audits agent_deleted', async () => {
    const a = await enrolledAgent(owner.admin);
    const connectionId = await seedConnection(g, owner.workspaceId);
    const policy = expectStatus(
      await api<{ policy: { id: string } }>('POST', '/v1/policies', {
        agentId: a.id,
        connectionId,
        allowedModels: ['B'],
      }),
      201,
    ).body.policy;
    await seedApproval(g, {
      workspaceId: owner.workspaceId,
      policyId: policy.id,
      agentId: a.id,
      connectionId,
      actor: owner.id,
    });
    const token = expectStatus(await tokenOf(a), 200).body.access_token;
    expect(await dataPlaneStatus(g.baseUrl, token)).toBe(400);
    expect(await rows('policies', a.id)).toBe(1);

    const del = await api<{ deleted: boolean; id: string; auditId: string }>('DELETE', `/v1/agents/${a.id}`);
    expect(del.status, del.text).toBe(200);
    expect(del.body).toMatchObject({ deleted: true, id: a.id });
    const deletedAt = performance.now();

    expect((await api('GET', `/v1/agents/${a.id}`)).status).toBe(404);
    for (const table of [
      'policies',
      'agent_access_tokens',
      'bootstrap_secrets',
      'approval_requests',
      'assertion_jtis',
    ]) {
      expect(await rows(table, a.id), table).toBe(0);
    }
    expect((await api('PUT', `/v1/policies/${policy.id}/allowlists`, { allowlists: [] })).status).toBe(404);
    expect((await refusalAfter(g.baseUrl, token, deletedAt)).status).toBe(401);
    expect((await tokenOf(a)).status).toBe(401);
    // The connection the policy pointed at is not the agent's: it stays.
    expect((await g.sql('SELECT id FROM connections WHERE id = $1', [connectionId])).length).toBe(1);

    const events = await pollAudit(
      owner.admin,
      { agentId: a.id, action: 'agent_deleted' },
      (e) => e.length >= 1,
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ auditId: del.body.auditId, actor: owner.id, action: 'agent_deleted' });
    expect(events[0]!.metadata).toMatchObject({ policiesDeleted: 1 });
    expect((await api('DELETE', `/v1/agents/${a.id}`)).status).toBe(404);
  });

  describe('bootstrap secrets', () => {
    it('are issued for a created agent (the older one stops working) and an active one; 409 for disabled', async () => {
      const created = await createAgentAs(owner.admin);
      const again = await api<{ bootstrapSecret: string }>(
        'POST',
        `/v1/agents/${created.agent.id}/bootstrap-secret`,
      );
      expect(again.status).toBe(200);
      expect(again.headers['cache-control']).toBe('no-store');
      expect(again.body.bootstrapSecret).toMatch(/^vltb_/);
      expect(again.body.bootstrapSecret).not.toBe(created.bootstrapSecret);

      const active = await enrolledAgent(owner.admin);
      expect((await api('POST', `/v1/agents/${active.id}/bootstrap-secret`)).status).toBe(200);

      expectStatus(await api('POST', `/v1/agents/${active.id}/disable`), 200);
      const refused = await api('POST', `/v1/agents/${active.id}/bootstrap-secret`);
      expect(refused.status, refused.text).toBe(409);
      expect(await rows('bootstrap_secrets', active.id)).toBe(2);
    });

    it('re-bootstrap of an active agent replaces its key and invalidates every token it had', async () => {
      const a = await enrolledAgent(owner.admin);
      const tokens = await Promise.all([tokenOf(a), tokenOf(a)]);
      for (const t of tokens) expect(await dataPlaneStatus(g.baseUrl, t.body.access_token)).toBe(400);
      const secret = expectStatus(
        await api<{ bootstrapSecret: string }>('POST', `/v1/agents/${a.id}/bootstrap-secret`),
        200,
      ).body.bootstrapSecret;
      const next = await newAgentKeys();
      const r = await bootstrapRequest(g.baseUrl, secret, next.publicJwk, nextIp());
      expect(r.status, r.text).toBe(200);
      expect(r.body).toMatchObject({ agentId: a.id, status: 'active', workspaceId: owner.workspaceId });
      const at = performance.now();
      for (const t of tokens)
        expect((await refusalAfter(g.baseUrl, t.body.access_token, at)).status).toBe(401);
      expect(await rows('agent_access_tokens', a.id)).toBe(0);
      // The old key is no longer the agent's; the new one is.
      expect((await tokenOf(a)).status).toBe(401);
      expect((await tokenOf({ ...a, keys: next.keys })).status).toBe(200);
    });

    it('no token signed with the old key and issued concurrently with a re-bootstrap outlives it', async () => {
      for (let round = 0; round < 3; round++) {
        const a = await enrolledAgent(owner.admin);
        const secret = expectStatus(
          await api<{ bootstrapSecret: string }>('POST', `/v1/agents/${a.id}/bootstrap-secret`),
          200,
        ).body.bootstrapSecret;
        const next = await newAgentKeys();
        const assertions = await Promise.all(
          Array.from({ length: 20 }, () => assertionFor(a, { audience: g.baseUrl })),
        );
        const issued = assertions.map((x, i) =>
          new Promise((r) => setTimeout(r, i)).then(() => tokenRequestFrom(g.baseUrl, x, nextIp())),
        );
        const rebooted = new Promise((r) => setTimeout(r, 8)).then(() =>
          bootstrapRequest(g.baseUrl, secret, next.publicJwk, nextIp()),
        );
        const results = await Promise.all(issued);
        expectStatus(await rebooted, 200);
        const settled = performance.now();
        expect(
          await rows('agent_access_tokens', a.id),
          `round ${round}: old-key tokens survived the re-bootstrap`,
        ).toBe(0);
        for (const r of results.filter((x) => x.status === 200)) {
          expect(
            (await refusalAfter(g.baseUrl, r.body.access_token, settled)).status,
            `round ${round}: data plane accepts an old-key token`,
          ).toBe(401);
        }
      }
    });

    it('bootstrap of a disabled agent is rejected with 409 and it stays disabled', async () => {
      const created = await createAgentAs(owner.admin);
      expectStatus(await api('POST', `/v1/agents/${created.agent.id}/disable`), 200);
      const { publicJwk } = await newAgentKeys();
      const r = await bootstrapRequest(g.baseUrl, created.bootstrapSecret, publicJwk, nextIp());
      const status = (
        await g.sql<{ status: string }>('SELECT status::text AS status FROM agents WHERE id = $1', [
          created.agent.id,
        ])
      )[0]!.status;
      expect(status).toBe('disabled');
      expect(r.status, `spec: a disabled agent's bootstrap is rejected with 409; got ${r.text}`).toBe(409);
    });
  });

  describe('disable and enable', () => {
    it('disable deletes every token at once and reports how many', async () => {
      const a = await enrolledAgent(owner.admin);
      const toks = await Promise.all([tokenOf(a), tokenOf(a), tokenOf(a)]);
      const r = await api<{ success: boolean; tokensRevoked: number }>('POST', `/v1/agents/${a.id}/disable`);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ success: true, tokensRevoked: 3 });
      expect(await rows('agent_access_tokens', a.id)).toBe(0);
      const at = performance.now();
      for (const t of toks) expect((await refusalAfter(g.baseUrl, t.body.access_token, at)).status).toBe(401);
      expect((await api<AgentBody>('GET', `/v1/agents/${a.id}`)).body.agent.status).toBe('disabled');
    });

    it('no token issued concurrently with a disable outlives it (DB and data plane)', async () => {
      // Token requests race the disable; whichever side wins, afterwards the agent has no
      // live token anywhere. Three rounds, because a race can be lucky once.
      for (let round = 0; round < 3; round++) {
        const a = await enrolledAgent(owner.admin);
        const assertions = await Promise.all(
          Array.from({ length: 20 }, () => assertionFor(a, { audience: g.baseUrl })),
        );
        const issued = assertions.map((x, i) =>
          new Promise((r) => setTimeout(r, i)).then(() => tokenRequestFrom(g.baseUrl, x, nextIp())),
        );
        const disabled = new Promise((r) => setTimeout(r, 8)).then(() =>
          api('POST', `/v1/agents/${a.id}/disable`),
        );
        const results = await Promise.all(issued);
        expectStatus(await disabled, 200);
        const settled = performance.now();
        expect(
          await rows('agent_access_tokens', a.id),
          `round ${round}: token rows left for a disabled agent`,
        ).toBe(0);
        for (const r of results.filter((x) => x.status === 200)) {
          expect(
            (await refusalAfter(g.baseUrl, r.body.access_token, settled)).status,
            `round ${round}: data plane accepts a token of a disabled agent`,
          ).toBe(401);
        }
      }
    });

    it('enable → active when a key is on file; old tokens stay dead, new ones work', async () => {
      const a = await enrolledAgent(owner.admin);
      const old = expectStatus(await tokenOf(a), 200).body.access_token;
      expectStatus(await api('POST', `/v1/agents/${a.id}/disable`), 200);
      const r = await api<{ success: boolean; status: string }>('POST', `/v1/agents/${a.id}/enable`);
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ success: true, status: 'active' });
      expect(await dataPlaneStatus(g.baseUrl, old)).toBe(401);
      const fresh = await tokenOf(a);
      expect(fresh.status, fresh.text).toBe(200);
      expect(await dataPlaneStatus(g.baseUrl, fresh.body.access_token)).toBe(400);
    });

    it('enable → created when no key is on file; a new secret enrols it and supersedes the old one', async () => {
      const created = await createAgentAs(owner.admin);
      expectStatus(await api('POST', `/v1/agents/${created.agent.id}/disable`), 200);
      const r = await api<{ success: boolean; status: string }>(
        'POST',
        `/v1/agents/${created.agent.id}/enable`,
      );
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ success: true, status: 'created' });
      expect((await api<AgentBody>('GET', `/v1/agents/${created.agent.id}`)).body.agent).toMatchObject({
        status: 'created',
        enrolledAt: null,
      });
      const secret = expectStatus(
        await api<{ bootstrapSecret: string }>('POST', `/v1/agents/${created.agent.id}/bootstrap-secret`),
        200,
      ).body.bootstrapSecret;
      const { publicJwk } = await newAgentKeys();
      expect((await bootstrapRequest(g.baseUrl, created.bootstrapSecret, publicJwk, nextIp())).status).toBe(
        401,
      );
      const ok = await bootstrapRequest(g.baseUrl, secret, publicJwk, nextIp());
      expect(ok.status, ok.text).toBe(200);
      expect(ok.body.status).toBe('active');
    });

    it('unknown agent ids are 404 on every agent route', async () => {
      const id = '00000000-0000-4000-8000-' + randomBytes(6).toString('hex');
      for (const [m, p] of [
        ['GET', ''],
        ['PUT', ''],
        ['DELETE', ''],
        ['POST', '/bootstrap-secret'],
        ['POST', '/disable'],
        ['POST', '/enable'],
      ] as const) {
        const r = await api(m, `/v1/agents/${id}${p}`, m === 'PUT' ? { name: 'x' } : undefined);
        expect(r.status, `${m} ${p}`).toBe(404);
      }
      expect((await api('GET', '/v1/agents/not-a-uuid')).status).toBe(400);
    });
  });
});
