import { createHash } from 'node:crypto';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from './generated/prisma/client.js';

export interface CreatePrismaClientOptions {
  /** Pool size (pg's default is 10). Keep it small against embedded PGlite: it has one session. */
  max?: number;
  /**
   * Send the `sql` handle's statements as named prepared statements, parsed and planned once
   * per connection (`VLT_DB_PREPARED_STATEMENTS`; default on). Off for the embedded database,
   * whose one session outlives the pool's connections, and behind a pooler that cannot keep
   * prepared statements (PgBouncer in transaction mode before 1.21).
   */
  preparedStatements?: boolean;
}

/**
 * Raw SQL as a tagged template: `sql<Row>\`SELECT … WHERE id = ${id}\`` sends the values as
 * bind parameters (never spliced into the text) and resolves with the rows.
 */
export type Sql = <T = Record<string, unknown>>(
  strings: TemplateStringsArray,
  ...values: unknown[]
) => Promise<T[]>;

export interface DatabaseClients {
  prisma: PrismaClient;
  /**
   * The same connection pool without the ORM, for the few statements on hot paths: a query
   * through Prisma costs about four times the CPU of the query itself (bench/token-endpoint.ts).
   */
  sql: Sql;
  /**
   * Disconnects Prisma and ends the pool, once. `prisma.$disconnect()` alone ends the pool only
   * if Prisma itself connected: a process that queried through `sql` alone (the audit writer)
   * kept idle connections, and with them its event loop, for pg's 10 s idle timeout after
   * shutdown, as long as `docker stop` waits before it kills.
   */
  close(): Promise<void>;
}

/**
 * A Prisma client over node-postgres (`@prisma/adapter-pg`): no native query engine, and a raw
 * `sql` handle on the same pool (one pool: the embedded database has a single session). The
 * pool opens lazily on the first query and closes on `close()`.
 */
export function createDatabaseClients(
  databaseUrl: string,
  opts: CreatePrismaClientOptions = {},
): DatabaseClients {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    ...(opts.max !== undefined ? { max: opts.max } : {}),
  });
  // An idle connection that breaks (server restart) is replaced on the next query; without a
  // listener its 'error' event would end the process before Prisma attached its own.
  pool.on('error', () => {});
  const adapter = new PrismaPg(pool, { disposeExternalPool: true });
  // Interactive transactions queue for a pool connection (and, on embedded PGlite, for its one
  // session). Prisma's defaults (2 s to start, 5 s to finish) turned a burst of 30 concurrent
  // writes into 500s; writes wait their turn instead, and a start that still times out is
  // answered 503 by the error handler.
  const prisma = new PrismaClient({ adapter, transactionOptions: { maxWait: 15_000, timeout: 30_000 } });
  let closed: Promise<void> | undefined;
  return {
    prisma,
    sql: sqlOverPool(pool, opts.preparedStatements ?? true),
    close: () =>
      (closed ??= (async () => {
        try {
          await prisma.$disconnect();
        } finally {
          if (!pool.ending && !pool.ended) await pool.end();
        }
      })()),
  };
}

export function createPrismaClient(databaseUrl: string, opts: CreatePrismaClientOptions = {}): PrismaClient {
  return createDatabaseClients(databaseUrl, opts).prisma;
}

function sqlOverPool(pool: pg.Pool, prepared: boolean): Sql {
  // A call site's template strings are one frozen object: its statement text is built once.
  // Its name is derived from the text, so one name never stands for two statements.
  const texts = new WeakMap<TemplateStringsArray, { text: string; span: string; name: string | undefined }>();
  const tracer = trace.getTracer('@vlt/db');
  return async <T>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T[]> => {
    let statement = texts.get(strings);
    if (statement === undefined) {
      const text = strings.reduce((acc, part, i) => `${acc}$${i}${part}`);
      const name = prepared
        ? `vlt_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`
        : undefined;
      statement = { text, span: spanName(text), name };
      texts.set(strings, statement);
    }
    // A client span per statement, as Prisma's own for its queries: the text with its bind
    // placeholders, never the values (the pg instrumentation cannot hook ESM imports).
    const span = tracer.startSpan(statement.span, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system.name': 'postgresql', 'db.query.text': statement.text },
    });
    try {
      // Named: PostgreSQL parses and plans the hot statements once per connection, not per
      // call; that was a third of the server's CPU per agent token (ADR 0066).
      const result = await pool.query({ name: statement.name, text: statement.text, values });
      return result.rows as T[];
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'statement failed' });
      throw err;
    } finally {
      span.end();
    }
  };
}

/** `INSERT audit_events`, `SELECT`: the operation and, where it is plain to see, the table. */
function spanName(text: string): string {
  const m = /^\s*(\w+)(?:[\s\S]*?\b(?:INTO|FROM|UPDATE)\s+"?(\w+)"?)?/i.exec(text);
  const op = (m?.[1] ?? 'SQL').toUpperCase();
  return m?.[2] ? `${op} ${m[2]}` : op;
}

/** The `sql` handle of a client created elsewhere (tests): the same statements through Prisma. */
export function sqlThroughPrisma(prisma: PrismaClient): Sql {
  return <T>(strings: TemplateStringsArray, ...values: unknown[]) =>
    prisma.$queryRaw<T[]>(strings, ...values) as Promise<T[]>;
}
