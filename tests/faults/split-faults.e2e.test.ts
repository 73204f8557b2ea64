/**
 * Faults survived, nothing lost: the split shape (a control plane, two data planes, the audit
 * writer and the notifier) on a PostgreSQL and a NATS server of this test's own, under steady
 * agent load, while each of them in turn is killed with SIGKILL and started again: a data
 * plane, the audit writer, the notifier, the control plane, NATS, PostgreSQL.
 *
 * Afterwards, for the whole run: every call the agent saw succeed has exactly one
 * `execution_requested` and one terminal row; the provider never saw more calls than there are
 * durable `execution_requested` rows; a call that could not be recorded failed closed (503, or
 * no answer from a killed pod), never 200 unrecorded; the data planes kept serving while the
 * control plane (and then its database) was down; an approval ran at most once, even replayed
 * on both data planes at once while one of them died. The counts per fault are printed.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiJwt,
  auditAll,
  bearerAdmin,
  createIssueTrackerConnection,
  createPolicy,
  enrolAgent,
  expectStatus,
  http,
  putAllowlists,
  READ_WRITE_UNATTENDED,
  signUp,
  type Admin,
  type AuditEvent,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import {
  natsServerBinary,
  postgresBinDir,
  startPrivateNats,
  startPrivatePostgres,
  type PrivateServer,
} from '../support/private-services.js';
import { ProcessGroup, freePort, sleep, type ServiceProcess } from '../support/processes.js';

const missing = [
  !natsServerBinary() && 'nats-server',
  !postgresBinDir() && 'PostgreSQL server binaries',
].filter(Boolean);
if (missing.length) console.warn(`fault suite skipped: ${missing.join(', ')} not installed`);

interface CallOutcome {
  fault: string;
  summary: string;
  /** HTTP status, or 0 when no answer came (a killed pod, a refused connection). */
  status: number;
  auditId?: string;
}

