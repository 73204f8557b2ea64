/**
 * The production shape: control plane, two data-plane replicas, audit and notifier as separate
 * processes over the run's real PostgreSQL database and NATS JetStream. With no edge process, the
 * tests send `/v1/vault/*` to the replicas and everything else to the control plane.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { ProcessGroup, freePort } from '../support/processes.js';
import { ownDatabase, realServices } from '../support/services.js';
import { gatewayScenario, scenarioEnv, type ScenarioEnv } from './gateway-scenario.js';

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

    gatewayScenario(() => {
      if (!env) throw new Error('the split shape did not start (see beforeAll)');
      return env;
    });
  },
);
