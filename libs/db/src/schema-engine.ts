/**
 * Prisma's schema engine compiled to WebAssembly, driven through a driver adapter.
 *
 * Why not the Prisma CLI: every `prisma migrate`/`db` command first downloads a native engine
 * from Prisma's host, which these machines cannot reach (docs/decisions, TOOLCHAIN.md). The wasm
 * build is the same engine (same git hash as @prisma/engines-version): `diff` produces the SQL
 * `prisma migrate diff` would, `applyMigrations` is `migrate deploy` and keeps `_prisma_migrations`
 * exactly as the CLI does.
 */
import { readFile, readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import {
  DriverAdapterError,
  bindMigrationAwareSqlAdapterFactory,
  ColumnTypeEnum,
  type SqlDriverAdapter,
  type SqlQuery,
  type SqlResultSet,
  type SqlMigrationAwareDriverAdapterFactory,
} from '@prisma/driver-adapter-utils';
import type * as EngineModule from '@prisma/schema-engine-wasm/schema_engine_bg';
import type { MigrationList, SchemaEngine, SchemaFilter } from '@prisma/schema-engine-wasm/schema_engine_bg';

export type { MigrationList, SchemaEngine };

/** No table or enum is managed outside the migrations. */
export const NO_FILTER: SchemaFilter = { externalTables: [], externalEnums: [] };

export const MIGRATION_FILE = 'migration.sql';
export const LOCK_FILE = 'migration_lock.toml';

type EngineBindings = typeof EngineModule;

/** The part of the WebAssembly global used here (TS's ES libs do not declare the global). */
interface WasmApi {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(module: object, imports: Record<string, object>): Promise<{ exports: Record<string, unknown> }>;
}

// The wasm glue keeps its instance in a module variable, so it can be set once per process.
// A memoised promise (not work at import time) gives every caller that one instance.
let bindings: Promise<EngineBindings> | undefined;

/**
 * Loads the engine once. The package's main entry imports the `.wasm` file the bundler way
 * (`import * as wasm from "./x.wasm"`), which Node refuses; so compile it by hand and hand the
 * instance to the glue code, as its own entry would.
 */
export function loadSchemaEngine(): Promise<EngineBindings> {
  bindings ??= (async () => {
    const require = createRequire(import.meta.url);
    const gluePath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg');
    const glue: EngineBindings = await import('@prisma/schema-engine-wasm/schema_engine_bg');
    const bytes = await readFile(path.join(path.dirname(gluePath), 'schema_engine_bg.wasm'));
    const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
    const instance = await wasm.instantiate(await wasm.compile(bytes), {
      './schema_engine_bg.js': withUnrefTimers(glue),
    });
    glue.__wbg_set_wasm(instance.exports);
    (instance.exports.__wbindgen_start as () => void)();
    return glue;
  })();
  bindings.catch(() => {
    bindings = undefined; // let a later call retry instead of caching the failure
  });
  return bindings;
}

/**
 * The engine arms a timer for each timeout it races (e.g. 10 s for its advisory lock) and never
 * clears it, so a finished `pnpm db:migrate` would linger 10 s. Unref'd timers still fire while
 * the process has work (open sockets) but no longer keep it alive on their own.
 */
function withUnrefTimers(glue: EngineBindings): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(glue).map(([name, fn]) => {
      if (!name.startsWith('__wbg_setTimeout_')) return [name, fn];
      const armed = (callback: () => void, ms: number) => setTimeout(callback, ms >>> 0).unref();
      return [name, armed];
    }),
  );
}

/** Message of a PostgreSQL error as adapter-pg would map it, so the engine reports it verbatim. */
function toDriverError(error: unknown): unknown {
  if (error instanceof pg.DatabaseError) {
    return new DriverAdapterError({
      kind: 'postgres',
      code: error.code ?? 'UNKNOWN',
      severity: error.severity ?? 'ERROR',
      message: error.message,
      detail: error.detail,
      column: error.column,
      hint: error.hint,
    });
  }
  return error;
}

/**
 * adapter-pg's `executeScript` splits on every `;` (also inside strings and comments) and sends
 * the pieces one by one through the pool, outside any transaction. A migration then breaks on a
 * `;` in a default value and, when one statement fails, leaves the earlier ones applied. Sending
 * the whole script as one simple-protocol query instead makes PostgreSQL run it as one implicit
 * transaction: a migration applies completely or not at all.
 */
