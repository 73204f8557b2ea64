/** `pnpm db:migrate`: applies pending migrations to DATABASE_URL (like `prisma migrate deploy`). */
import { applyMigrations } from '../migrate.js';

const url = process.env.DATABASE_URL?.trim();
if (!url) {
  console.error('DATABASE_URL is not set. (The embedded database migrates itself when the app starts.)');
  process.exit(2);
}
const started = performance.now();
try {
  const { applied } = await applyMigrations(url);
  const ms = Math.round(performance.now() - started);
  if (applied.length === 0) console.log(`Database is up to date (${ms} ms).`);
  else console.log(`Applied ${applied.length} migration(s) in ${ms} ms:\n  ${applied.join('\n  ')}`);
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
