/**
 * A production build in a directory of its own, as deploy/Dockerfile makes it: every service
 * compiled by scripts/build-services.mjs into `<dir>/dist`, beside the workspace manifests, the
 * Prisma schema and production dependencies only, installed flat from the local store (so no
 * network) with the workspace's dependency patches. `ServiceProcess`'s `built` option then runs `node dist/services/<name>/main.js`
 * there, without a TypeScript loader. Used by the production-build e2e test and by
 * `bench/gateway.ts --built`, which measures what ships.
 */
import { execFile } from 'node:child_process';
import { cp as copy, mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './processes.js';

const run = promisify(execFile);

/** The workspace manifests the production install needs (sources are in the bundles). */
async function manifests(): Promise<string[]> {
  const out = ['package.json', 'pnpm-lock.yaml', 'pnpm-workspace.yaml', 'tests/support/package.json'];
  for (const dir of ['libs', 'services', 'clients']) {
    for (const name of await readdir(path.join(repoRoot, dir))) {
      const file = path.join(dir, name, 'package.json');
      if (await stat(path.join(repoRoot, file)).catch(() => null)) out.push(file);
    }
  }
  return out;
}

/** Builds the services into `dir` (an empty directory) and installs their production dependencies. */
export async function prepareProductionBuild(dir: string): Promise<void> {
  await run(process.execPath, [path.join(repoRoot, 'scripts/build-services.mjs'), path.join(dir, 'dist')]);
  for (const file of await manifests()) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await copy(path.join(repoRoot, file), path.join(dir, file));
  }
  await copy(path.join(repoRoot, 'prisma'), path.join(dir, 'prisma'), { recursive: true });
  // The lockfile names these patches of dependencies; the install applies them.
  await copy(path.join(repoRoot, 'patches'), path.join(dir, 'patches'), { recursive: true });
  // From the local store: everything the production set needs came with the full install.
  await run(
    'pnpm',
    [
      'install',
      '--prod',
      '--frozen-lockfile',
      '--ignore-scripts',
      '--offline',
      '--config.node-linker=hoisted',
    ],
    { cwd: dir, env: { ...process.env, CI: 'true' } },
  );
}
