import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.js';

export interface CreatePrismaClientOptions {
  /** Pool size (pg's default is 10). Keep it small against embedded PGlite: it has one session. */
  max?: number;
}

/**
 * A Prisma client over node-postgres (`@prisma/adapter-pg`): no native query engine. The pool
 * opens lazily on the first query and closes on `$disconnect()`.
 */
export function createPrismaClient(databaseUrl: string, opts: CreatePrismaClientOptions = {}): PrismaClient {
  const adapter = new PrismaPg({
    connectionString: databaseUrl,
    ...(opts.max !== undefined ? { max: opts.max } : {}),
  });
  // Interactive transactions queue for a pool connection (and, on embedded PGlite, for its one
  // session). Prisma's defaults (2 s to start, 5 s to finish) turned a burst of 30 concurrent
  // writes into 500s; writes wait their turn instead, and a start that still times out is
  // answered 503 by the error handler.
  return new PrismaClient({ adapter, transactionOptions: { maxWait: 15_000, timeout: 30_000 } });
}
