import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

/** Files that install process-wide state (OpenTelemetry's global providers, instrumentation). */
const NEEDS_OWN_PROCESS = ['libs/telemetry/src/index.test.ts', 'libs/telemetry/src/telemetry.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default (cores - 1) is one worker on a two-core CI machine, and most suites wait
    // on child processes, sockets and timers rather than the CPU: two run in about 60% of the
    // time of one, and every suite is safe in parallel (own databases, bus prefixes, ports).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'suites',
          globalSetup: ['./tests/global-setup.ts'],
          include: [
            'libs/*/src/**/*.test.ts',
            'libs/*/test/**/*.test.ts',
            'services/*/src/**/*.test.ts',
            'services/*/test/**/*.test.ts',
            'clients/*/src/**/*.test.ts',
            'clients/*/test/**/*.test.ts',
            'tests/**/*.test.ts',
          ],
          // The defaults (node_modules, dist) stay excluded: a project's list replaces them.
          exclude: [...configDefaults.exclude, ...NEEDS_OWN_PROCESS],
          // Files share a worker's module cache instead of reloading Fastify, Prisma and the
          // OpenTelemetry API per file: the suite runs in less than half the time. Suites keep
          // no module-level state (their gateways, databases and bus prefixes are their own).
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: 'own-process', include: NEEDS_OWN_PROCESS, isolate: true },
      },
    ],
  },
});
