import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** `prisma/` at the repository root, found from this file so it works from any cwd. */
export function defaultPrismaDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../prisma');
}

export function defaultSchemaPath(): string {
  return path.join(defaultPrismaDir(), 'schema.prisma');
}

export function defaultMigrationsDir(): string {
  return path.join(defaultPrismaDir(), 'migrations');
}
