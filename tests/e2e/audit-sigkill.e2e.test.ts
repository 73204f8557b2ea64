/**
 * Audit durability: the audit service is SIGKILLed while brokered calls are in flight, calls keep
 * flowing while it is dead, then it restarts. Every executed call must end up with exactly one
 * `execution_completed` row: JetStream keeps what was published, the durable consumer resumes,
 * and writes keyed by auditId make redeliveries harmless.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Admin,
  type AuditEvent,
  apiJwt,
  auditAll,
  bearerAdmin,
  countByAction,
  createIssueTrackerConnection,
  createPolicy,
  describeResult,
  enrolAgent,
  execute,
  pollAudit,
  putAllowlists,
  READ_WRITE_UNATTENDED,
  expectStatus,
  signUp,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { ProcessGroup, type ServiceProcess, freePort, sleep } from '../support/processes.js';
import { ownDatabase, realServices } from '../support/services.js';

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();
if (unavailable) console.warn(`audit SIGKILL e2e skipped: ${realServices.missing()}`);

const CALLS_PER_PHASE = 10;

describe.skipIf(unavailable)(
  unavailable ? `audit survives SIGKILL (skipped: ${realServices.missing()})` : 'audit survives SIGKILL',
  () => {
    const group = new ProcessGroup();
    let fx: E2eFixtures | undefined;
    let db: Awaited<ReturnType<typeof ownDatabase>> | undefined;
    let cp: ServiceProcess;
    let dp: ServiceProcess;
    let audit: ServiceProcess;
    let admin: Admin;
    let token: string;
    let agentId: string;
    let connectionId: string;

    beforeAll(async () => {
      [fx, db] = await Promise.all([startE2eFixtures(), ownDatabase('sigkill')]);
      const cpPort = await freePort();
      const publicBaseUrl = `http://127.0.0.1:${cpPort}`;
      const bus = {
        ...fx.commonEnv,
        LOG_LEVEL: process.env.VLT_E2E_LOG_LEVEL ?? 'info',
        PUBLIC_BASE_URL: publicBaseUrl,
        NATS_URL: realServices.natsUrl(),
        VLT_NATS_PREFIX: `${realServices.busPrefix()}_sigkill`,
      };
      const withDb = { ...bus, DATABASE_URL: db.url };
      cp = await group.start('control-plane', {
        port: cpPort,
        env: { ...withDb, VLT_MASTER_KEY: fx.masterKey },
      });
      [dp, audit] = await Promise.all([
        group.start('data-plane', { env: bus }),
        group.start('audit', { env: withDb }),
      ]);

      const { user } = await signUp(cp.baseUrl, `sigkill-${Date.now()}@e2e.test`, 'sigkill-password-123');
      admin = bearerAdmin(cp.baseUrl, (await apiJwt(cp.baseUrl, user.session)).token);
      const enrolled = await enrolAgent(admin, publicBaseUrl, 'sigkill-agent');
      agentId = enrolled.agent.id;
      token = enrolled.token;
      const conn = await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount });
      connectionId = conn.connection.id;
      const policy = await createPolicy(admin, agentId, connectionId, READ_WRITE_UNATTENDED);
      expectStatus(
        await putAllowlists(admin, policy.policy.id, [
          { baseUrl: fx.mock.baseUrl, methods: ['POST'], pathPatterns: ['/rest/api/3/issue'] },
        ]),
        200,
      );
    }, 180_000);

    afterAll(async () => {
      await group.stopAll();
      await fx?.dispose();
      await db?.drop();
    }, 60_000);

    it('loses and duplicates no audit row across an audit-service crash', async () => {
      const mock = fx!.mock;
      const responses: { summary: string; status: number; auditId?: string; text: string }[] = [];
      let n = 0;
      const createIssue = async () => {
        const summary = `sigkill-${++n}`;
        const r = await execute(dp.baseUrl, token, {
          connectionId,
          method: 'POST',
          url: `${mock.baseUrl}/rest/api/3/issue`,
          body: { fields: { project: { key: 'OPS' }, summary, issuetype: { name: 'Task' } } },
        });
        responses.push({ summary, status: r.status, auditId: r.body?.auditId, text: describeResult(r) });
      };
      const batch = (count: number) => Promise.all(Array.from({ length: count }, () => createIssue()));

      // Phase 1: a steady trickle while everything is up.
      for (let i = 0; i < CALLS_PER_PHASE; i++) await createIssue();

      // Phase 2: kill the audit service while a concurrent batch is in flight.
      const inFlight = batch(CALLS_PER_PHASE);
      const deadline = Date.now() + 10_000;
      while (mock.issues.size < CALLS_PER_PHASE + 3 && Date.now() < deadline) await sleep(5);
      await audit.kill();
      await inFlight;

      // Phase 3: calls keep working while no audit writer exists.
      await batch(CALLS_PER_PHASE / 2);
      await batch(CALLS_PER_PHASE / 2);

      // Phase 4: restart and keep calling concurrently while it catches up.
      await Promise.all([audit.start(), batch(CALLS_PER_PHASE)]);

      const total = CALLS_PER_PHASE * 4;
      expect(responses.length).toBe(total);
      const failed = responses.filter((r) => r.status !== 200);
      expect(
        failed.map((r) => r.text),
        'every call succeeds while audit is down',
      ).toEqual([]);
      expect(mock.issues.size, 'the site saw each call exactly once').toBe(total);

      // A message in flight at the kill is redelivered after the consumer's ack wait (30 s by default).
      const exec = (events: AuditEvent[]) => events.filter((e) => e.action.startsWith('execution_'));
      const events = await pollAudit(
        admin,
        { agentId },
        (ev) =>
          (countByAction(exec(ev)).execution_completed ?? 0) >= total &&
          (countByAction(exec(ev)).execution_requested ?? 0) >= total,
        75_000,
      );
      // Give a late redelivery the chance to show up as a duplicate.
      await sleep(1_000);
      const final = exec(await auditAll(admin, { agentId }));
      expect(final.length).toBeGreaterThanOrEqual(exec(events).length);
      expect(countByAction(final), 'execution rows after the crash').toEqual({
        execution_requested: total,
        execution_completed: total,
      });
      expect(final.every((e) => e.connectionId === connectionId)).toBe(true);
      const ids = final.map((e) => e.auditId);
      expect(new Set(ids).size, 'no auditId twice').toBe(ids.length);
      for (const r of responses) {
        const rows = final.filter((e) => e.auditId === r.auditId);
        expect(rows.length, `response auditId of ${r.summary} must match exactly one row`).toBe(1);
        expect(rows[0]!.action, `row named by the response of ${r.summary}`).toBe('execution_completed');
        // Each completed row points at its own execution_requested row (docs/decisions/0004).
        const requestAuditId = rows[0]!.metadata.requestAuditId;
        const requested = final.filter((e) => e.auditId === requestAuditId);
        expect(
          requested.map((e) => e.action),
          `execution_requested of ${r.summary}`,
        ).toEqual(['execution_requested']);
      }
    }, 180_000);
  },
);
