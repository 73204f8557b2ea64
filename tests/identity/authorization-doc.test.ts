/**
 * Keeps the identity docs true. docs/authorization.md: its scope list and role → scope matrix
 * must equal libs/contracts/src/scopes.ts, and its route table must list exactly the routes the
 * services register, each with the auth kind and scope the route really declares (route trees
 * built from the same factories the services use; no database or bus is touched).
 * docs/threat-model-identity.md: every threat names a test, and every named test exists.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROLE_SCOPES, Role, Scope } from '@vlt/contracts';
import { repoRoot } from '../support/processes.js';
import { registeredRoutes } from '../support/registered-routes.js';

const doc = readFileSync(path.join(repoRoot, 'docs/authorization.md'), 'utf8');

/** The rows of the markdown table that follows `heading`. */
function tableAfter(heading: string): string[][] {
  const start = doc.indexOf(heading);
  expect(start, `docs/authorization.md has no "${heading}"`).toBeGreaterThanOrEqual(0);
  const lines = doc.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim().replace(/`/g, '')),
    );
  }
  return rows;
}

/** Routes every service app gets from service-kit (registered before any feature plugin). */
const SERVICE_KIT_ROUTES = ['GET /health none –', 'GET /v1/health none –', 'GET /docs none –'];

describe('docs/threat-model-identity.md', () => {
  it('names only tests that exist, and every in-scope threat names one', () => {
    const model = readFileSync(path.join(repoRoot, 'docs/threat-model-identity.md'), 'utf8');
    const rows = model.split('\n').filter((l) => /^\|\s*[AUZ]\d+\s*\|/.test(l));
    expect(rows.length).toBeGreaterThan(30);
    for (const row of rows) {
      const refs = [...row.matchAll(/`(tests\/identity\/[\w.-]+\.test\.ts)` › ([^`|]+)/g)];
      expect(refs.length, `no test named in: ${row.slice(0, 80)}`).toBeGreaterThan(0);
      for (const [, file, names] of refs) {
        const source = readFileSync(path.join(repoRoot, file!), 'utf8');
        for (const [, name] of names!.matchAll(/“([^”]+)”/g)) {
          expect(source.includes(name!), `${file} has no test named “${name}”`).toBe(true);
        }
      }
    }
  });
});

describe('docs/authorization.md', () => {
  it('lists exactly the scopes of the contract', () => {
    const listed = tableAfter('## Scopes').map((r) => r[0]);
    expect(listed).toEqual([...Scope.options]);
  });

  it('shows the role → scope matrix of libs/contracts/src/scopes.ts', () => {
    const rows = tableAfter('## Role → scope matrix');
    const header = doc
      .slice(doc.indexOf('## Role → scope matrix'))
      .split('\n')
      .find((l) => l.startsWith('|'))!;
    const columns = header
      .split('|')
      .slice(2, -1)
      .map((c) => c.trim().replace(/`/g, ''));
    expect(columns).toEqual([...Scope.options]);
    expect(rows.map((r) => r[0])).toEqual([...Role.options]);
    for (const row of rows) {
      const granted = columns.filter((_, i) => row[i + 1] === '✓');
      expect(granted, `row ${row[0]}`).toEqual(
        Scope.options.filter((s) => ROLE_SCOPES[row[0] as Role].includes(s)),
      );
    }
  });

  it('lists every registered route with the auth kind and scope it declares, and nothing else', async () => {
    const documented = tableAfter('## Routes').map(
      ([method, p, auth, scope]) => `${method} ${p} ${auth} ${scope}`,
    );
    const actual = [...SERVICE_KIT_ROUTES, ...(await registeredRoutes())];
    expect([...documented].sort()).toEqual([...actual].sort());
  });
});
