/**
 * A hung control plane (SIGSTOP: its sockets stay open, nothing answers), in the split shape
 * over the run's PostgreSQL and NATS. Two faults the fault suite found:
 *  - a data plane holding an agent's credential made every call wait the whole 15 s credential
 *    request timeout before serving it (now: the 2 s stand-in wait, ADR 0003);
 *  - an agent that gave up during that wait still had its write sent to the provider when the
 *    wait ended (now: not sent, recorded as execution_error).
 */
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createIssueTrackerConnection,
  createPolicy,
  enrolAgent,
  expectStatus,
  pollAudit,
  putAllowlists,
  READ_WRITE_UNATTENDED,
  signUp,
  type Admin,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { ProcessGroup, freePort, sleep, type ServiceProcess } from '../support/processes.js';
import { ownDatabase, realServices } from '../support/services.js';

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();
if (unavailable) console.warn(`control-plane hang e2e skipped: ${realServices.missing()}`);

/** The data plane's credential entries go stale after this (the default is 30 s). */
const CREDENTIAL_TTL_MS = 1_000;

describe.skipIf(unavailable)('a hung control plane (split shape)', () => {
  const group = new ProcessGroup();
  let fx: E2eFixtures;
  let db: Awaited<ReturnType<typeof ownDatabase>> | undefined;
  let cp: ServiceProcess;
  let dp: ServiceProcess;
  let admin: Admin;
  let connectionId: string;
  const agents: { id: string; token: string }[] = [];

  beforeAll(async () => {
    [fx, db] = await Promise.all([startE2eFixtures(), ownDatabase('hang')]);
    const cpPort = await freePort();
    const bus = {
      ...fx.commonEnv,
      LOG_LEVEL: 'warn',
      PUBLIC_BASE_URL: `http://127.0.0.1:${cpPort}`,
      NATS_URL: realServices.natsUrl(),
      VLT_NATS_PREFIX: `${realServices.busPrefix()}_hang`,
    };
    const withDb = { ...bus, DATABASE_URL: db.url };
    cp = await group.start('control-plane', {
      port: cpPort,
      env: { ...withDb, VLT_MASTER_KEY: fx.masterKey },
    });
    [dp] = await Promise.all([
      group.start('data-plane', { env: { ...bus, VLT_CREDENTIAL_CACHE_MS: String(CREDENTIAL_TTL_MS) } }),
      group.start('audit', { env: withDb }),
    ]);
    const { user } = await signUp(
      cp.baseUrl,
      `hang-${randomBytes(4).toString('hex')}@e2e.test`,
      'hang-password-123',
    );
    admin = bearerAdmin(cp.baseUrl, (await apiJwt(cp.baseUrl, user.session)).token);
    connectionId = (
      await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount })
    ).connection.id;
    for (const name of ['reader', 'writer']) {
      // Its own client address: the per-IP bootstrap limit is shared with the run's other split suites.
      const enrolled = await enrolAgent(admin, cp.baseUrl, `${name}-${randomBytes(3).toString('hex')}`, {
        'x-forwarded-for': `198.18.${randomBytes(1)[0]}.${1 + (randomBytes(1)[0]! % 250)}`,
      });
      const { policy } = await createPolicy(admin, enrolled.agent.id, connectionId, READ_WRITE_UNATTENDED);
      expectStatus(
        await putAllowlists(admin, policy.id, [
          { baseUrl: fx.mock.baseUrl, methods: ['GET', 'POST'], pathPatterns: ['/rest/api/3/*'] },
        ]),
        200,
      );
      agents.push({ id: enrolled.agent.id, token: enrolled.token });
    }
  }, 180_000);

  afterAll(async () => {
    cp?.resume();
    await group.stopAll();
    await fx?.dispose();
    await db?.drop();
  }, 60_000);

  /** One execute call; `giveUpMs` is how long the agent waits for an answer. */
  function call(agent: { token: string }, body: Record<string, unknown>, giveUpMs: number) {
    return request(`${dp.baseUrl}/v1/vault/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'B', connectionId, ...body }),
      signal: AbortSignal.timeout(giveUpMs),
    });
  }
  const read = { method: 'GET', url: () => `${fx.mock.baseUrl}/rest/api/3/myself` };

  /** A successful call caches the agent's credential; it is stale once the TTL has passed. */
  async function holdStaleCredential(agent: { token: string }) {
    const warm = await call(agent, { method: read.method, url: read.url() }, 10_000);
    expect(warm.statusCode, await warm.body.text()).toBe(200);
    await sleep(CREDENTIAL_TTL_MS + 200);
  }

  it('regression: calls are served from the held credential, long before the 15 s request timeout', async () => {
    const reader = agents[0]!;
    await holdStaleCredential(reader);
    cp.pause();
    try {
      // The agent gives up after 8 s: before the fix the answer came after 15 s.
      const res = await call(reader, { method: read.method, url: read.url() }, 8_000);
      expect(res.statusCode, await res.body.text()).toBe(200);
    } finally {
      cp.resume();
    }
  }, 60_000);

  it('regression: a write the agent gave up on during the wait never reaches the provider', async () => {
    const writer = agents[1]!;
    await holdStaleCredential(writer);
    const summary = `abandoned-${randomBytes(4).toString('hex')}`;
    cp.pause();
    try {
      const abandoned = call(
        writer,
        {
          method: 'POST',
          url: `${fx.mock.baseUrl}/rest/api/3/issue`,
          body: { fields: { project: { key: 'OPS' }, summary, issuetype: { name: 'Task' } } },
        },
        500,
      );
      await expect(abandoned).rejects.toThrow();
      // Past the stand-in wait: before the fix the write was sent now.
      await sleep(3_000);
    } finally {
      cp.resume();
    }
    await sleep(1_000);
    expect(fx.mock.requests.filter((r) => r.body.includes(summary))).toEqual([]);
    expect([...fx.mock.issues.values()].filter((i) => i.fields.summary === summary)).toEqual([]);
    const rows = await pollAudit(
      admin,
      { agentId: writer.id, action: 'execution_error' },
      (events) => events.some((e) => e.metadata.error === 'AGENT_GONE'),
      15_000,
    );
    expect(rows.find((e) => e.metadata.error === 'AGENT_GONE')).toMatchObject({ connectionId });
  }, 60_000);
});
