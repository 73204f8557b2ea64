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
  return new PrismaClient({ adapter });
}
