/**
 * `pnpm db:migration:create <name> [--empty]`: writes prisma/migrations/<timestamp>_<name>/ from
 * the difference between the newest migration's schema snapshot and prisma/schema.prisma.
 * No database is needed. Review the SQL, then run `pnpm db:generate` and the tests.
 */
import path from 'node:path';
import { createMigration } from '../migration-create.js';
import { defaultMigrationsDir, defaultSchemaPath } from '../paths.js';

const args = process.argv.slice(2).filter((a) => a !== '--');
const allowEmpty = args.includes('--empty');
const name = args.filter((a) => !a.startsWith('--')).join('_');
if (!name) {
  console.error('usage: pnpm db:migration:create <name> [--empty]');
  process.exit(2);
}
try {
  const { folder, sql } = await createMigration({
    name,
    schemaPath: defaultSchemaPath(),
    migrationsDir: defaultMigrationsDir(),
    allowEmpty,
  });
  if (!folder) {
    console.log(
      'schema.prisma matches the latest migration: nothing to create (use --empty for hand-written SQL).',
    );
  } else {
    // INIT_CWD: where `pnpm` was invoked (the script itself runs in libs/db).
    console.log(
      `Created ${path.relative(process.env.INIT_CWD ?? process.cwd(), folder)}\n\n${sql || '(empty)'}`,
    );
  }
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
