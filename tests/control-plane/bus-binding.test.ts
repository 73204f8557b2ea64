/**
 * A database belongs to one bus (ADR 0071). The outbox relay publishes every unpublished row of
 * its database onto its own bus prefix, so a control plane on another prefix would publish this
 * deployment's revocations where none of its data planes read. It refuses to start instead.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabaseClients, type Sql } from '@vlt/db';
import { bindDatabaseToBus, DatabaseBoundToOtherBusError } from '@vlt/control-plane';
import { startInProcessGateway } from '../support/in-process-gateway.js';
import { ownDatabase, realServices } from '../support/services.js';

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();

describe.skipIf(unavailable)('a database belongs to one bus', () => {
  let db: Awaited<ReturnType<typeof ownDatabase>>;
  let clients: ReturnType<typeof createDatabaseClients>;
  let sql: Sql;
  beforeAll(async () => {
    db = await ownDatabase('binding');
    clients = createDatabaseClients(db.url);
    sql = clients.sql;
  });
  afterAll(async () => {
    await clients?.prisma.$disconnect();
    await db?.drop();
  });

  it('replicas starting together bind it once; every other prefix is refused, naming both', async () => {
    const results = await Promise.allSettled(['a', 'b', 'c', 'a', 'b'].map((p) => bindDatabaseToBus(sql, p)));
    const bound = (await sql<{ prefix: string }>`SELECT prefix FROM bus_binding`).map((r) => r.prefix);
    expect(bound).toHaveLength(1);
    const winner = bound[0]!;
    ['a', 'b', 'c', 'a', 'b'].forEach((p, i) => {
      const r = results[i]!;
      if (p === winner) expect(r.status).toBe('fulfilled');
      else {
        expect(r.status).toBe('rejected');
        const err = (r as PromiseRejectedResult).reason as Error;
        expect(err).toBeInstanceOf(DatabaseBoundToOtherBusError);
        expect(err.message).toContain(`bound to bus prefix "${winner}"`);
        expect(err.message).toContain(`uses "${p}"`);
      }
    });
    // A restart of the winner binds again without complaint.
    await expect(bindDatabaseToBus(sql, winner)).resolves.toBeUndefined();
  });

  it('regression: a gateway on another bus prefix refuses to start on a bound database, and the first keeps serving', async () => {
    const shared = await ownDatabase('binding_gw');
    const nats = { NATS_URL: realServices.natsUrl(), LOG_LEVEL: 'warn' };
    const first = await startInProcessGateway({
      ...nats,
      DATABASE_URL: shared.url,
      VLT_NATS_PREFIX: `${realServices.busPrefix()}_bind_a`,
    });
    try {
      await expect(
        startInProcessGateway({
          ...nats,
          DATABASE_URL: shared.url,
          VLT_NATS_PREFIX: `${realServices.busPrefix()}_bind_b`,
        }),
      ).rejects.toThrow(DatabaseBoundToOtherBusError);
      expect((await fetch(`${first.baseUrl}/health`)).status).toBe(200);
      const client = new pg.Client({ connectionString: shared.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ prefix: string }>('SELECT prefix FROM bus_binding');
        expect(rows).toEqual([{ prefix: `${realServices.busPrefix()}_bind_a` }]);
      } finally {
        await client.end();
      }
    } finally {
      await first.close();
      await shared.drop();
    }
  });
});
