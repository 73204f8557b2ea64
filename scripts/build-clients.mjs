#!/usr/bin/env node
/**
 * Builds the agent-side clients to self-contained JavaScript: each bin (vlt-setup, vlt-mcp) and
 * the OpenClaw plugin's entry become one ESM file with their dependencies compiled in, so an
 * agent machine needs Node.js and that file, nothing from this workspace. The plugin leaves
 * `openclaw` itself external: the host that loads it provides it.
 *
 * Output: clients/<package>/dist/<name>.js, which each package's bin/ launcher prefers over
 * running the TypeScript source; or <outRoot>/<package>/<name>.js when an outRoot is given.
 *
 *   node scripts/build-clients.mjs [outRoot]
 */
import { build } from 'esbuild';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outRoot = process.argv[2] ? path.resolve(process.argv[2]) : undefined;

const CLIENTS = [
  { pkg: 'setup-cli', entry: 'src/main.ts', out: 'vlt-setup' },
  { pkg: 'mcp-server', entry: 'src/main.ts', out: 'vlt-mcp' },
  { pkg: 'agent-plugin', entry: 'src/entry.ts', out: 'entry', external: ['openclaw', 'openclaw/*'] },
];

await Promise.all(
  CLIENTS.map(async (c) => {
    const dir = path.join(root, 'clients', c.pkg);
    const outdir = outRoot ? path.join(outRoot, c.pkg) : path.join(dir, 'dist');
    await rm(outdir, { recursive: true, force: true });
    await build({
      entryPoints: { [c.out]: path.join(dir, c.entry) },
      outdir,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      external: c.external ?? [],
      // CommonJS dependencies bundled into ESM still call require() for Node's built-ins.
      banner: {
        js: "import { createRequire as __vltRequire } from 'node:module'; const require = __vltRequire(import.meta.url);",
      },
      legalComments: 'none',
      logLevel: 'warning',
    });
  }),
);
console.log(
  `built ${CLIENTS.map((c) => `${c.pkg}/${c.out}.js`).join(', ')} into ${outRoot ?? 'clients/*/dist'}`,
);
