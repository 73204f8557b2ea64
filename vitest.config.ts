import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
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
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default (cores - 1) is one worker on a two-core CI machine, and most suites wait
    // on child processes, sockets and timers rather than the CPU: two run in about 60% of the
    // time of one, and every suite is safe in parallel (own databases, bus prefixes, ports).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
