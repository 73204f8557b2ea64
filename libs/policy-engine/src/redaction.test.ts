import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Detector } from './pii-detectors.js';
import {
  BUILT_IN_MAX_SPAN,
  creditCardDetector,
  emailDetector,
  ipAddressDetector,
  phoneDetector,
  ssnDetector,
} from './pii-detectors.js';
import {
  REDACTION_LOOKAHEAD,
  REDACTION_WINDOW,
  TextRedactor,
  customDetector,
  redactText,
} from './redaction.js';
import { compileLinearRegex } from './regex.js';

const builtIns: Detector[] = [
  emailDetector(),
  phoneDetector(),
  ssnDetector(),
  creditCardDetector(),
  ipAddressDetector(),
];

/** Streams `text` through a TextRedactor in the given chunk sizes. */
function streamed(text: string, detectors: readonly Detector[], sizes: number[]): string {
  const r = new TextRedactor(detectors);
  let out = '';
  let i = 0;
  for (let k = 0; i < text.length; k++) {
    const size = Math.max(1, sizes.length ? sizes[k % sizes.length]! : text.length);
    out += r.push(text.slice(i, i + size));
    i += size;
  }
  return out + r.end();
}

/** Reference: each line scanned whole, no windows (exact for detectors with short matches). */
function reference(text: string, detectors: readonly Detector[]): string {
  return text
    .split('\n')
    .map((line) => {
      const cr = line.endsWith('\r');
      const body = cr ? line.slice(0, -1) : line;
      const finders = detectors.map((d) => d.scan(body));
      let out = '';
      let p = 0;
      for (;;) {
        let best: { start: number; end: number; i: number } | null = null;
        finders.forEach((f, i) => {
          const m = f(p);
          if (m && (!best || m.start < best.start)) best = { ...m, i };
        });
        if (!best) break;
        const b = best as { start: number; end: number; i: number };
        out += body.slice(p, b.start) + detectors[b.i]!.replacement;
        p = b.end;
      }
      return out + body.slice(p) + (cr ? '\r' : '');
    })
    .join('\n');
}

const piiPiece = fc.constantFrom(
  'jane.doe@example.com',
  '+1 (415) 555-2671',
  '123-45-6789',
  '4111 1111 1111 1111',
  '10.0.0.1',
  '2001:db8::1',
  'ünïcødé 😀 ',
  ' ',
  '\n',
  '\r\n',
  'a',
  '.',
  '-',
  '@',
  ':',
  '1',
  'lorem ipsum ',
);
const textArb = fc.array(piiPiece, { maxLength: 60 }).map((parts) => parts.join(''));
const chunkSizes = fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 8 });

describe('redactText', () => {
  it('replaces each kind with its token', () => {
    expect(
      redactText(
        'mail jane@example.com or call +14155552671 from 10.0.0.1, ssn 123-45-6789, card 4111111111111111',
        builtIns,
      ),
    ).toBe(
      'mail [REDACTED_EMAIL] or call [REDACTED_PHONE] from [REDACTED_IP], ssn [REDACTED_SSN], card [REDACTED_CREDIT_CARD]',
    );
  });

  it('gives the leftmost match priority, then the detector listed first', () => {
    const custom = customDetector(compileLinearRegex('doe@'), '[C]');
    expect(redactText('jane.doe@example.com', [custom, emailDetector()])).toBe('[REDACTED_EMAIL]');
    const sameStart = customDetector(compileLinearRegex('jane'), '[C]');
    expect(redactText('jane@example.com', [sameStart, emailDetector()])).toBe('[C]@example.com');
    expect(redactText('jane@example.com', [emailDetector(), sameStart])).toBe('[REDACTED_EMAIL]');
  });

  it('never matches across a line break, and anchors custom patterns per line', () => {
    const custom = customDetector(compileLinearRegex('^secret [a-z]+$'), '[S]');
    expect(redactText('x\nsecret abc\r\nsecret def\nnot secret ghi', [custom])).toBe(
      'x\n[S]\r\n[S]\nnot secret ghi',
    );
    expect(redactText('jane.doe@exam\nple.com', [emailDetector()])).toBe('jane.doe@exam\nple.com');
  });

  it('skips empty matches of custom patterns instead of looping or inserting text', () => {
    expect(redactText('abc', [customDetector(compileLinearRegex('x*'), '[E]')])).toBe('abc');
    expect(redactText('axxb', [customDetector(compileLinearRegex('x*'), '[E]')])).toBe('a[E]b');
  });
});

