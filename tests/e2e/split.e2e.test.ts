/**
 * The production shape: control plane, two data-plane replicas, audit and notifier as separate
 * processes over the run's real PostgreSQL database and NATS JetStream. With no edge process, the
 * tests send `/v1/vault/*` to the replicas and everything else to the control plane.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeResult, pollAudit } from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { ProcessGroup, freePort } from '../support/processes.js';
import { ownDatabase, realServices } from '../support/services.js';
import { gatewayScenario, scenarioEnv, type ScenarioEnv } from './gateway-scenario.js';
import { createScenario, newBroker } from './scenarios/setup.js';

/** Below `docker stop`'s 10 s, after which it kills. */
const STOP_WITHIN_MS = 8_000;

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();
if (unavailable) console.warn(`split e2e skipped: ${realServices.missing()}`);

describe.skipIf(unavailable)(
  unavailable ? `split shape (skipped: ${realServices.missing()})` : 'split shape',
  () => {
    const group = new ProcessGroup();
    let fx: E2eFixtures | undefined;
    let env: ScenarioEnv | undefined;
    let db: Awaited<ReturnType<typeof ownDatabase>> | undefined;

    beforeAll(async () => {
      [fx, db] = await Promise.all([startE2eFixtures(), ownDatabase('split')]);
      const cpPort = await freePort();
      const publicBaseUrl = `http://127.0.0.1:${cpPort}`;
      const bus = {
        ...fx.commonEnv,
        PUBLIC_BASE_URL: publicBaseUrl,
        NATS_URL: realServices.natsUrl(),
        VLT_NATS_PREFIX: `${realServices.busPrefix()}_split`,
      };
      const withDb = { ...bus, DATABASE_URL: db.url };
      // The control plane first: it owns the database and publishes what the others read.
      const cp = await group.start('control-plane', {
        port: cpPort,
        env: { ...withDb, VLT_MASTER_KEY: fx.masterKey },
      });
      // The data plane keeps no database connection and never holds the master key.
      const [dp1, dp2] = await Promise.all([
        group.start('data-plane', { label: 'data-plane-1', env: bus }),
        group.start('data-plane', { label: 'data-plane-2', env: bus }),
        group.start('audit', { env: withDb }),
        group.start('notifier', { env: withDb }),
      ]);
      env = scenarioEnv(
        fx,
        { controlPlane: cp.baseUrl, dataPlanes: [dp1!.baseUrl, dp2!.baseUrl], publicBaseUrl },
        () => group.allLines(),
      );
    }, 180_000);

    afterAll(async () => {
      await group.stopAll();
      await fx?.dispose();
      await db?.drop();
    }, 60_000);

    const getEnv = () => {
      if (!env) throw new Error('the split shape did not start (see beforeAll)');
      return env;
    };
    gatewayScenario(getEnv);

    // Last in this file: it stops the processes.
    it('on SIGTERM every process drains and exits by itself with code 0, before docker stop would kill it', async () => {
      // A call audited just now: the audit writer's pool holds a connection it used a moment ago,
      // the one that used to keep its process alive for pg's 10 s idle timeout.
      const sc = createScenario(getEnv);
      const b = await newBroker(sc, 'stop');
      const r = await b.call('last call', getEnv().dataPlanes[0]!, {
        connectionId: b.connId,
        method: 'GET',
        url: `${getEnv().mock.baseUrl}/rest/api/3/myself`,
      });
      expect(r.status, describeResult(r)).toBe(200);
      const rows = await pollAudit(b.ws.admin, { agentId: b.main.id }, (events) =>
        events.some((e) => e.auditId === r.body.auditId),
      );
      expect(rows.map((e) => e.auditId)).toContain(r.body.auditId);

      await Promise.all(group.processes.map((p) => p.stop(STOP_WITHIN_MS)));
      expect(
        Object.fromEntries(group.processes.map((p) => [p.label, p.exitStatus])),
        group
          .allLines()
          .slice(-40)
          .map((l) => `[${l.process}] ${l.text}`)
          .join('\n'),
      ).toEqual(Object.fromEntries(group.processes.map((p) => [p.label, { code: 0, signal: null }])));
    }, 60_000);
  },
);
