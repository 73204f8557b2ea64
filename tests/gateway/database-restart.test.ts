/**
 * A PostgreSQL restart or failover terminates every session of the gateway. That must be an
 * outage of the affected requests at most, never an uncaught 'error' event that kills the
 * process (vitest reports uncaught errors as a failed run).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, signUp } from '../support/api-client.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';
import { realServices } from '../support/services.js';

describe.skipIf(!realServices.hasPostgres())(`database sessions terminated ${realServices.missing()}`, () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startInProcessGateway();
  });
  afterAll(async () => gw?.close());

  it('keeps serving after the server terminates all of its connections', async () => {
    await signUp(gw.baseUrl, `before-${randomBytes(4).toString('hex')}@db.test`, 'correct horse battery');
    const dbName = new URL(gw.databaseUrl!).pathname.slice(1);
    const admin = new pg.Client({ connectionString: realServices.databaseUrl() });
    admin.on('error', () => undefined);
    await admin.connect();
    try {
      const killed = await admin.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [dbName],
      );
      // The pool and the all-in-one's database claim were both connected.
      expect(killed.rowCount).toBeGreaterThanOrEqual(2);
    } finally {
      await admin.end();
    }
    await new Promise((r) => setTimeout(r, 300));
    expect((await http('GET', `${gw.baseUrl}/health`)).status).toBe(200);
    // New connections are opened as needed: writes work again.
    const { user } = await signUp(
      gw.baseUrl,
      `after-${randomBytes(4).toString('hex')}@db.test`,
      'correct horse battery',
    );
    expect(user.id).toMatch(/^[0-9a-f-]{36}$/);
  });
});
