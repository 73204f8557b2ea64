import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Detector, MatchClue } from './pii-detectors.js';
import {
  builtInClues,
  creditCardDetector,
  emailDetector,
  ipAddressDetector,
  isDottedQuad,
  isIPv6Text,
  luhnValid,
  phoneDetector,
  ssnDetector,
} from './pii-detectors.js';
import { compileLinearRegex } from './regex.js';
import { customDetector, redactText } from './redaction.js';

/** All non-overlapping leftmost matches, as the redactor would take them. */
function findAll(d: Detector, text: string): string[] {
  const find = d.scan(text);
  const out: string[] = [];
  for (let m = find(0); m; m = find(m.end)) out.push(text.slice(m.start, m.end));
  return out;
}

describe('email', () => {
  const d = emailDetector();
  it.each([
    ['write to jane.doe+tag@mail.example.co.uk today', ['jane.doe+tag@mail.example.co.uk']],
    ['<a@b.io>, "c_d%e@f-g.example"', ['a@b.io', 'c_d%e@f-g.example']],
    ['end of sentence a@b.com.', ['a@b.com']],
    ['no tld a@localhost', []],
    ['numeric tld a@b.c1', []],
    ['x@y@z.example', ['y@z.example']],
    ['@example.com', []],
    ['user@', []],
  ])('%s', (text, expected) => {
    expect(findAll(d, text)).toEqual(expected);
  });

  it('matches exactly what its reference regex matches (differential)', () => {
    const reference = /[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}/g;
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.constantFrom('a', 'B', '1', '.', '-', '_', '+', '@', ' ', 'x', 'é'),
          maxLength: 120,
        }),
        (text) => {
          expect(findAll(d, text)).toEqual(text.match(reference) ?? []);
        },
      ),
      { numRuns: 5000 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 60, max: 70 }), fc.integer({ min: 0, max: 12 }), (local, labels) => {
        const text = `${'l'.repeat(local)}@${'d.'.repeat(labels)}com`;
        expect(findAll(d, text)).toEqual(text.match(reference) ?? []);
      }),
    );
  });
});

describe('ssn', () => {
  const d = ssnDetector();
  it.each([
    ['SSN 123-45-6789.', ['123-45-6789']],
    ['ssn:123 45 6789', ['123 45 6789']],
    ['mixed 123-45 6789', []],
    ['000-12-3456 123-00-4567 123-45-0000', []],
    ['longer 123-45-67890', []],
    ['glued A123-45-6789', []],
    ['in a number 1-123-45-6789', []],
    ['followed 123-45-6789-1', []],
    ['phone-like 12-345-6789', []],
  ])('%s', (text, expected) => {
    expect(findAll(d, text)).toEqual(expected);
  });
});

describe('credit card', () => {
  const d = creditCardDetector();
  it('checks Luhn', () => {
    expect(luhnValid('4111111111111111')).toBe(true);
    expect(luhnValid('4111111111111112')).toBe(false);
    expect(luhnValid('378282246310005')).toBe(true);
  });
  it.each([
    ['visa 4111111111111111 ok', ['4111111111111111']],
    ['spaced 4111 1111 1111 1111.', ['4111 1111 1111 1111']],
    ['dashed 5500-0000-0000-0004', ['5500-0000-0000-0004']],
    ['amex 3782 822463 10005', ['3782 822463 10005']],
    ['19 digits 6011000990139424000 x', []],
    ['luhn fail 4111111111111112', []],
    ['timestamp-like 1700000000000 and 1111111111111117', []],
    ['card then digits 4111 1111 1111 1111 1234', ['4111 1111 1111 1111']],
    ['digits then card 1234 4111 1111 1111 1111', ['4111 1111 1111 1111']],
    ['glued x4111111111111111', []],
    ['too long 41111111111111111111111', []],
  ])('%s', (text, expected) => {
    expect(findAll(d, text)).toEqual(expected);
  });
});