describe('TextRedactor streaming', () => {
  it('catches values split across chunks at every split point', () => {
    const text =
      'a: jane.doe@example.com b: 4111 1111 1111 1111 c: +1 (415) 555-2671 d: 2001:db8::1 e: 123-45-6789';
    const whole = redactText(text, builtIns);
    expect(whole).not.toMatch(/jane|4111|415|db8|6789/);
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j += 7) {
        const r = new TextRedactor(builtIns);
        const out = r.push(text.slice(0, i)) + r.push(text.slice(i, j)) + r.push(text.slice(j)) + r.end();
        expect(out).toBe(whole);
      }
    }
  });

  it('equals the buffered result for random texts and random chunkings', () => {
    fc.assert(
      fc.property(textArb, chunkSizes, (text, sizes) => {
        expect(streamed(text, builtIns, sizes)).toBe(redactText(text, builtIns));
      }),
      { numRuns: 1500 },
    );
  });

  it('equals the buffered result on lines longer than the window, with custom patterns too', () => {
    const custom = customDetector(compileLinearRegex('sk-[A-Za-z0-9]{8,40}'), '[KEY]');
    // Unbounded: its matches can outgrow the look-ahead, where only the round positions (fixed
    // by the text, never by the chunking) keep streamed and buffered output equal.
    const unbounded = customDetector(compileLinearRegex('Z[a-z]*Z|(q+)+$'), '[Z]');
    const detectors = [...builtIns, custom, unbounded];
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            {
              arbitrary: fc.constantFrom(
                'sk-abcdefgh12345678',
                'jane.doe@example.com',
                '4111 1111 1111 1111',
                '😀',
                ' ',
                'Z',
                'q'.repeat(700),
              ),
              weight: 10,
            },
            { arbitrary: fc.constantFrom('x'.repeat(1000), 'x'.repeat(3000)), weight: 6 },
            { arbitrary: fc.constant('\n'), weight: 1 },
          ),
          { maxLength: 60 },
        ),
        chunkSizes.map((s) => s.map((x) => x * 97)),
        (parts, sizes) => {
          const text = parts.join('');
          expect(streamed(text, detectors, sizes)).toBe(redactText(text, detectors));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('places rounds by the text alone: a match longer than the window is judged the same for every chunking', () => {
    const unbounded = customDetector(compileLinearRegex('Z[a-z]*Z'), '[Z]');
    for (const text of [`Z${'x'.repeat(9000)}Z`, `Z${'x'.repeat(5000)}Z ${'y'.repeat(20000)}`]) {
      const whole = redactText(text, [unbounded]);
      for (const sizes of [[1000], [1], [4095, 4097], [8192], [9001]])
        expect(streamed(text, [unbounded], sizes)).toBe(whole);
    }
  });

  it('redacts a long line exactly like a whole-line scan when every match is shorter than the look-ahead', () => {
    // Put values right across each round boundary of an endless line.
    const filler = 'z'.repeat(REDACTION_WINDOW - REDACTION_LOOKAHEAD - 10);
    const text = Array.from(
      { length: 12 },
      (_, i) => `${filler}${i % 2 ? 'jane.doe@example.com' : '4111 1111 1111 1111'}`,
    ).join(' ');
    expect(text.length).toBeGreaterThan(REDACTION_WINDOW * 5);
    expect(redactText(text, builtIns)).toBe(reference(text, builtIns));
    expect(streamed(text, builtIns, [1000, 3, 7777])).toBe(reference(text, builtIns));
  });

  it('has a look-ahead longer than any built-in match, which makes built-ins exact on long lines', () => {
    expect(BUILT_IN_MAX_SPAN).toBeLessThan(REDACTION_LOOKAHEAD);
    expect(
      redactText(
        `${'a'.repeat(64)}@${'b'.repeat(63)}.`.concat(`${'c'.repeat(63)}.`.repeat(7), 'd'.repeat(24)),
        [emailDetector()],
      ),
    ).toBe('[REDACTED_EMAIL]');
  });

  it('keeps memory bounded on an endless line: pending text never exceeds the window', () => {
    const r = new TextRedactor(builtIns);
    let emitted = 0;
    for (let i = 0; i < 2000; i++) emitted += r.push('lorem ipsum 12 '.repeat(20)).length;
    const held = 2000 * 300 - emitted;
    expect(held).toBeLessThanOrEqual(REDACTION_WINDOW);
  });

  it('never splits a surrogate pair when it cuts a long line', () => {
    const text = '😀'.repeat(REDACTION_WINDOW * 2);
    const r = new TextRedactor(builtIns);
    const first = r.push(text);
    expect(first.length).toBeGreaterThan(0);
    expect(/[\ud800-\udbff]$/.test(first)).toBe(false);
    expect(first + r.end()).toBe(text);
  });
});

describe('custom patterns run in linear time (RE2)', () => {
  // No time is asserted: a backtracking engine needs ~2^4000 steps per line here, so it would
  // never return and the test timeout fails the test; a linear engine finishes in milliseconds.
  it('finishes classic catastrophic-backtracking inputs', () => {
    const evil = customDetector(compileLinearRegex('(a+)+$'), '[X]');
    const nested = customDetector(compileLinearRegex('(x+x+)+y'), '[X]');
    const input = `${'a'.repeat(4000)}!\n`.repeat(500); // 2 MB of lines of 4 000 "a" and a "!"
    expect(redactText(input, [evil])).toBe(input);
    const xs = 'x'.repeat(2_000_000);
    expect(redactText(xs, [nested])).toBe(xs);
  });

  it('is exact on lines up to the window; beyond it "$" also holds at a round end (over-redaction)', () => {
    const evil = customDetector(compileLinearRegex('(a+)+$'), '[X]');
    expect(redactText(`${'a'.repeat(REDACTION_WINDOW - 2)}!`, [evil])).toBe(
      `${'a'.repeat(REDACTION_WINDOW - 2)}!`,
    );
    expect(redactText(`${'a'.repeat(3 * REDACTION_WINDOW)}!`, [evil])).toContain('[X]');
  });
});
