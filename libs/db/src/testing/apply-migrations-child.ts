/**
 * Child process for the cross-process test: applies migrations to argv[2] and prints the names
 * it applied as JSON. Started twice at once to race two real processes.
 */
import { applyMigrations } from '../migrate.js';

const url = process.argv[2];
if (!url) throw new Error('usage: apply-migrations-child <databaseUrl>');
const { applied } = await applyMigrations(url);
process.stdout.write(JSON.stringify(applied));
