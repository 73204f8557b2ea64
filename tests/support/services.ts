import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { createRunDatabase } from './run-database.js';

/**
 * What the global setup found. Suites that need a real service use these to skip with the
 * reason outside CI (with CI=true the global setup has already failed the run).
 */
export const realServices = {
  databaseUrl: () => inject('databaseUrl'),
  natsUrl: () => inject('natsUrl'),
  busPrefix: () => inject('busPrefix'),
  hasPostgres: () => inject('databaseUrl') !== '',
  hasNats: () => inject('natsUrl') !== '',
  missing: () => inject('servicesMissing'),
  /** Where the run's migrated embedded database is (undefined outside the suites project). */
  embeddedTemplate: (): string | undefined => inject('embeddedTemplate') || undefined,
};

/**
 * An empty, migrated database of its own, next to the run's. Every environment with a control
 * plane needs one: its outbox relay publishes every unpublished row of its database onto its own
 * bus prefix and stops at the first row that fails, so two environments on one database publish
 * each other's rows into the wrong streams and stall on them (a disabled agent's token stayed
 * valid on a data plane of the other one for seconds).
 */
export async function ownDatabase(label: string): Promise<{ url: string; drop(): Promise<void> }> {
  const run = new URL(realServices.databaseUrl());
  const admin = new URL(run);
  admin.pathname = '/postgres';
  const name = `${run.pathname.slice(1)}_${label}_${randomBytes(3).toString('hex')}`;
  return createRunDatabase(admin.toString(), name.slice(0, 63));
}
