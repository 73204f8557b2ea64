import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { canonicalJsonText, requestFingerprint, type FingerprintInput } from './fingerprint.js';
import type { ExecutionRequest } from './pipeline.js';
import { evaluateExecution } from './pipeline.js';
import { runtime } from './test-fixtures.js';

/** The fingerprint the pipeline files an approval with (every write needs one here). */
const rt = runtime({ stepUpApproval: 'always' });
function fingerprint(req: ExecutionRequest): string {
  const d = evaluateExecution(req, rt, {
    now: new Date('2024-01-01T12:00:00Z'),
    requestsInLastHour: 0,
    ssrfAllowCidrs: [],
    model: 'B',
    resolvedAddresses: ['93.184.216.34'],
  });
  if (d.outcome !== 'require_approval') throw new Error(`expected an approval, got ${d.outcome}`);
  return d.fingerprint;
}

const base: ExecutionRequest = {
  method: 'POST',
  url: 'https://api.example.com/v1/send',
  query: { a: '1' },
  headers: { 'x-team': 'ops' },
  body: { to: 'x', cc: ['y'] },
};

describe('approval fingerprint', () => {
  it('is a stable SHA-256 hex digest', () => {
    expect(fingerprint(base)).toMatch(/^[0-9a-f]{64}$/);
    expect(fingerprint(base)).toBe(fingerprint(structuredClone(base)));
  });

  it('does not change with spellings that send the same request', () => {
    const fp = fingerprint(base);
    expect(fingerprint({ ...base, method: 'post' })).toBe(fp);
    expect(fingerprint({ ...base, url: 'https://API.example.com:443/v1/./send' })).toBe(fp);
    expect(fingerprint({ ...base, url: 'https://api.example.com/v1/send?a=1', query: undefined })).toBe(fp);
    expect(fingerprint({ ...base, headers: { 'X-Team': 'ops', Authorization: 'Bearer stripped' } })).toBe(fp);
    expect(fingerprint({ ...base, body: { cc: ['y'], to: 'x' } })).toBe(fp);
    expect(fingerprint({ ...base, body: '{ "cc": ["y"], "to": "\\u0078" }' })).toBe(fp);
  });

  it('is the same whether the caller says the body is JSON it parsed or leaves it to be parsed here', () => {
    const input = {
      method: 'POST',
      href: 'https://api.example.com/v1',
      requestFullFields: false,
      headers: {},
    };
    for (const body of ['{ "b": 1.50, "a": ["\\u0078", {"z": null}] }', '[1, 2]', '"text"', '12', 'true']) {
      expect(requestFingerprint({ ...input, body, bodyIsJson: true }), body).toBe(
        requestFingerprint({ ...input, body }),
      );
    }
  });

  it('changes with anything that changes the request', () => {
    const fp = fingerprint(base);
    expect(fingerprint({ ...base, method: 'PUT' })).not.toBe(fp);
    expect(fingerprint({ ...base, url: 'https://api.example.com/v1/send2' })).not.toBe(fp);
    expect(fingerprint({ ...base, query: { a: '2' } })).not.toBe(fp);
    expect(fingerprint({ ...base, body: { to: 'x', cc: ['z'] } })).not.toBe(fp);
    expect(fingerprint({ ...base, body: undefined })).not.toBe(fp);
    expect(fingerprint({ ...base, body: 'to=x' })).not.toBe(fingerprint({ ...base, body: '"to=x"' }));
  });

  it('changes with requestFullFields (a contact read with and without its PII fields)', () => {
    const contacts = runtime(
      {
        contactFields: { tier: 'balanced', fieldStepUpEnabled: true },
        rules: { request: [{ label: 'ask', match: { methods: ['GET'] }, action: 'require_approval' }] },
      },
      { provider: 'suite_a', service: 'suite_a-contacts' },
    );
    const read = (requestFullFields: boolean) => {
      const d = evaluateExecution(
        { method: 'GET', url: 'https://api.example.com/v1/people/c1', requestFullFields },
        contacts,
        {
          now: new Date(),
          requestsInLastHour: 0,
          ssrfAllowCidrs: [],
          model: 'B',
          resolvedAddresses: ['93.184.216.34'],
        },
      );
      if (d.outcome !== 'require_approval') throw new Error(`expected an approval, got ${d.outcome}`);
      return d.fingerprint;
    };
    expect(read(true)).not.toBe(read(false));
  });

  it('regression: numbers are fingerprinted as written (security review, class 4)', () => {
    // Approved 9007199254740992, redeemed 9007199254740993: JSON.parse makes them equal, the
    // provider does not. Likewise 1e400 (Infinity → null) and null.
    const pairs: Array<[string, string]> = [
      ['{"amount":9007199254740992}', '{"amount":9007199254740993}'],
      ['{"amount":1e400}', '{"amount":null}'],
      ['{"amount":1.0}', '{"amount":1}'],
      ['{"amount":-0}', '{"amount":0}'],
      ['[1e2]', '[100]'],
    ];
    for (const [approved, redeemed] of pairs) {
      expect(fingerprint({ ...base, body: approved }), `${approved} vs ${redeemed}`).not.toBe(
        fingerprint({ ...base, body: redeemed }),
      );
    }
  });

  it('regression: the forwarded headers are part of the fingerprint (security review, class 4)', () => {
    const fp = fingerprint(base);
    expect(fingerprint({ ...base, headers: { 'x-team': 'finance' } })).not.toBe(fp);
    expect(fingerprint({ ...base, headers: { 'x-team': 'ops', 'x-extra': '1' } })).not.toBe(fp);
    expect(fingerprint({ ...base, headers: {} })).not.toBe(fp);
  });
});

