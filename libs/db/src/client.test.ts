import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createDatabaseClients } from './client.js';
import { createScratchDatabase, realPostgres, type ScratchDatabase } from './testing/scratch-database.js';

const server = realPostgres();

/** Server sessions opened under `name` (application_name), seen from a connection of its own. */
async function sessionsNamed(url: string, name: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
      [name],
    );
    return rows[0]!.n;
  } finally {
    await c.end();
  }
}

/** The count once it settles at `want` (a closed session leaves the server a moment later). */
async function sessionsSettle(url: string, name: string, want: number): Promise<number> {
  const deadline = Date.now() + 5_000;
  let n = await sessionsNamed(url, name);
  while (n !== want && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    n = await sessionsNamed(url, name);
  }
  return n;
}

describe.skipIf(!server.url)(
  `closing the database clients${server.url ? '' : ` (skipped: ${server.reason})`}`,
  () => {
    let db: ScratchDatabase | undefined;
    afterAll(async () => db?.drop());

    it('ends the pool of a process that only ran raw statements, so nothing keeps it alive', async () => {
      db = await createScratchDatabase(server.url, 'close');
      const name = `vlt_close_${process.pid}`;
      const url = new URL(db.url);
      url.searchParams.set('application_name', name);
      const clients = createDatabaseClients(url.toString());
      await clients.sql`SELECT 1`;
      expect(await sessionsNamed(db.url, name)).toBe(1);

      await clients.close();
      // Prisma never connected, so its disconnect alone left this session open for pg's idle
      // timeout (10 s), and the audit process alive with it.
      expect(await sessionsSettle(db.url, name, 0)).toBe(0);
      await expect(clients.sql`SELECT 1`).rejects.toThrow();
      // Idempotent: shutdown paths may call it twice.
      await expect(clients.close()).resolves.toBeUndefined();
    });
  },
);
