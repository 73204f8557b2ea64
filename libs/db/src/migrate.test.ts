import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile, cp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrismaClient } from './client.js';
import { applyMigrations } from './migrate.js';
import { defaultMigrationsDir } from './paths.js';
import type { PrismaClient } from './generated/prisma/client.js';
import {
  expectCliCompatibleHistory,
  expectDatabaseConstraints,
  expectJtiSingleUse,
  expectRoundTrip,
  migrationFolders,
} from './testing/shared-checks.js';
import {
  createScratchDatabase,
  migrationRows,
  query,
  realPostgres,
  type ScratchDatabase,
} from './testing/scratch-database.js';

const pg = realPostgres();

describe.skipIf(!pg.url)(`migrations on real PostgreSQL${pg.url ? '' : ` (skipped: ${pg.reason})`}`, () => {
  const scratch: ScratchDatabase[] = [];
  const fresh = async (label: string) => {
    const db = await createScratchDatabase(pg.url, label);
    scratch.push(db);
    return db.url;
  };
  afterAll(async () => {
    await Promise.all(scratch.map((db) => db.drop()));
  });

  it('the global setup migrated the run database', async () => {
    await expectCliCompatibleHistory(pg.url);
  });

  it('applies every migration to an empty database, then nothing on the next call', async () => {
    const url = await fresh('apply');
    const folders = await migrationFolders();
    expect(folders.length).toBeGreaterThan(0);

    expect(await applyMigrations(url)).toEqual({ applied: folders });
    expect(await applyMigrations(url)).toEqual({ applied: [] });
    await expectCliCompatibleHistory(url);

    const tables = await query<{ table_name: string }>(
      url,
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    );
    expect(tables.map((t) => t.table_name)).toEqual(
      expect.arrayContaining([
        'users',
        'agents',
        'connections',
        'policies',
        'audit_events',
        'assertion_jtis',
        'outbox_events',
        'rate_limit_counters',
      ]),
    );
  });

  it('two concurrent calls in one process apply each migration once', async () => {
    const url = await fresh('concurrent');
    const [a, b] = await Promise.all([applyMigrations(url), applyMigrations(url)]);
    expect([...a.applied, ...b.applied]).toEqual(await migrationFolders());
    expect(await migrationRows(url)).toHaveLength((await migrationFolders()).length);
  });

  it('two processes started together apply each migration once', async () => {
    const url = await fresh('processes');
    const child = fileURLToPath(new URL('./testing/apply-migrations-child.ts', import.meta.url));
    const run = () =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', child, url], { timeout: 60_000 });
    const outputs = await Promise.all([run(), run()]);
    const applied = outputs.map((o) => JSON.parse(o.stdout) as string[]);
    expect(applied.flat().sort()).toEqual(await migrationFolders());
    expect(applied.some((names) => names.length === 0)).toBe(true);
    await expectCliCompatibleHistory(url);
  });

  describe('a migration that fails', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'vlt-migrations-'));
      await cp(defaultMigrationsDir(), dir, { recursive: true });
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('is rolled back completely and recorded as failed', async () => {
      const url = await fresh('atomic');
      const name = '29990101000000_broken';
      await mkdir(path.join(dir, name));
      // A failing statement after successful ones.
      await writeFile(
        path.join(dir, name, 'migration.sql'),
        [
          'CREATE TABLE "half_done" ("note" TEXT);',
          'INSERT INTO "half_done" VALUES (\'x\');',
          'SELECT 1/0;',
        ].join('\n'),
      );
      await expect(applyMigrations(url, { migrationsDir: dir })).rejects.toThrow(/division by zero/);

      const exists = await query<{ t: string | null }>(
        url,
        `SELECT to_regclass('public.half_done')::text AS t`,
      );
      expect(exists[0]?.t).toBeNull();
      const failed = (await migrationRows(url)).find((r) => r.migration_name === name);
      expect(failed?.finished_at).toBeNull();
      expect(failed?.logs).toMatch(/division by zero/);
      await rm(path.join(dir, name), { recursive: true });
    });

    // adapter-pg's own executeScript splits on every ';' and would cut this migration apart.
    it('keeps semicolons inside literals and comments intact', async () => {
      const url = await fresh('literal');
      const name = '29990101000001_literal';
      await mkdir(path.join(dir, name));
      await writeFile(
        path.join(dir, name, 'migration.sql'),
        `CREATE TABLE "notes" ("note" TEXT);\n-- a comment; with a semicolon\nINSERT INTO "notes" VALUES ('a;b');\n`,
      );
      await applyMigrations(url, { migrationsDir: dir });
      expect(await query<{ note: string }>(url, 'SELECT note FROM notes')).toEqual([{ note: 'a;b' }]);
      await rm(path.join(dir, name), { recursive: true });
    });
  });

  describe('through the Prisma client', () => {
    let prisma: PrismaClient;
    beforeAll(async () => {
      const url = await fresh('client');
      await applyMigrations(url);
      prisma = createPrismaClient(url, { max: 4 });
    });
    afterAll(async () => {
      await prisma.$disconnect();
    });

    it('round-trips rows, Json, enums and cascades', () => expectRoundTrip(prisma));
    it('lets exactly one insert of an assertion jti succeed', () => expectJtiSingleUse(prisma));
    it('enforces the constraints the services rely on', () => expectDatabaseConstraints(prisma));
  });
});
