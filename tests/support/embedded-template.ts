/**
 * A migrated embedded database, made once per test run and copied into each in-process gateway
 * that runs on PGlite. Initialising a new PGlite data directory and migrating it took 5 to 6 s
 * (7 to 8 s of CPU) on the two-core CI machine, against about 1 s to open a copy (ADR 0089).
 *
 * The first start on an empty directory stays covered where it is the subject: the embedded
 * database's own tests and every all-in-one started as a child process.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** `<dir>/pg` as the all-in-one leaves it after a clean stop: initialised and migrated. */
export async function prepareEmbeddedTemplate(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'vlt-pg-template-'));
  try {
    // Imported here: @vlt/db loads the generated client, which exists only after db:generate.
    const { applyMigrations, startEmbeddedPostgres } = await import('@vlt/db');
    const db = await startEmbeddedPostgres(dir);
    try {
      await applyMigrations(db.url);
    } finally {
      await db.stop();
    }
    return dir;
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** Copies the template's database into a gateway's `VLT_DATA_DIR` before its first start. */
export async function seedEmbeddedDataDir(template: string, dataDir: string): Promise<void> {
  await cp(path.join(template, 'pg'), path.join(dataDir, 'pg'), { recursive: true });
}