describe('bodies of bytes (an upload through the LLM proxy)', () => {
  const form = { 'content-type': 'multipart/form-data; boundary=vlt-form-1' };
  const bytes = (text: string) => new Uint8Array(Buffer.from(text, 'latin1'));

  it('are fingerprinted by their bytes: the same bytes match, one changed byte does not', () => {
    const a = fingerprint({ ...base, headers: form, body: bytes('--vlt-form-1\r\n\xff\x00') });
    expect(fingerprint({ ...base, headers: form, body: bytes('--vlt-form-1\r\n\xff\x00') })).toBe(a);
    expect(fingerprint({ ...base, headers: form, body: bytes('--vlt-form-1\r\n\xfe\x00') })).not.toBe(a);
    // Not the same request as its text sent as a string body.
    expect(fingerprint({ ...base, headers: form, body: '--vlt-form-1\r\n\xff\x00' })).not.toBe(a);
  });

  it('are refused (400) unless a form or octet-stream: a JSON type would name an unjudged document', () => {
    const d = evaluateExecution(
      { ...base, headers: { 'content-type': 'application/json' }, body: bytes('{"to":"x"}') },
      rt,
      {
        now: new Date(),
        requestsInLastHour: 0,
        ssrfAllowCidrs: [],
        model: 'B',
        resolvedAddresses: ['93.184.216.34'],
      },
    );
    expect(d).toMatchObject({
      outcome: 'bad_request',
      reason: 'a body of bytes must be multipart/form-data or application/octet-stream',
    });
  });
});

describe('canonicalJsonText', () => {
  it.each([
    ['{"b":1,"a":[true,false,null]}', '{"a":[true,false,null],"b":1}'],
    [' { "a" : { "d" : 1 , "c" : 2e10 } } ', '{"a":{"c":2e10,"d":1}}'],
    ['"\\u0041\\n"', '"A\\n"'],
    ['12345678901234567890123', '12345678901234567890123'],
    ['{}', '{}'],
    ['[ ]', '[]'],
    ['{"k\\"ey":"v"}', '{"k\\"ey":"v"}'],
  ])('%s → %s', (text, want) => {
    expect(canonicalJsonText(text)).toBe(want);
  });
});

