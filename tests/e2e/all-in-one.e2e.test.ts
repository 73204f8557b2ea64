/**
 * The embedded shape: one all-in-one process, no DATABASE_URL and no NATS_URL (PGlite in a temp
 * data dir, in-process bus), every route on one port. Needs no external service, so it always runs.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { ProcessGroup, freePort } from '../support/processes.js';
import { gatewayScenario, scenarioEnv, type ScenarioEnv } from './gateway-scenario.js';

describe('all-in-one shape', () => {
  const group = new ProcessGroup();
  let fx: E2eFixtures | undefined;
  let env: ScenarioEnv | undefined;

  beforeAll(async () => {
    fx = await startE2eFixtures();
    const port = await freePort();
    const publicBaseUrl = `http://127.0.0.1:${port}`;
    const aio = await group.start('all-in-one', {
      port,
      env: {
        ...fx.commonEnv,
        PUBLIC_BASE_URL: publicBaseUrl,
        VLT_DATA_DIR: await fx.tempDir(),
        VLT_MASTER_KEY: fx.masterKey,
      },
    });
    env = scenarioEnv(fx, { controlPlane: aio.baseUrl, dataPlanes: [aio.baseUrl], publicBaseUrl }, () =>
      group.allLines(),
    );
  }, 180_000);

  afterAll(async () => {
    await group.stopAll();
    await fx?.dispose();
  }, 60_000);

  gatewayScenario(() => {
    if (!env) throw new Error('the all-in-one process did not start (see beforeAll)');
    return env;
  });
});
