import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDatabaseClients, type Sql } from './client.js';
import { openDatabase } from './open-database.js';
import { createScratchDatabase, realPostgres, type ScratchDatabase } from './testing/scratch-database.js';

const pg = realPostgres();

/** The statements this session holds prepared whose text mentions `marker`. */
async function preparedWith(sql: Sql, marker: string): Promise<string[]> {
  const rows = await sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`;
  return rows.map((r) => r.statement).filter((s) => s.includes(marker));
}

describe.skipIf(!pg.url)(
  `the sql handle on real PostgreSQL${pg.url ? '' : ` (skipped: ${pg.reason})`}`,
  () => {
    const scratch: ScratchDatabase[] = [];
    afterAll(async () => {
      await Promise.all(scratch.map((db) => db.drop()));
    });

    it('prepares a call site once per connection and keeps binding fresh values', async () => {
      const db = await createScratchDatabase(pg.url, 'prep');
      scratch.push(db);
      // One connection, so the catalogue below is the session the statements ran on.
      const { sql, close } = createDatabaseClients(db.url, { max: 1 });
      try {
        const probe = (n: number) =>
          sql<{ prepared_probe_v: number }>`SELECT ${n}::int + 1 AS prepared_probe_v`;
        expect((await probe(1))[0]?.prepared_probe_v).toBe(2);
        expect((await probe(41))[0]?.prepared_probe_v).toBe(42);
        expect((await probe(-1))[0]?.prepared_probe_v).toBe(0);
        expect(await preparedWith(sql, 'prepared_probe_v')).toEqual([
          'SELECT $1::int + 1 AS prepared_probe_v',
        ]);
      } finally {
        await close();
      }
    });

    it('prepares nothing when turned off (VLT_DB_PREPARED_STATEMENTS=false)', async () => {
      const db = await createScratchDatabase(pg.url, 'noprep');
      scratch.push(db);
      const { sql, close } = createDatabaseClients(db.url, { max: 1, preparedStatements: false });
      try {
        expect(
          (await sql<{ unprepared_probe_v: number }>`SELECT ${1}::int AS unprepared_probe_v`)[0]
            ?.unprepared_probe_v,
        ).toBe(1);
        expect(await preparedWith(sql, 'unprepared_probe_v')).toEqual([]);
      } finally {
        await close();
      }
    });
  },
);

describe('the sql handle on the embedded database', () => {
  it('never prepares named statements, whatever it is asked', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'vlt-prep-'));
    try {
      const opened = await openDatabase({ dataDir, migrate: false, preparedStatements: true });
      try {
        expect(
          (await opened.sql<{ embedded_probe_v: number }>`SELECT ${2}::int AS embedded_probe_v`)[0]
            ?.embedded_probe_v,
        ).toBe(2);
        expect(await preparedWith(opened.sql, 'embedded_probe_v')).toEqual([]);
      } finally {
        await opened.close();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
