#!/usr/bin/env node
/**
 * Builds every service to plain JavaScript for the production image: one ESM bundle per entry
 * point, the workspace's own TypeScript (@vlt/*, the generated Prisma client) compiled in, every
 * third-party package left as an import of node_modules (installed with production
 * dependencies only). No TypeScript loader at run time.
 *
 * Output: dist/services/<service>/main.js, with the data plane's response-filter worker and the
 * all-in-one's embedded-database worker beside it (each loaded from its own directory). The
 * depth matches services/<svc>/src/ so paths the code derives from its own location (the
 * prisma/ folder, three levels up) still resolve from the bundle.
 *
 *   node scripts/build-services.mjs [outDir]
 */
import { build } from 'esbuild';
import { copyFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outDir = path.resolve(root, process.argv[2] ?? 'dist');
const SERVICES = ['all-in-one', 'control-plane', 'data-plane', 'audit', 'notifier'];
/** Loaded by path at run time (a worker thread), so built beside each bundle that starts it. */
const WORKER = 'services/data-plane/src/modules/execute/response-worker.ts';
const STARTS_WORKER = new Set(['all-in-one', 'data-plane']);
/** The embedded database's thread (plain JavaScript), which only the all-in-one starts. */
const DB_WORKER = 'libs/db/src/embedded-worker.mjs';

/** Workspace packages are compiled in; everything else stays an import. */
const externalThirdParty = {
  name: 'external-third-party',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('@vlt/') || args.path.startsWith('node:')) return undefined;
      return { path: args.path, external: true };
    });
  },
};

await rm(outDir, { recursive: true, force: true });
await Promise.all(
  SERVICES.map((service) =>
    build({
      entryPoints: {
        main: path.join(root, 'services', service, 'src/main.ts'),
        ...(STARTS_WORKER.has(service) && { 'response-worker': path.join(root, WORKER) }),
      },
      outdir: path.join(outDir, 'services', service),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      sourcemap: 'linked',
      legalComments: 'none',
      logLevel: 'warning',
      plugins: [externalThirdParty],
    }),
  ),
);
await copyFile(
  path.join(root, DB_WORKER),
  path.join(outDir, 'services', 'all-in-one', 'embedded-worker.mjs'),
);
console.log(`built ${SERVICES.length} services into ${path.relative(root, outDir) || '.'}`);
