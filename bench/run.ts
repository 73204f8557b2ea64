/**
 * `make bench`: runs every benchmark one after another (never in parallel: they would
 * measure each other). Each prints its own table with ratios against a baseline measured
 * in the same run; absolute numbers on these shared machines are noise.
 * `pnpm bench gateway policy-engine` runs a subset.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const all = [
  'policy-engine',
  'gateway',
  'streaming',
  'token-endpoint',
  'model-a',
  'bus',
  'hostile-input',
  'llm-proxy',
  'notifications',
  'secret-scrubber',
];
const wanted = process.argv.slice(2).length ? process.argv.slice(2) : all;
let failed = 0;
for (const name of wanted) {
  const file = path.join(here, `${name}.ts`);
  if (!existsSync(file)) {
    console.error(`no benchmark named ${name} (have: ${all.join(', ')})`);
    failed++;
    continue;
  }
  console.log(`\n=== ${name} ===`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', file], { stdio: 'inherit', env: process.env });
  if (r.status !== 0) {
    console.error(`${name} exited with ${r.status ?? r.signal}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