describe('phone', () => {
  const d = phoneDetector();
  it.each([
    ['call +14155552671 now', ['+14155552671']],
    ['call +1 (415) 555-2671', ['+1 (415) 555-2671']],
    ['call (415) 555-2671.', ['(415) 555-2671']],
    ['call (415)555-2671', ['(415)555-2671']],
    ['call 415-555-2671', ['415-555-2671']],
    ['call 415.555.2671', ['415.555.2671']],
    ['uk 020 7946 0958', ['020 7946 0958']],
    ['intl +44 20 7946 0958', ['+44 20 7946 0958']],
    ['short 555-2671', []],
    ['bare 4155552671', []],
    ['one separator 415 5552671', []],
    ['date 2024-01-15 10:30', []],
    ['date 15.01.2024 1030', []],
    ['version 1.2.3.4', []],
    ['too many +1234567890123456', []],
    ['glued abc415-555-2671', []],
    ['card 4111 1111 1111 1111', []],
    ['inside a longer number 1234 5678 9012 3456 7890', []],
  ])('%s', (text, expected) => {
    expect(findAll(d, text)).toEqual(expected);
  });
});

describe('ip address', () => {
  const d = ipAddressDetector();
  it.each([
    ['from 10.0.0.1 and 192.168.1.254.', ['10.0.0.1', '192.168.1.254']],
    ['host:10.0.0.1 id:10.0.0.2', ['10.0.0.1', '10.0.0.2']],
    ['with port 10.0.0.1:8443', ['10.0.0.1']],
    ['not ips 1.2.3.4.5 256.1.1.1 01.2.3.4 v1.2.3.4 1.2.3', []],
    ['v6 2001:db8::1 and fe80::1%eth0', ['2001:db8::1', 'fe80::1']],
    ['full 2001:0db8:0000:0000:0000:ff00:0042:8329', ['2001:0db8:0000:0000:0000:ff00:0042:8329']],
    ['mapped ::ffff:192.0.2.128 loopback ::1', ['::ffff:192.0.2.128', '::1']],
    ['bracketed [2001:db8::7]:443', ['2001:db8::7']],
    ['letters only abcd::ef', ['abcd::ef']],
    ['times 12:30:45 and std::vector and a::b::c', []],
    ['mac 00:1a:2b:3c:4d:5e', []],
  ])('%s', (text, expected) => {
    expect(findAll(d, text)).toEqual(expected);
  });

  it('validates address text strictly', () => {
    expect(isDottedQuad('255.255.255.255')).toBe(true);
    expect(isDottedQuad('1.2.3.04')).toBe(false);
    expect(isIPv6Text('1:2:3:4:5:6:7:8')).toBe(true);
    expect(isIPv6Text('1:2:3:4:5:6:7:8:9')).toBe(false);
    expect(isIPv6Text('1::2::3')).toBe(false);
    expect(isIPv6Text('::')).toBe(true);
    expect(isIPv6Text('1:2:3:4:5:6:1.2.3.4')).toBe(true);
    expect(isIPv6Text('1:2:3:4:5:6:7:1.2.3.4')).toBe(false);
    expect(isIPv6Text('12345::')).toBe(false);
  });
});

describe('built-in detectors run in linear time', () => {
  // Inputs built to make naive scanners or backtracking regexes re-read long runs from every
  // position. At 2 MB a linear scan takes milliseconds and a quadratic one hours, so the test
  // timeout is the bound: no time is asserted.
  const cases: Array<[string, Detector, (n: number) => string]> = [
    ['email: long local part, no @', emailDetector(), (n) => 'a'.repeat(n)],
    ['email: many @ without domains', emailDetector(), (n) => 'a@'.repeat(n / 2)],
    ['email: labels without a TLD', emailDetector(), (n) => `a@${'b1.'.repeat(n / 3)}`],
    ['phone: digits separated by spaces', phoneDetector(), (n) => '1 '.repeat(n / 2)],
    ['phone: plus signs', phoneDetector(), (n) => '+1'.repeat(n / 2)],
    ['card: digit groups', creditCardDetector(), (n) => '4 '.repeat(n / 2)],
    ['card: long digit run', creditCardDetector(), (n) => '4'.repeat(n)],
    ['ssn: partial shapes', ssnDetector(), (n) => '123-45-'.repeat(n / 7)],
    ['ip: dotted run', ipAddressDetector(), (n) => '1.'.repeat(n / 2)],
    ['ip: colon run', ipAddressDetector(), (n) => 'a:'.repeat(n / 2)],
    ['ip: colons only', ipAddressDetector(), (n) => ':'.repeat(n)],
  ];
  it.each(cases)('%s', (_name, detector, make) => {
    const input = make(2_000_000);
    const out = redactText(input, [detector]);
    // Completing is the point; the output is the input with at most some spans replaced.
    expect(out.length).toBeGreaterThan(input.length / 4);
    expect(out.length).toBeLessThan(input.length * 4);
  });
});

