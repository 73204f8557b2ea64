import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { renderErrorDocs } from './error-docs.js';
import { errorCatalogue } from './errors.js';

const DOC = fileURLToPath(new URL('../../../docs/errors.md', import.meta.url));

describe('error catalogue', () => {
  it('docs/errors.md is generated from the catalogue (UPDATE_ERROR_DOCS=1 regenerates it)', () => {
    const rendered = renderErrorDocs();
    if (process.env.UPDATE_ERROR_DOCS === '1') writeFileSync(DOC, rendered);
    expect(readFileSync(DOC, 'utf8')).toBe(rendered);
  });

  it('gives every failure its own code, with a client or server status', () => {
    const codes = errorCatalogue.map((e) => e.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const e of errorCatalogue) {
      expect(e.code).toMatch(/^[A-Z][A-Z_]+$/);
      expect(e.status).toBeGreaterThanOrEqual(400);
      expect(e.status).toBeLessThan(600);
    }
  });
});
