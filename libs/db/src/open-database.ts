import { createDatabaseClients, type Sql } from './client.js';
import { startEmbeddedPostgres } from './embedded.js';
import { applyMigrations } from './migrate.js';
import type { PrismaClient } from './generated/prisma/client.js';

export interface OpenDatabaseOptions {
  /** `DATABASE_URL`. Absent or empty: embedded PGlite in `<dataDir>/pg`. */
  databaseUrl?: string;
  /** `VLT_DATA_DIR`; only used for the embedded database. */
  dataDir: string;
  /** Apply pending migrations before returning. */
  migrate: boolean;
  /**
   * Pool size of the client; defaults to pg's 10, or 1 when embedded. PGlite has one session
   * and pglite-socket interleaves the extended-protocol messages of concurrent sockets (one
   * socket's Parse can replace another's unnamed statement between its Bind and Execute), so
   * every query of the embedded database goes through one connection, in order.
   */
  max?: number;
  /** Named prepared statements for the `sql` handle (default on); never on the embedded database. */
  preparedStatements?: boolean;
}

export interface OpenedDatabase {
  prisma: PrismaClient;
  /** Raw statements on the same pool (hot paths). */
  sql: Sql;
  url: string;
  embedded: boolean;
  /** Disconnects the client, then stops the embedded server if one was started. */
  close(): Promise<void>;
}

/** The database of a process: the configured PostgreSQL, or the embedded one when none is. */
export async function openDatabase(opts: OpenDatabaseOptions): Promise<OpenedDatabase> {
  const configured = opts.databaseUrl?.trim();
  const embedded = configured ? undefined : await startEmbeddedPostgres(opts.dataDir);
  const url = configured || (embedded?.url ?? '');
  try {
    if (opts.migrate) await applyMigrations(url);
    const clients = createDatabaseClients(url, {
      max: opts.max ?? (embedded ? 1 : undefined),
      // The embedded session outlives a pool connection: a reconnected client would prepare a
      // name the session already holds.
      preparedStatements: !embedded && (opts.preparedStatements ?? true),
    });
    let closed: Promise<void> | undefined;
    return {
      prisma: clients.prisma,
      sql: clients.sql,
      url,
      embedded: embedded !== undefined,
      close: () =>
        (closed ??= (async () => {
          try {
            await clients.close();
          } finally {
            await embedded?.stop();
          }
        })()),
    };
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
}