describe('match clues (the necessary conditions the raw stream fast path relies on)', () => {
  const builtIns: Array<[string, Detector]> = [
    ['email', emailDetector()],
    ['phone', phoneDetector()],
    ['ssn', ssnDetector()],
    ['credit_card', creditCardDetector()],
    ['ip_address', ipAddressDetector()],
  ];
  const holds = (clue: MatchClue, text: string): boolean =>
    (clue.char === null || text.includes(clue.char)) && (text.match(/[0-9]/g)?.length ?? 0) >= clue.digits;

  // Dense in everything the scanners look at, so that matches are frequent.
  const piece = fc.constantFrom(
    ...'0123456789012345678901234567890123456789'.split(''),
    ' ',
    '-',
    '.',
    '.',
    ':',
    ':',
    '::',
    '+',
    '(',
    ')',
    '@',
    '_',
    '%',
    'a',
    'f',
    'F',
    'x',
    'Z',
    'ü',
    '😀',
    'jane.doe@example.com',
    '+1 (415) 555-2671',
    '4111 1111 1111 1111',
    '078-05-1120',
    '10.0.0.1',
    '2001:db8::1',
    '::ffff:192.0.2.1',
    '5555 5555 5555 4444',
    '4222222222222',
    '378282246310005',
    '219-09-9999',
    '123 45 6789',
  );
  const dense = fc.array(piece, { maxLength: 60 }).map((p) => p.join(''));

  it.each(builtIns)(
    'every %s match satisfies one of its clues, and no clue means no redaction',
    (_name, d) => {
      const clues = builtInClues(d)!;
      expect(clues.length).toBeGreaterThan(0);
      let matches = 0;
      fc.assert(
        fc.property(dense, (text) => {
          for (const m of findAll(d, text)) {
            matches++;
            expect(clues.some((c) => holds(c, m))).toBe(true);
          }
          if (!clues.some((c) => holds(c, text))) expect(redactText(text, [d])).toBe(text);
        }),
        { numRuns: 3000 },
      );
      expect(matches).toBeGreaterThan(20); // the property was not vacuous
    },
  );

  it('holds at the exact thresholds', () => {
    const find = (d: Detector, t: string) => findAll(d, t).length;
    expect(find(phoneDetector(), '+1 555 2671')).toBe(1); // '+' and 7 digits
    expect(find(phoneDetector(), '415-555-2671')).toBe(1); // 10 digits
    expect(find(ssnDetector(), '078-05-1120')).toBe(1); // 9 digits
    expect(find(creditCardDetector(), '4222222222222')).toBe(1); // 13 digits
    expect(find(ipAddressDetector(), '1.2.3.4')).toBe(1); // '.' and 4 digits
    expect(find(ipAddressDetector(), 'a::b')).toBe(1); // ':' and no digit
  });

  it('only built-in factories carry clues; a custom pattern never does', () => {
    for (const [, d] of builtIns) expect(builtInClues(d)).not.toBeNull();
    const custom = customDetector(compileLinearRegex('x'), '[X]');
    expect(builtInClues(custom)).toBeNull();
    expect(builtInClues({ ...custom, name: 'email' })).toBeNull();
  });
});