function withAtomicScripts(adapter: SqlDriverAdapter, pool: pg.Pool): SqlDriverAdapter {
  const wrapped: SqlDriverAdapter = Object.create(adapter) as SqlDriverAdapter;
  wrapped.executeScript = async (script: string): Promise<void> => {
    try {
      await pool.query(script);
    } catch (error) {
      throw toDriverError(error);
    }
  };
  return wrapped;
}

export interface EngineConnection {
  engine: SchemaEngine;
  /** Frees the engine and closes its connection. */
  close(): Promise<void>;
}

/**
 * Opens the engine on `databaseUrl`. One pooled connection only: the engine's own
 * `pg_advisory_lock` and the scripts it runs must share a session, which a larger pool would not
 * guarantee.
 */
export async function openSchemaEngine(databaseUrl: string): Promise<EngineConnection> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  // An idle-client error must not crash the process; the next query reports it.
  pool.on('error', () => {});
  const inner = new PrismaPg(pool);
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: inner.provider,
    adapterName: inner.adapterName,
    connect: async () => withAtomicScripts(await inner.connect(), pool),
    // A shadow database is never used: "create migration" diffs schema snapshots instead.
    connectToShadowDb: () => Promise.reject(new Error('shadow databases are not used by @vlt/db')),
  };
  try {
    return await newEngine(factory, () => pool.end());
  } catch (error) {
    await pool.end();
    throw error;
  }
}

/**
 * Opens the engine with no database, for `diff` between schema files. The engine still probes
 * its connection once when it starts (schema exists? server version?); this adapter answers that
 * probe as a PostgreSQL 15 server and refuses every other query, so nothing can silently depend
 * on a database that is not there.
 */
export function openOfflineSchemaEngine(): Promise<EngineConnection> {
  const refuse = (what: string) => () =>
    Promise.reject(new Error(`offline schema engine: ${what} needs a database (use openSchemaEngine)`));
  const adapter: SqlDriverAdapter = {
    provider: 'postgres',
    adapterName: '@vlt/db-offline',
    queryRaw: async (query: SqlQuery): Promise<SqlResultSet> => {
      if (!/^SELECT EXISTS\(SELECT 1 FROM pg_namespace/.test(query.sql)) return refuse(query.sql)();
      return {
        columnNames: ['exists', 'version', 'numeric_version'],
        columnTypes: [ColumnTypeEnum.Boolean, ColumnTypeEnum.Text, ColumnTypeEnum.Int32],
        rows: [[true, 'PostgreSQL 15.0 (offline)', 150000]],
      };
    },
    executeRaw: refuse('executeRaw'),
    executeScript: refuse('executeScript'),
    startTransaction: refuse('startTransaction'),
    dispose: async () => {},
  };
  const factory: SqlMigrationAwareDriverAdapterFactory = {
    provider: 'postgres',
    adapterName: '@vlt/db-offline',
    connect: async () => adapter,
    connectToShadowDb: refuse('a shadow database'),
  };
  return newEngine(factory, async () => {});
}

async function newEngine(
  factory: SqlMigrationAwareDriverAdapterFactory,
  release: () => Promise<void>,
): Promise<EngineConnection> {
  const glue = await loadSchemaEngine();
  const engine = await glue.SchemaEngine.new(
    { datamodels: undefined },
    () => {}, // engine log lines (JSON); failures still arrive as rejections
    bindMigrationAwareSqlAdapterFactory(factory),
  );
  return {
    engine,
    close: async () => {
      engine.free();
      await release();
    },
  };
}

/** Reads the migrations folder the way the Prisma CLI does (sorted folder names, lock file). */
export async function readMigrationsList(migrationsDir: string): Promise<MigrationList> {
  const baseDir = path.resolve(migrationsDir);
  const lockContent = await readFile(path.join(baseDir, LOCK_FILE), 'utf8').catch(() => null);
  const entries = await readdir(baseDir, { withFileTypes: true });
  const folders = entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort((a, b) => a.localeCompare(b));
  const migrationDirectories = await Promise.all(
    folders.map(async (name) => {
      const content = await readFile(path.join(baseDir, name, MIGRATION_FILE), 'utf8')
        .then((value) => ({ tag: 'ok' as const, value }))
        .catch((error: Error) => ({ tag: 'error' as const, value: error.message }));
      return { path: name, migrationFile: { path: MIGRATION_FILE, content } };
    }),
  );
  return {
    baseDir,
    lockfile: { path: LOCK_FILE, content: lockContent },
    shadowDbInitScript: '',
    migrationDirectories,
  };
}
