/**
 * Keeps docs/threat-model-gateway.md true: every threat names at least one test, every named
 * test exists in the file it is attributed to, and each of the review's fourteen classes has
 * its row.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/processes.js';

describe('docs/threat-model-gateway.md', () => {
  const model = readFileSync(path.join(repoRoot, 'docs/threat-model-gateway.md'), 'utf8');
  const rows = model.split('\n').filter((l) => /^\|\s*G\d+\s*\|/.test(l));

  it('has a row for each of the review classes 1-14', () => {
    const ids = rows.map((r) => Number(/^\|\s*G(\d+)/.exec(r)![1]));
    for (let i = 1; i <= 14; i++) expect(ids, `no row G${i}`).toContain(i);
  });

  it('names only tests that exist, and every threat names one', () => {
    for (const row of rows) {
      const refs = [...row.matchAll(/`((?:tests|libs|services)\/[\w./-]+\.test\.ts)` › ([^`|]+)/g)];
      expect(refs.length, `no test named in: ${row.slice(0, 80)}`).toBeGreaterThan(0);
      for (const [, file, names] of refs) {
        const source = readFileSync(path.join(repoRoot, file!), 'utf8');
        const named = [...names!.matchAll(/“([^”]+)”/g)].map((m) => m[1]!);
        expect(named.length, `no test name after ${file}`).toBeGreaterThan(0);
        for (const name of named) {
          expect(source.includes(`'${name}'`), `${file} has no test named “${name}”`).toBe(true);
        }
      }
    }
  });
});
