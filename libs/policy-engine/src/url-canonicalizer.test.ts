import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalizePathOrThrow, canonicalizeTarget } from './url-canonicalizer.js';

interface GoldenCase {
  name: string;
  url: string;
  query?: Record<string, string>;
  href?: string;
  refused?: string;
  invalid?: boolean;
}

const golden = JSON.parse(
  readFileSync(new URL('./testdata/url-canonicalization.json', import.meta.url), 'utf8'),
) as {
  cases: GoldenCase[];
};

describe('canonicalizeTarget golden cases', () => {
  it.each(golden.cases)('$name', (c) => {
    const r = canonicalizeTarget(c.url, c.query);
    if (c.href !== undefined) {
      expect(r).toMatchObject({ ok: true, href: c.href });
    } else {
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.reason).toContain(c.refused);
        expect(r.refused).toBe(!c.invalid);
      }
    }
  });
});

describe('canonicalizeTarget parts', () => {
  it('splits host, port, path and query, and the URL object serialises to href', () => {
    const r = canonicalizeTarget('https://API.example.com:8443/a/./b?x=1', { y: '2' });
    expect(r).toMatchObject({
      ok: true,
      host: 'api.example.com',
      hostKind: 'domain',
      port: 8443,
      path: '/a/b',
      search: '?x=1&y=2',
    });
    if (r.ok) expect(r.url.href).toBe(r.href);
  });

  it('reports IP literal hosts so SSRF can check them without resolution', () => {
    expect(canonicalizeTarget('https://0x7f.1/')).toMatchObject({
      ok: true,
      host: '127.0.0.1',
      hostKind: 'ipv4',
    });
    expect(canonicalizeTarget('https://[::1]:8443/')).toMatchObject({
      ok: true,
      host: '::1',
      hostKind: 'ipv6',
      port: 8443,
    });
  });

  it('refuses non-string query values and unpaired surrogates', () => {
    expect(canonicalizeTarget('https://a.example/', { a: 1 as unknown as string }).ok).toBe(false);
    expect(canonicalizeTarget('https://a.example/', { a: '\ud800' }).ok).toBe(false);
    expect(canonicalizeTarget('https://a.example/\ud800').ok).toBe(false);
  });

  it('refuses over-long URLs', () => {
    expect(canonicalizeTarget(`https://a.example/${'a'.repeat(9000)}`)).toMatchObject({
      ok: false,
      refused: false,
    });
  });

  it('canonicalises allowlist patterns by the same rules', () => {
    expect(canonicalizePathOrThrow('/a/%7e/%2E%2E/b')).toBe('/a/b');
    expect(() => canonicalizePathOrThrow('/a%2Fb')).toThrow('encoded "/"');
  });
});

// Pieces that exercise every rule: separators, dots in all spellings, escapes, unicode.
const pathPiece = fc.constantFrom(
  '/',
  '//',
  '.',
  '..',
  '%2e',
  '%2E%2e',
  'a',
  'B',
  '%41',
  '%7e',
  '~',
  '%2f',
  '%5C',
  ';',
  '..;',
  '%3B',
  ':',
  '@',
  '|',
  '%zz',
  '%',
  'é',
  '%C3%A9',
  '%C0%AF',
  '?',
  '&',
  '=',
  '+',
  "'",
  '%20',
);
const hostPiece = fc.constantFrom(
  'api.example.com',
  'API.EXAMPLE.COM',
  'api.example.com.',
  'b\u00fccher.example',
  '127.0.0.1',
  '0x7f.1',
  '[::1]',
  'a@b.example',
  'api.example.com:443',
  'api.example.com:8443',
);

describe('canonicalizeTarget properties', () => {
  it('is idempotent and stable under WHATWG re-parsing for every accepted URL', () => {
    fc.assert(
      fc.property(hostPiece, fc.array(pathPiece, { maxLength: 12 }), (host, parts) => {
        const r = canonicalizeTarget(`https://${host}/${parts.join('')}`);
        if (!r.ok) return;
        expect(new URL(r.href).href).toBe(r.href);
        const again = canonicalizeTarget(r.href);
        expect(again).toMatchObject({ ok: true, href: r.href });
        // A canonical path has no dot segments, doubled slashes or encoded unreserved bytes.
        expect(r.path).not.toMatch(/(^|\/)\.\.?(\/|$)|\/\/|%(2[DdEe]|5[Ff]|7[Ee]|[46][1-9A-Fa-f]|3[0-9])/);
      }),
      { numRuns: 3000 },
    );
  });
});
