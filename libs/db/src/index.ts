/**
 * @vlt/db: the Prisma schema's client, migrations and the embedded database.
 *
 * Nothing here runs at import; callers open what they need. The generated client comes from
 * `pnpm db:generate` (src/generated is not committed).
 */
export {
  createDatabaseClients,
  createPrismaClient,
  sqlThroughPrisma,
  type CreatePrismaClientOptions,
  type DatabaseClients,
  type Sql,
} from './client.js';
export { applyMigrations, type ApplyMigrationsOptions, type ApplyMigrationsResult } from './migrate.js';
export { startEmbeddedPostgres, type EmbeddedPostgres, type EmbeddedPostgresOptions } from './embedded.js';
export { openDatabase, type OpenDatabaseOptions, type OpenedDatabase } from './open-database.js';
export { isUniqueViolation } from './errors.js';

// The generated client: PrismaClient, the Prisma namespace (errors, Json types, input types),
// one type per model and one const + type per enum.
export * from './generated/prisma/client.js';
