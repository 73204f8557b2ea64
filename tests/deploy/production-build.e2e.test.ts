/**
 * The production build runs: every service compiled to JavaScript by
 * scripts/build-services.mjs (what deploy/Dockerfile does), beside production dependencies only
 * (installed flat, as the image does), started with plain `node` (no TypeScript loader) in the
 * split shape over the run's PostgreSQL and NATS; then one brokered call, with an answer large
 * enough to take the data plane's worker-thread path (a second file the build must ship).
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createIssueTrackerConnection,
  createPolicy,
  enrolAgent,
  execute,
  expectStatus,
  putAllowlists,
  READ_WRITE_UNATTENDED,
  signUp,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { ProcessGroup, freePort, repoRoot, type ServiceProcess } from '../support/processes.js';
import { prepareProductionBuild } from '../support/production-build.js';
import { ownDatabase, realServices } from '../support/services.js';

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();
if (unavailable) console.warn(`production build e2e skipped: ${realServices.missing()}`);

describe.skipIf(unavailable)('the production build (plain node, production dependencies)', () => {
  const group = new ProcessGroup();
  let fx: E2eFixtures;
  let app: string;
  let db: Awaited<ReturnType<typeof ownDatabase>> | undefined;
  let cp: ServiceProcess;
  let dp: ServiceProcess;

  beforeAll(async () => {
    app = await mkdtemp(path.join(tmpdir(), 'vlt-prod-'));
    await prepareProductionBuild(app);

    [fx, db] = await Promise.all([startE2eFixtures(), ownDatabase('prod')]);
    const cpPort = await freePort();
    const bus = {
      ...fx.commonEnv,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      PUBLIC_BASE_URL: `http://127.0.0.1:${cpPort}`,
      NATS_URL: realServices.natsUrl(),
      VLT_NATS_PREFIX: `${realServices.busPrefix()}_prod`,
    };
    const withDb = { ...bus, DATABASE_URL: db.url };
    cp = await group.start('control-plane', {
      built: app,
      port: cpPort,
      env: { ...withDb, VLT_MASTER_KEY: fx.masterKey },
    });
    [dp] = await Promise.all([
      group.start('data-plane', { built: app, env: bus }),
      group.start('audit', { built: app, env: withDb }),
    ]);
  }, 240_000);

  afterAll(async () => {
    await group.stopAll();
    await fx?.dispose();
    await db?.drop();
    if (app) await rm(app, { recursive: true, force: true });
  }, 60_000);

  it('ships production dependencies only: no TypeScript loader, compiler or test tooling', async () => {
    const installed = new Set(await readdir(path.join(app, 'node_modules')));
    // (`typescript` and `prisma` do come, as optional peers @prisma/client resolves.)
    for (const dev of ['tsx', 'vitest', 'vite', 'eslint', 'prettier', 'esbuild']) {
      expect(installed.has(dev), dev).toBe(false);
    }
    expect(installed.has('fastify')).toBe(true);
    const built = await readdir(path.join(app, 'dist', 'services', 'data-plane'));
    expect(built).toEqual(expect.arrayContaining(['main.js', 'response-worker.js']));
  });

  it('installs the patched dependencies the workspace runs (ADR 0091)', async () => {
    // libs/bus/test/nats-core-patch.test.ts checks what the workspace's copy does.
    const fromBus = createRequire(path.join(repoRoot, 'libs/bus/package.json'));
    const fromTransport = createRequire(fromBus.resolve('@nats-io/transport-node'));
    const workspace = path.join(path.dirname(fromTransport.resolve('@nats-io/nats-core')), 'request.js');
    const shipped = path.join(app, 'node_modules/@nats-io/nats-core/lib/request.js');
    expect(await readFile(shipped, 'utf8')).toBe(await readFile(workspace, 'utf8'));
  });

  it('brokers a call end to end, a large answer through the worker thread', async () => {
    const { user } = await signUp(
      cp.baseUrl,
      `prod-${randomBytes(4).toString('hex')}@e2e.test`,
      'production-password-1',
    );
    const admin = bearerAdmin(cp.baseUrl, (await apiJwt(cp.baseUrl, user.session)).token);
    const { connection } = await createIssueTrackerConnection(admin, {
      siteUrl: fx.mock.baseUrl,
      ...fx.mockAccount,
    });
    const agent = await enrolAgent(admin, cp.baseUrl, `prod-${randomBytes(3).toString('hex')}`);
    const { policy } = await createPolicy(admin, agent.agent.id, connection.id, READ_WRITE_UNATTENDED);
    expectStatus(
      await putAllowlists(admin, policy.id, [
        { baseUrl: fx.mock.baseUrl, methods: ['GET'], pathPatterns: ['/rest/api/3/*'] },
      ]),
      200,
    );
    const small = await execute(dp.baseUrl, agent.token, {
      connectionId: connection.id,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself`,
    });
    expect(small.status, small.text).toBe(200);

    // About 600 KB: above the 256 KiB from which answers are filtered in the worker pool.
    const issues = Array.from({ length: 4_000 }, (_, i) => ({
      id: String(i),
      key: `OPS-${i}`,
      summary: 'x'.repeat(100),
    }));
    fx.mock.respondOnce({ status: 200, headers: { 'content-type': 'application/json' }, body: { issues } });
    const large = await execute(dp.baseUrl, agent.token, {
      connectionId: connection.id,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/search`,
    });
    expect(large.status, large.text.slice(0, 300)).toBe(200);
    expect((large.body as unknown as { body: unknown }).body).toEqual({ issues });
  });
});
