import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SNAPSHOT_FILE, createMigration, diffAgainstLatestSnapshot } from './migration-create.js';
import { defaultMigrationsDir, defaultSchemaPath } from './paths.js';
import { openOfflineSchemaEngine, NO_FILTER } from './schema-engine.js';
import { migrationFolders } from './testing/shared-checks.js';

describe('the committed migrations', () => {
  it('match prisma/schema.prisma (run `pnpm db:migration:create <name>` after editing it)', async () => {
    expect(await diffAgainstLatestSnapshot(defaultSchemaPath(), defaultMigrationsDir())).toBe('');
  });

  it('each start with the SQL generated between consecutive snapshots', async () => {
    // Hand-written SQL may follow the generated part, but the generated part must be intact,
    // or the snapshots no longer describe what the migrations build.
    const dir = defaultMigrationsDir();
    const { engine, close } = await openOfflineSchemaEngine();
    try {
      let previous: string | null = null;
      for (const folder of await migrationFolders(dir)) {
        const snapshot = await readFile(path.join(dir, folder, SNAPSHOT_FILE), 'utf8');
        const { stdout } = await engine.diff({
          from: previous
            ? { tag: 'schemaDatamodel', files: [{ path: 'prev.prisma', content: previous }] }
            : { tag: 'empty' },
          to: { tag: 'schemaDatamodel', files: [{ path: 'next.prisma', content: snapshot }] },
          script: true,
          exitCode: null,
          filters: NO_FILTER,
        });
        const sql = await readFile(path.join(dir, folder, 'migration.sql'), 'utf8');
        // Between equal snapshots the engine answers a marker comment: a hand-written migration.
        const generated = (stdout ?? '').trim().replace(/^-- This is an empty migration\.$/, '');
        expect(sql.startsWith(generated), folder).toBe(true);
        previous = snapshot;
      }
    } finally {
      await close();
    }
  });
});

describe('createMigration', () => {
  let work: string;
  let schemaPath: string;
  let migrationsDir: string;
  const baseSchema = `
datasource db {
  provider = "postgresql"
}

model Thing {
  id   String @id @db.Uuid
  name String
  @@map("things")
}
`;

  beforeEach(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'vlt-create-'));
    schemaPath = path.join(work, 'schema.prisma');
    migrationsDir = path.join(work, 'migrations');
    await writeFile(schemaPath, baseSchema);
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('writes the first migration from an empty database, with snapshot and lock file', async () => {
    const { folder, sql } = await createMigration({
      name: 'Init things!',
      schemaPath,
      migrationsDir,
      now: new Date('2031-02-03T04:05:06Z'),
    });
    expect(folder).toBe(path.join(migrationsDir, '20310203040506_init_things'));
    expect(sql).toContain('CREATE TABLE "things"');
    expect(await readFile(path.join(folder!, 'migration.sql'), 'utf8')).toBe(`${sql}\n`);
    expect(await readFile(path.join(folder!, SNAPSHOT_FILE), 'utf8')).toBe(baseSchema);
    expect(await readFile(path.join(migrationsDir, 'migration_lock.toml'), 'utf8')).toContain(
      'provider = "postgresql"',
    );
  });

  it('writes only the difference to the newest snapshot, and nothing when there is none', async () => {
    await createMigration({ name: 'init', schemaPath, migrationsDir, now: new Date('2031-01-01T00:00:00Z') });
    expect(await createMigration({ name: 'noop', schemaPath, migrationsDir })).toEqual({
      folder: null,
      sql: '',
    });

    await writeFile(schemaPath, baseSchema.replace('name String', 'name String\n  note String?'));
    const { folder, sql } = await createMigration({
      name: 'add note',
      schemaPath,
      migrationsDir,
      now: new Date('2031-01-02T00:00:00Z'),
    });
    expect(path.basename(folder!)).toBe('20310102000000_add_note');
    expect(sql).toMatch(/ALTER TABLE "things" ADD COLUMN\s+"note" TEXT/);
    expect(sql).not.toContain('CREATE TABLE');
    expect((await readdir(migrationsDir)).sort()).toEqual([
      '20310101000000_init',
      '20310102000000_add_note',
      'migration_lock.toml',
    ]);
  });

  it('writes an empty migration for hand-written SQL only when asked', async () => {
    await createMigration({ name: 'init', schemaPath, migrationsDir, now: new Date('2031-01-01T00:00:00Z') });
    const { folder } = await createMigration({
      name: 'backfill',
      schemaPath,
      migrationsDir,
      allowEmpty: true,
      now: new Date('2031-01-03T00:00:00Z'),
    });
    expect(await readFile(path.join(folder!, 'migration.sql'), 'utf8')).toMatch(/^-- Empty migration/);
  });

  it('rejects a name without letters or digits', async () => {
    await expect(createMigration({ name: ' -- ', schemaPath, migrationsDir })).rejects.toThrow(
      /needs a name/,
    );
  });
});
