/**
 * `migrate deploy` without the Prisma CLI: applies the folders of prisma/migrations that the
 * database has not recorded in `_prisma_migrations`, through the wasm schema engine.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { defaultMigrationsDir } from './paths.js';
import { NO_FILTER, openSchemaEngine, readMigrationsList } from './schema-engine.js';

export interface ApplyMigrationsOptions {
  /** Folder holding `<timestamp>_<name>/migration.sql`; defaults to prisma/migrations. */
  migrationsDir?: string;
  /** How long to wait for another process that is migrating the same database. */
  lockTimeoutMs?: number;
}

export interface ApplyMigrationsResult {
  /** Names of the migrations applied by this call (empty when already up to date). */
  applied: string[];
}

/**
 * Session-level advisory lock that serialises migrators across processes and replicas. Its own
 * key ("vlt-mig" in ASCII), not the engine's 72707369: the engine takes that one on its own
 * connection, and sharing it with a second session of this process would deadlock.
 */
const MIGRATION_LOCK_KEY = '33333293486008679';
const LOCK_POLL_MS = 200;

// Calls in one process run one after the other. The advisory lock cannot do that on embedded
// PGlite, where every connection is the same session and a session's locks are re-entrant.
let queue: Promise<unknown> = Promise.resolve();

/**
 * Applies pending migrations to `databaseUrl` and returns what it applied. Idempotent, and safe
 * when several processes start at once: one applies, the others wait for it and find nothing
 * left to do. Each migration runs as one transaction (see schema-engine.ts).
 */
export function applyMigrations(
  databaseUrl: string,
  opts: ApplyMigrationsOptions = {},
): Promise<ApplyMigrationsResult> {
  const run = queue.then(() => applyLocked(databaseUrl, opts));
  queue = run.catch(() => undefined);
  return run;
}

async function applyLocked(
  databaseUrl: string,
  opts: ApplyMigrationsOptions,
): Promise<ApplyMigrationsResult> {
  const migrationsList = await readMigrationsList(opts.migrationsDir ?? defaultMigrationsDir());
  const lockClient = new pg.Client({ connectionString: databaseUrl });
  lockClient.on('error', () => {}); // a dropped connection surfaces through the next query
  await lockClient.connect();
  try {
    await acquireLock(lockClient, opts.lockTimeoutMs ?? 120_000);
    try {
      const { engine, close } = await openSchemaEngine(databaseUrl);
      try {
        const out = await engine.applyMigrations({ migrationsList, filters: NO_FILTER });
        return { applied: out.appliedMigrationNames };
      } finally {
        // Closed before the lock is released: the engine's own advisory lock lives as long as
        // its connection, and the next migrator's engine would otherwise wait for it.
        await close();
      }
    } finally {
      await lockClient.query('SELECT pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await lockClient.end();
  }
}

/**
 * Polls `pg_try_advisory_lock` instead of blocking in `pg_advisory_lock` with a session
 * `lock_timeout`: on PGlite the session is shared with the application, whose settings must
 * not change under it.
 */
async function acquireLock(client: pg.Client, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS locked', [
      MIGRATION_LOCK_KEY,
    ]);
    if (res.rows[0]?.locked) return;
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for another process to finish migrating`);
    }
    await sleep(LOCK_POLL_MS);
  }
}