describe('canonicalJsonText on strings, read without decoding where it can', () => {
  /** What the canonical text must be, from the parsed value (integers only, so no lexeme is lost). */
  function reference(v: unknown): string {
    if (Array.isArray(v)) return `[${v.map(reference).join(',')}]`;
    if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${keys.map((k) => `${JSON.stringify(k)}:${reference((v as Record<string, unknown>)[k])}`).join(',')}}`;
    }
    return JSON.stringify(v);
  }

  // Strings built to hit the edges: escaped quotes after runs of backslashes, escapes of every
  // kind, lone and paired surrogates (raw and escaped), non-ASCII, U+2028, control characters
  // (escaped by JSON.stringify as the documents are written).
  const piece = fc.constantFrom(
    'a',
    '"',
    '\\',
    '\\\\',
    '/',
    '\n',
    '\u2028',
    'é',
    '😀',
    '\ud800',
    '\udfff',
    '\u0000',
    '\u001f',
    '\u007f',
  );
  const text = fc.array(piece, { maxLength: 12 }).map((p) => p.join(''));
  const escapes = fc.array(
    fc.constantFrom(
      '\\"',
      '\\\\',
      '\\/',
      '\\n',
      '\\u0041',
      '\\ud800',
      '\\udc00',
      '\\ud83d\\ude00',
      'x',
      '\\\\\\"',
      // Raw, as an envelope's string body may carry them after its own escapes were read.
      '\ud800',
      '\udfff',
      '😀',
    ),
    { maxLength: 8 },
  );

  it('writes every string as JSON.stringify of its value', () => {
    fc.assert(
      fc.property(fc.dictionary(text, fc.oneof(text, fc.integer(), fc.array(text))), (doc) => {
        const written = JSON.stringify(doc, null, 1);
        expect(canonicalJsonText(written)).toBe(reference(doc));
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(escapes, escapes, (key, value) => {
        const written = `{"${key.join('')}" : ["${value.join('')}", "${key.join('')}"]}`;
        expect(canonicalJsonText(written)).toBe(reference(JSON.parse(written)));
      }),
      { numRuns: 500 },
    );
  });

  it('keeps a large string without escapes as it is written', () => {
    const image = 'A'.repeat(4 * 1024 * 1024);
    expect(canonicalJsonText(`{ "url" : "${image}" }`)).toBe(`{"url":"${image}"}`);
  });
});

describe('requestFingerprint, hashed a slice at a time', () => {
  /** The v2 fingerprint as defined: its material written as one string, then hashed. */
  function fingerprintWrittenWhole(req: FingerprintInput): string {
    let body: string;
    if (req.body === undefined) body = 'none';
    else if (req.body instanceof Uint8Array) {
      body = `bytes:${createHash('sha256').update(req.body).digest('hex')}`;
    } else {
      try {
        JSON.parse(req.body);
        body = `json:${canonicalJsonText(req.body)}`;
      } catch {
        body = `text:${req.body}`;
      }
    }
    const headers = Object.keys(req.headers)
      .sort()
      .map((name) => [name, req.headers[name]]);
    const material = ['vlt-approval-fingerprint-v2', req.method.toUpperCase(), req.href, body];
    return createHash('sha256')
      .update(JSON.stringify([...material, req.requestFullFields, headers]))
      .digest('hex');
  }

  const input = { method: 'POST', href: 'https://api.example.com/v1', requestFullFields: false, headers: {} };

  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('keeps the digests approvals were filed with (pinned: approvals pending across an upgrade)', () => {
    const pinned: Array<[FingerprintInput, string]> = [
      [
        {
          method: 'post',
          href: 'https://api.example.com/v1/send?a=1',
          body: '{ "to": "x\\u00e9", "cc": ["y", 1.50, 9007199254740993] }',
          requestFullFields: false,
          headers: { 'x-team': 'ops' },
        },
        'ccab9408298f1d08985069eefe07bfe14dccb09c7990e4d9d6ebf74d43ff2fe0',
      ],
      [
        {
          method: 'PUT',
          href: 'https://api.example.com/v1/notes',
          body: 'plain text "quoted" \ud83d\ude00\n',
          requestFullFields: true,
          headers: {},
        },
        '9efc944d1caa0d75f586c9727c70ae11f63c55efa7d6a273236b75292c1a42c2',
      ],
      [
        {
          method: 'POST',
          href: 'https://api.example.com/v1/files',
          body: new Uint8Array([0, 1, 2, 255]),
          requestFullFields: false,
          headers: { 'content-type': 'application/octet-stream' },
        },
        '5293d38a40d1e0d76a44f168153e631ac4606391d8e393def604909b1d57a0d9',
      ],
      [
        {
          method: 'GET',
          href: 'https://api.example.com/v1/x',
          body: undefined,
          requestFullFields: false,
          headers: {},
        },
        '5b6957776e0b14bc2b2f417c51cb941b047b3e6fb7bad58998b8315b8f9ffe2f',
      ],
    ];
    for (const [req, digest] of pinned) expect(requestFingerprint(req)).toBe(digest);
  });

  it('is the digest of its material written whole, for bodies whose characters straddle its slices', () => {
    // The hash is fed 64 Ki code units at a time: put surrogate pairs, lone surrogates, quotes,
    // backslashes and control characters on and around the first boundary, in text and in JSON
    // (whose lexeme starts one character later, at its quote), every offset and character.
    const slice = 64 * 1024;
    const tricky = ['😀', '\ud800', '\udfff', '"', '\\', '\n', '\u0000', 'é', '\u2028', 'ab'];
    const shapes = {
      text: (a: string) => a,
      json: (a: string) => JSON.stringify({ z: a, a: [1.5e3] }),
    };
    for (let off = -3; off <= 3; off++) {
      for (const t of tricky) {
        for (const [shape, write] of Object.entries(shapes)) {
          const req = { ...input, body: write(`${'x'.repeat(slice + off - 1)}${t}y`) };
          expect(requestFingerprint(req), `${shape}, ${JSON.stringify(t)} at ${off}`).toBe(
            fingerprintWrittenWhole(req),
          );
        }
      }
    }
    // Several boundaries, and pieces gathered before one: random mixes of the same characters.
    const segment = fc
      .tuple(fc.integer({ min: -3, max: 3 }), fc.constantFrom(...tricky))
      .map(([off, t]) => 'x'.repeat(slice + off - 1) + t);
    const text = fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(text, text, fc.constantFrom('json', 'text', 'json-small-first'), (a, b, shape) => {
        const body =
          shape === 'text'
            ? a + b
            : shape === 'json'
              ? JSON.stringify({ z: a, a: [b, 1.5e3] })
              : JSON.stringify({ k: 'v'.repeat(slice - 9), z: a, y: { b } });
        const req = { ...input, body };
        expect(requestFingerprint(req)).toBe(fingerprintWrittenWhole(req));
      }),
      { numRuns: 15 },
    );
  });

  it('is the digest of its material written whole, for documents of many short strings, keys and values of every kind', () => {
    // Each piece is escaped on its own now; a piece that needs no escaping is not escaped at all.
    const unit = fc.string({ unit: 'binary', maxLength: 12 });
    const leaf = fc.oneof(
      unit,
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.boolean(),
    );
    const doc = fc.dictionary(
      unit,
      fc.oneof(leaf, fc.array(leaf, { maxLength: 4 }), fc.dictionary(unit, leaf)),
    );
    fc.assert(
      fc.property(doc, fc.constantFrom('', ' ', '\n\t'), (value, ws) => {
        const body = JSON.stringify(value, null, ws);
        const req = { ...input, body };
        expect(requestFingerprint(req)).toBe(fingerprintWrittenWhole(req));
      }),
      { numRuns: 100 },
    );
  });

  it('regression: a body of 10,000 plain strings is not escaped again once joined (hostile input: a mail to 10,000 recipients held for approval)', () => {
    // Joining the pieces and escaping each 64 Ki slice again cost 60 ms of the event loop for
    // 8 MiB of short strings (ADR 0099, amended); such strings need only their quotes escaped.
    const address = `${'x'.repeat(800)}@corp.example`;
    const to = Array.from({ length: 10_000 }, () => ({ emailAddress: { address } }));
    const req = { ...input, body: JSON.stringify({ message: { toRecipients: to } }), bodyIsJson: true };
    const stringify = vi.spyOn(JSON, 'stringify');
    const digest = requestFingerprint(req);
    const escaped = stringify.mock.calls.reduce((n, [v]) => n + (typeof v === 'string' ? v.length : 0), 0);
    stringify.mockRestore();
    expect(escaped).toBeLessThan(1024);
    expect(digest).toBe(fingerprintWrittenWhole(req));
  });

  it('regression: a 30 MiB body is fingerprinted without being written out whole (hostile input: an approval of a large LLM call)', () => {
    // Escaping and encoding the whole material at once cost 0.9 s of the event loop for a chat
    // call carrying a 23 MiB image, at filing and again at redemption.
    const image = Buffer.alloc(23 * 1024 * 1024, 7).toString('base64');
    const body = JSON.stringify({ model: 'm', messages: [{ content: [{ image_url: { url: image } }] }] });
    const req = { ...input, body, bodyIsJson: true };
    const stringify = vi.spyOn(JSON, 'stringify');
    const digest = requestFingerprint(req);
    const longest = Math.max(0, ...stringify.mock.results.map((r) => (r.value as string).length));
    stringify.mockRestore();
    expect(longest).toBeLessThanOrEqual(2 * 64 * 1024 + 2);
    expect(digest).toBe(fingerprintWrittenWhole(req));
  });
});
