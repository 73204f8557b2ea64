import { inject } from 'vitest';

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
};