describe.skipIf(missing.length > 0)('faults survived, nothing lost (split shape)', () => {
  const group = new ProcessGroup();
  let fx: E2eFixtures;
  let nats: PrivateServer;
  let pg: PrivateServer;
  let cp: ServiceProcess;
  let dps: ServiceProcess[];
  let audit: ServiceProcess;
  let notifier: ServiceProcess;
  let admin: Admin;
  let connectionId: string;
  let agent: { id: string; token: string };
  let reviewed: { id: string; token: string };
  const outcomes: CallOutcome[] = [];
  let seq = 0;

  beforeAll(async () => {
    fx = await startE2eFixtures();
    [nats, pg] = await Promise.all([startPrivateNats(), startPrivatePostgres()]);
    const cpPort = await freePort();
    const bus = {
      ...fx.commonEnv,
      LOG_LEVEL: 'warn',
      PUBLIC_BASE_URL: `http://127.0.0.1:${cpPort}`,
      NATS_URL: nats.url,
      VLT_NATS_PREFIX: 'faults',
    };
    const withDb = { ...bus, DATABASE_URL: pg.url };
    cp = await group.start('control-plane', {
      port: cpPort,
      env: { ...withDb, VLT_MASTER_KEY: fx.masterKey },
    });
    // Credentials go stale after a second: the outages below are served from held entries.
    const dpEnv = { ...bus, VLT_CREDENTIAL_CACHE_MS: '1000' };
    dps = await Promise.all([
      group.start('data-plane', { label: 'data-plane-1', env: dpEnv }),
      group.start('data-plane', { label: 'data-plane-2', env: dpEnv }),
    ]);
    [audit, notifier] = await Promise.all([
      group.start('audit', { env: withDb }),
      group.start('notifier', { env: { ...withDb, VLT_NOTIFIER_ACK_WAIT_MS: '3000' } }),
    ]);

    const { user } = await signUp(
      cp.baseUrl,
      `faults-${randomBytes(4).toString('hex')}@e2e.test`,
      'faults-password-1',
    );
    admin = bearerAdmin(cp.baseUrl, (await apiJwt(cp.baseUrl, user.session)).token);
    connectionId = (
      await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount })
    ).connection.id;
    const allow = [{ baseUrl: fx.mock.baseUrl, methods: ['GET', 'POST'], pathPatterns: ['/rest/api/3/*'] }];
    const bind = async (name: string, settings: Parameters<typeof createPolicy>[3]) => {
      const enrolled = await enrolAgent(admin, cp.baseUrl, `${name}-${randomBytes(3).toString('hex')}`);
      const { policy } = await createPolicy(admin, enrolled.agent.id, connectionId, settings);
      expectStatus(await putAllowlists(admin, policy.id, allow), 200);
      return { id: enrolled.agent.id, token: enrolled.token };
    };
    agent = await bind('steady', READ_WRITE_UNATTENDED);
    reviewed = await bind('reviewed', { ...READ_WRITE_UNATTENDED, stepUpApproval: 'always' });
  }, 180_000);

  afterAll(async () => {
    await group.stopAll();
    await Promise.allSettled([nats?.dispose(), pg?.dispose()]);
    await fx?.dispose();
  }, 60_000);

  const issueBody = (summary: string) => ({
    fields: { project: { key: 'OPS' }, summary, issuetype: { name: 'Task' } },
  });

  /** One agent write on one data plane; what the agent saw. */
  async function write(
    dp: ServiceProcess,
    who: { token: string },
    summary: string,
    extra: Record<string, unknown> = {},
  ): Promise<{ status: number; body: Record<string, unknown> | null }> {
    try {
      const res = await request(`${dp.baseUrl}/v1/vault/execute`, {
        method: 'POST',
        headers: { authorization: `Bearer ${who.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'B',
          connectionId,
          method: 'POST',
          url: `${fx.mock.baseUrl}/rest/api/3/issue`,
          body: issueBody(summary),
          ...extra,
        }),
        signal: AbortSignal.timeout(20_000),
      });
      const text = await res.body.text();
      return {
        status: res.statusCode,
        body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : null,
      };
    } catch {
      return { status: 0, body: null };
    }
  }

  /** Steady load on both data planes while `fault` runs, and a little after. */
  async function underLoad(fault: string, run: () => Promise<void>): Promise<CallOutcome[]> {
    let stop = false;
    const mine: CallOutcome[] = [];
    const worker = async (i: number) => {
      while (!stop) {
        const summary = `${fault}-${++seq}`;
        const dp = dps[(seq + i) % dps.length]!;
        const r = await write(dp, agent, summary);
        const outcome: CallOutcome = { fault, summary, status: r.status };
        if (typeof r.body?.auditId === 'string') outcome.auditId = r.body.auditId;
        mine.push(outcome);
        outcomes.push(outcome);
        await sleep(r.status === 200 ? 40 : 150);
      }
    };
    const workers = [worker(0), worker(1)];
    await sleep(500);
    await run();
    // Served again: wait until a call on each data plane succeeds, then a little more load.
    for (const dp of dps) {
      const deadline = Date.now() + 45_000;
      while ((await write(dp, agent, `${fault}-probe-${++seq}`)).status !== 200) {
        if (Date.now() > deadline) throw new Error(`${dp.label} does not serve after ${fault}`);
        await sleep(250);
      }
    }
    await sleep(500);
    stop = true;
    await Promise.all(workers);
    const ok = mine.filter((o) => o.status === 200).length;
    console.log(
      `${fault}: ${mine.length} calls, ${ok} succeeded, ${mine.filter((o) => o.status === 503).length} × 503, ${mine.filter((o) => o.status === 0).length} unanswered, other: ${JSON.stringify(mine.filter((o) => ![0, 200, 503].includes(o.status)).map((o) => o.status))}`,
    );
    return mine;
  }

  const kill9 = async (p: ServiceProcess) => {
    await p.kill();
    await sleep(1_500);
    await p.start();
  };

  it('a data plane killed mid-load; an approved write replayed on both data planes as one dies runs once', async () => {
    const summary = `approved-${randomBytes(3).toString('hex')}`;
    const asked = await write(dps[0]!, reviewed, summary);
    expect(asked.status).toBe(202);
    const approvalId = asked.body!.approvalRequestId as string;
    expectStatus(
      await http('POST', `${cp.baseUrl}/v1/approvals/${approvalId}/approve`, { headers: admin.headers }),
      200,
    );

    const mine = await underLoad('data-plane', async () => {
      const replays = [
        write(dps[0]!, reviewed, summary, { approvalId }),
        write(dps[1]!, reviewed, summary, { approvalId }),
      ];
      await dps[1]!.kill();
      const answers = await Promise.all(replays);
      expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(1);
      await sleep(1_000);
      await dps[1]!.start();
      // And once more, afterwards: spent.
      expect((await write(dps[1]!, reviewed, summary, { approvalId })).status).not.toBe(200);
    });
    expect(mine.some((o) => o.status === 200)).toBe(true);
    const ran = [...fx.mock.issues.values()].filter((i) => i.fields.summary === summary);
    expect(ran.length, 'the approved write reached the provider at most once').toBeLessThanOrEqual(1);
  }, 120_000);

  it('the audit writer killed: calls keep succeeding', async () => {
    const mine = await underLoad('audit', () => kill9(audit));
    expect(mine.filter((o) => o.status !== 200)).toEqual([]);
  }, 120_000);

  it('the notifier killed: calls keep succeeding', async () => {
    const mine = await underLoad('notifier', () => kill9(notifier));
    expect(mine.filter((o) => o.status !== 200)).toEqual([]);
  }, 120_000);

  it('the control plane killed: the data planes keep serving from their caches', async () => {
    const mine = await underLoad('control-plane', async () => {
      await cp.kill();
      await sleep(3_000); // three credential TTLs without a control plane
      await cp.start();
    });
    expect(mine.filter((o) => o.status !== 200)).toEqual([]);
  }, 120_000);

  it('NATS killed: nothing runs unrecorded (503 while it is down), and calls resume', async () => {
    const mine = await underLoad('nats', async () => {
      await nats.kill();
      await sleep(2_000);
      await nats.start();
    });
    expect(mine.every((o) => [200, 503].includes(o.status))).toBe(true);
    expect(mine.some((o) => o.status === 503)).toBe(true);
  }, 120_000);

  it('PostgreSQL killed: the data planes keep serving; the audit rows land after it is back', async () => {
    const mine = await underLoad('postgres', async () => {
      await pg.kill();
      await sleep(3_000);
      await pg.start();
    });
    expect(mine.filter((o) => o.status !== 200)).toEqual([]);
  }, 120_000);

  it('afterwards: one requested and one terminal row per success, no provider call unrecorded, nothing twice', async () => {
    const ok = outcomes.filter((o) => o.status === 200);
    let events: AuditEvent[] = [];
    const deadline = Date.now() + 60_000;
    // Waits for every row asserted below: a call's execution_requested row can land after its
    // terminal row (each retried on its own backoff while PostgreSQL was down).
    const bothRows = (ids: Map<string, AuditEvent>) =>
      ok.every((o) => {
        const done = ids.get(o.auditId!);
        return done !== undefined && ids.has(String(done.metadata.requestAuditId));
      });
    for (;;) {
      events = await auditAll(admin, { agentId: agent.id });
      if (bothRows(new Map(events.map((e) => [e.auditId, e])))) break;
      if (Date.now() > deadline) break;
      await sleep(1_000);
    }
    const byId = new Map<string, AuditEvent[]>();
    for (const e of events) byId.set(e.auditId, [...(byId.get(e.auditId) ?? []), e]);
    expect(
      [...byId.values()].filter((rows) => rows.length > 1),
      'no auditId twice',
    ).toEqual([]);
    const unrecorded = ok.filter((o) => {
      const done = byId.get(o.auditId!)?.[0];
      const requested = done && byId.get(String(done.metadata.requestAuditId))?.[0];
      return !(done?.action === 'execution_completed' && requested?.action === 'execution_requested');
    });
    expect(
      unrecorded.map((o) => o.summary),
      'successes without both rows',
    ).toEqual([]);

    const ours = new Set(outcomes.map((o) => o.summary));
    const providerCalls = [...fx.mock.issues.values()].filter((i) =>
      ours.has(i.fields.summary as string),
    ).length;
    const requested = events.filter((e) => e.action === 'execution_requested').length;
    expect(
      providerCalls,
      'provider calls never outnumber durable execution_requested rows',
    ).toBeLessThanOrEqual(requested);
    // Every success reached the provider exactly once.
    const created = new Map<string, number>();
    for (const i of fx.mock.issues.values())
      created.set(i.fields.summary as string, (created.get(i.fields.summary as string) ?? 0) + 1);
    expect(ok.filter((o) => created.get(o.summary) !== 1).map((o) => o.summary)).toEqual([]);

    const table = ['data-plane', 'audit', 'notifier', 'control-plane', 'nats', 'postgres'].map((fault) => {
      const mine = outcomes.filter((o) => o.fault === fault);
      return `${fault}: ${mine.length} calls, ${mine.filter((o) => o.status === 200).length} ok, ${mine.filter((o) => o.status === 503).length} × 503, ${mine.filter((o) => o.status === 0).length} unanswered`;
    });
    console.log(
      `fault suite: ${ok.length} successes, ${requested} execution_requested rows, ${providerCalls} provider calls\n  ${table.join('\n  ')}`,
    );
  }, 120_000);
});
