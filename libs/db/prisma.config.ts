import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'prisma/config';

// Read by the Prisma CLI (`prisma generate`, `validate`, `format`; `migrate` too wherever its
// native engine can be downloaded). The schema and migrations live at the repository root.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export default defineConfig({
  schema: path.join(root, 'prisma/schema.prisma'),
  migrations: { path: path.join(root, 'prisma/migrations') },
  // Only commands that talk to a database need it; generate must work without one.
  ...(process.env.DATABASE_URL ? { datasource: { url: process.env.DATABASE_URL } } : {}),
});
