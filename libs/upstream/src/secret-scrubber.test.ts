import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  compileSecretForms,
  createSecretScrubber,
  scrubSecretsFromBuffer,
  scrubSecretsFromText,
  secretForms,
  SECRET_REPLACEMENT,
} from './secret-scrubber.js';

const TOKEN = 'tok-5f1e2d3c4b5a69788796a5b4';
const BASIC = Buffer.from(`bot@tracker.test:${TOKEN}`).toString('base64');

function streamed(body: Buffer, secrets: string[], cuts: number[]): string {
  const s = createSecretScrubber(secrets)!;
  const out: Buffer[] = [];
  let pos = 0;
  for (const cut of [...cuts, body.length]) {
    out.push(s.push(body.subarray(pos, cut)));
    pos = cut;
  }
  out.push(s.end());
  return Buffer.concat(out).toString('utf8');
}

describe('secret scrubber', () => {
  it('regression: finds the secret raw, percent-encoded, JSON-escaped and inside any base64 text', () => {
    const secret = `p/ss+word=${TOKEN}`;
    const reflections = [
      secret,
      encodeURIComponent(secret),
      JSON.stringify(secret).slice(1, -1),
      Buffer.from(secret).toString('base64'),
      Buffer.from(`x${secret}`).toString('base64'),
      Buffer.from(`xy${secret}`).toString('base64'),
      Buffer.from(`user:${secret}`).toString('base64url'),
      Buffer.from(`ab${secret}`).toString('base64').replace(/\//g, '\\/'),
    ];
    for (const r of reflections) {
      const out = scrubSecretsFromText(`{"echo":"${r}"}`, [secret]);
      expect(out, r).toContain(SECRET_REPLACEMENT);
      // No 8+ character run of any searched form survives.
      for (const form of secretForms([secret])) expect(out).not.toContain(form);
    }
  });

  it('forms compiled once scrub exactly what the secrets they came from scrub', () => {
    const secrets = [`bot@tracker.test:${TOKEN}`, TOKEN];
    const forms = compileSecretForms(secrets);
    const text = `Basic ${BASIC} ${encodeURIComponent(TOKEN)} plain`;
    expect(scrubSecretsFromText(text, forms)).toBe(scrubSecretsFromText(text, secrets));
    expect(scrubSecretsFromText(text, forms)).not.toContain(TOKEN.slice(0, 12));
    const body = Buffer.from(`{"a":"${TOKEN}"}`, 'utf16le');
    expect(scrubSecretsFromBuffer(body, forms).equals(scrubSecretsFromBuffer(body, secrets))).toBe(true);
    // One compiled set serves many bodies: nothing of one scrub leaks into the next.
    const s1 = createSecretScrubber(forms)!;
    const s2 = createSecretScrubber(forms)!;
    expect(s1.push(Buffer.from(`x ${TOKEN.slice(0, 10)}`)).toString()).toBe('x ');
    expect(s2.push(Buffer.from('y')).toString()).toBe('y');
    expect(s2.found).toBe(false);
  });

  it('regression: the injected Basic header value is scrubbed from a reflected header dump', () => {
    const body = Buffer.from(`{"headers":{"Authorization":"Basic ${BASIC}"}}`);
    const out = scrubSecretsFromBuffer(body, [`bot@tracker.test:${TOKEN}`, TOKEN]).toString();
    expect(out).not.toContain(BASIC.slice(4, 30));
    expect(out).not.toContain(TOKEN);
    expect(out).toContain(SECRET_REPLACEMENT);
  });

  it('regression: a secret split at every possible chunk boundary is still scrubbed', () => {
    const body = Buffer.from(`data: {"token":"${TOKEN}","b64":"${BASIC}"}\n\n`);
    const secrets = [`bot@tracker.test:${TOKEN}`, TOKEN];
    const whole = scrubSecretsFromBuffer(body, secrets).toString();
    for (let i = 1; i < body.length; i++) {
      expect(streamed(body, secrets, [i])).toBe(whole);
    }
  });

  it('equals the buffered result for random chunkings of random text around the secret', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 40 }),
        fc.string({ maxLength: 40 }),
        fc.uniqueArray(fc.nat({ max: 200 }), { maxLength: 6 }),
        (before, after, rawCuts) => {
          const body = Buffer.from(`${before}${TOKEN}${after}${encodeURIComponent(TOKEN)}`);
          const cuts = rawCuts.filter((c) => c > 0 && c < body.length).sort((a, b) => a - b);
          const out = streamed(body, [TOKEN], cuts);
          expect(out).toBe(scrubSecretsFromBuffer(body, [TOKEN]).toString());
          expect(out).not.toContain(TOKEN);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('regression: finds the secret in a UTF-16 body (both byte orders) and keeps the text decodable', () => {
    const le = scrubSecretsFromBuffer(Buffer.from(`{"auth":"Bearer ${TOKEN}"}`, 'utf16le'), [TOKEN]);
    expect(le.toString('utf16le')).toBe(`{"auth":"Bearer ${SECRET_REPLACEMENT}"}`);
    const be = scrubSecretsFromBuffer(Buffer.from(`x ${TOKEN} y`, 'utf16le').swap16(), [TOKEN]);
    expect(Buffer.from(be).swap16().toString('utf16le')).toBe(`x ${SECRET_REPLACEMENT} y`);
  });

  it('passes a chunk without the secret through as the same buffer (no copy, nothing held back)', () => {
    const s = createSecretScrubber([TOKEN])!;
    const chunk = Buffer.from('data: {"text":"nothing secret here"}\n\n');
    expect(s.push(chunk)).toBe(chunk);
    expect(s.end().length).toBe(0);
    expect(s.found).toBe(false);
  });

  it('holds back only a suffix that could start the secret, and releases it at the end', () => {
    const s = createSecretScrubber([TOKEN])!;
    const out = s.push(Buffer.from(`hello ${TOKEN.slice(0, 10)}`));
    expect(out.toString()).toBe('hello ');
    expect(s.end().toString()).toBe(TOKEN.slice(0, 10));
  });

  it('holds back exactly the longest suffix that could start any form (against a direct search)', () => {
    // The held-back length decides what a later chunk can still complete: one byte too few
    // and a secret split there passes unscrubbed.
    const expectedHeld = (chunk: Buffer, forms: readonly Buffer[]): number => {
      let best = 0;
      for (const form of forms) {
        for (let len = 1; len < form.length && len <= chunk.length; len++) {
          if (chunk.subarray(chunk.length - len).equals(form.subarray(0, len))) best = Math.max(best, len);
        }
      }
      return best;
    };
    const secret = fc.stringMatching(/^[A-Za-z0-9:@+/=_-]{8,40}$/);
    fc.assert(
      fc.property(
        fc.array(secret, { minLength: 1, maxLength: 3 }),
        fc.string({ maxLength: 60 }),
        fc.nat(),
        fc.nat(),
        (secrets, text, pick, cut) => {
          const compiled = compileSecretForms(secrets);
          const forms = compiled.bytes.map((f) => f.bytes);
          if (forms.length === 0) return;
          // Text, then a proper prefix of one of the forms (or nothing), as the chunk's tail.
          const form = forms[pick % forms.length]!;
          const chunk = Buffer.concat([Buffer.from(text), form.subarray(0, cut % form.length)]);
          if (chunk.length === 0) return;
          const s = createSecretScrubber(compiled)!;
          const out = s.push(chunk);
          if (s.found) return; // a replacement changed the bytes: covered by the equality tests
          expect(chunk.length - out.length).toBe(expectedHeld(chunk, forms));
          expect(Buffer.concat([out, s.end()]).equals(chunk)).toBe(true);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('replaces every occurrence of every form, overlapping ones too (against a search at every offset)', () => {
    // The scrubber searches only forms that contain no other form and compares the others where
    // those occur. The reference tries every form at every offset, and merges the spans found
    // as the scrubber does: overlapping spans become one replacement, the earliest (longest)
    // one's.
    const reference = (body: Buffer, forms: ReturnType<typeof compileSecretForms>['bytes']): Buffer => {
      const spans: Array<[number, number, Buffer]> = [];
      for (const { bytes, replacement, evenOnly } of forms) {
        for (let at = 0; at + bytes.length <= body.length; at++) {
          if ((!evenOnly || at % 2 === 0) && body.subarray(at, at + bytes.length).equals(bytes)) {
            spans.push([at, at + bytes.length, replacement]);
          }
        }
      }
      spans.sort((x, y) => x[0] - y[0] || y[1] - x[1]);
      const parts: Buffer[] = [];
      let pos = 0;
      for (const [from, to, replacement] of spans) {
        if (from >= pos) parts.push(body.subarray(pos, from), replacement);
        pos = Math.max(pos, to);
      }
      parts.push(body.subarray(pos));
      return Buffer.concat(parts);
    };
    // A three-letter alphabet: forms contain each other and repeat in the body; periodic
    // secrets overlap themselves there.
    const secret = fc.oneof(fc.stringMatching(/^[ab:]{8,14}$/), fc.stringMatching(/^(ab|aab|ba){4,6}$/));
    fc.assert(
      fc.property(
        secret,
        secret,
        fc.array(fc.oneof(fc.nat(), fc.stringMatching(/^[ab:]{0,6}$/)), { maxLength: 8 }),
        (user, password, pieces) => {
          const compiled = compileSecretForms([`${user}:${password}`, password]);
          const forms = compiled.bytes;
          // The body: forms (any encoding) and short runs of the same alphabet, side by side.
          const body = Buffer.concat(
            pieces.map((p) => (typeof p === 'number' ? forms[p % forms.length]!.bytes : Buffer.from(p))),
          );
          expect(scrubSecretsFromBuffer(body, compiled).equals(reference(body, forms))).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('does not search forms shorter than 8 characters (they would match ordinary text)', () => {
    expect(createSecretScrubber(['abc'])).toBeNull();
    expect(scrubSecretsFromText('abc abc', ['abc'])).toBe('abc abc');
  });
});
