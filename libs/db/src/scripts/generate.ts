/**
 * `pnpm db:generate`: writes the Prisma client into libs/db/src/generated/prisma.
 *
 * `prisma generate` needs no engine binary but still checks that one exists before starting and
 * tries to download it when it does not (unreachable here). Pointing PRISMA_SCHEMA_ENGINE_BINARY
 * at any existing file (node itself) skips that; generate never runs it.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const cli = path.join(path.dirname(require.resolve('prisma/package.json')), 'build/index.js');
const config = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../prisma.config.ts');

const result = spawnSync(process.execPath, [cli, 'generate', '--config', config], {
  stdio: 'inherit',
  env: {
    ...process.env,
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
    CHECKPOINT_DISABLE: '1', // no telemetry/update check over the network
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
  },
});
process.exit(result.status ?? 1);
