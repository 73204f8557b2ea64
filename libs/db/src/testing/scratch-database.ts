/** Test helpers (not exported from @vlt/db): throw-away databases on the run's server. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

/**
 * The run's database URL provided by tests/global-setup.ts, or '' with the reason when
 * PostgreSQL is not reachable. Under CI=true a missing server is an error, never a skip.
 */
export function realPostgres(): { url: string; reason: string } {
  const url = inject('databaseUrl');
  const reason = inject('servicesMissing') || 'PostgreSQL not reachable';
  if (!url && process.env.CI === 'true') throw new Error(`CI=true and PostgreSQL is missing: ${reason}`);
  return { url, reason };
}

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Creates an empty database next to `serverUrl`'s (same server and credentials). */
export async function createScratchDatabase(serverUrl: string, label: string): Promise<ScratchDatabase> {
  const name = `vlt_db_${label}_${randomBytes(4).toString('hex')}`;
  const admin = new URL(serverUrl);
  admin.pathname = '/postgres';
  const run = async (sql: string) => {
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await run(`CREATE DATABASE "${name}"`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => run(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

/** Rows of `_prisma_migrations`, oldest first. */
export interface MigrationRow {
  id: string;
  checksum: string;
  finished_at: Date | null;
  migration_name: string;
  logs: string | null;
  rolled_back_at: Date | null;
  started_at: Date;
  applied_steps_count: number;
}

export async function migrationRows(url: string): Promise<MigrationRow[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const res = await client.query<MigrationRow>(
      'SELECT * FROM _prisma_migrations ORDER BY started_at, migration_name',
    );
    return res.rows;
  } finally {
    await client.end();
  }
}

export async function query<T extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}
