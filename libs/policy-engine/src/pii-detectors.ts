/**
 * Built-in PII detectors. Each is a hand-written scanner, not a backtracking regex: its work per
 * candidate is bounded by a small constant (at most ~600 characters are examined from any start
 * position), so scanning is linear in the input whatever an upstream sends.
 *
 * A detector answers "leftmost match starting at or after `from`"; it may look at the two
 * characters before `from` for its left boundary. Matches are short (the longest, an e-mail
 * address, is at most 601 characters), which the streaming redactor relies on.
 *
 * Definitions (documented in docs/policy-engine.md):
 * - email: `[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}`, leftmost-first,
 *   exactly as that regex would match it (a differential test checks this).
 * - ssn: `ddd-dd-dddd` or `ddd dd dddd`, no group all zeros, not part of a longer number.
 * - credit_card: 13-19 digits, optionally grouped by single spaces or dashes, first digit 2-6
 *   (the issuer ranges in use), Luhn-valid; the longest valid run from a group start wins.
 * - phone: `+` and 7-15 digits, or 10-15 digits with at least two separators or a
 *   parenthesised area code; separators are single spaces, dots or dashes; shapes that read as
 *   dates (4-2-2, 2-2-4 digit groups) are not phones.
 * - ip_address: dotted-quad IPv4 (no leading zeros) not glued to letters, digits or dots
 *   (`host:10.0.0.1` and `10.0.0.1:443` count); IPv6 in any RFC 4291 text form including an
 *   IPv4 tail, as a whole run of hex digits, colons and dots not glued to a word.
 */

export interface DetectorMatch {
  start: number;
  end: number;
}

/** Finds the leftmost match at or after `from`, or null. */
export type Finder = (from: number) => DetectorMatch | null;

export interface Detector {
  readonly name: string;
  readonly replacement: string;
  /** A cheap necessary condition: false means `text` certainly holds no match. */
  mayMatch?(text: string): boolean;
  scan(text: string): Finder;
}

/**
 * A necessary condition for a built-in detector's match: the matched text contains `char` (when
 * not null) and at least `digits` ASCII digits [0-9]. A detector has one or more alternative
 * clues; a text in which no clue holds (for instance: no '@' anywhere) contains no match of that
 * detector, so redaction leaves it unchanged. The stream filters' raw fast path (raw-json.ts)
 * relies on this; each factory below states why its clues hold, and pii-detectors.test.ts
 * checks them against the scanners on dense random text.
 */
export interface MatchClue {
  readonly char: '@' | '+' | ':' | '.' | null;
  readonly digits: number;
}

// Private brand: only the factories in this file can mark a detector as built-in, so a custom
// detector can never borrow the clues of one (its name alone is not trusted).
const CLUES: unique symbol = Symbol('built-in detector clues');
type Branded = Detector & { readonly [CLUES]?: readonly MatchClue[] };

function builtIn(detector: Detector, clues: readonly MatchClue[]): Detector {
  return Object.assign(detector, { [CLUES]: Object.freeze(clues.map((c) => Object.freeze({ ...c }))) });
}

/** The clues of a detector made by a built-in factory; null for any other detector. */
export function builtInClues(detector: Detector): readonly MatchClue[] | null {
  return (detector as Branded)[CLUES] ?? null;
}

/** Longest text any built-in detector examines from one start position (plus boundary look). */
export const BUILT_IN_MAX_SPAN = 640;

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
const isAlpha = (c: number): boolean => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
const isWord = (c: number): boolean => isDigit(c) || isAlpha(c) || c === 0x5f;
const isHex = (c: number): boolean => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
const isLocalChar = (c: number): boolean =>
  isDigit(c) || isAlpha(c) || c === 0x2e || c === 0x5f || c === 0x25 || c === 0x2b || c === 0x2d;
const isLabelChar = (c: number): boolean => isDigit(c) || isAlpha(c) || c === 0x2d;

/** charCodeAt that answers -1 outside the string, so boundary checks need no length tests. */
function at(text: string, i: number): number {
  return i >= 0 && i < text.length ? text.charCodeAt(i) : -1;
}

// ------------------------------------------------------------------------------------- email

/** End of `(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}` starting at q, or -1. */
function emailDomainEnd(text: string, q: number): number {
  const n = text.length;
  const labelStarts: number[] = [];
  let pos = q;
  while (labelStarts.length < 8) {
    let e = pos;
    while (e < n && e - pos < 64 && isLabelChar(text.charCodeAt(e))) e++;
    const len = e - pos;
    if (len >= 1 && len <= 63 && at(text, e) === 0x2e) {
      labelStarts.push(pos);
      pos = e + 1;
    } else break;
  }
  // Greedy repetition first, then fewer labels: the regex's backtracking order.
  for (let k = labelStarts.length; k >= 1; k--) {
    const tStart = k === labelStarts.length ? pos : labelStarts[k]!;
    let t = tStart;
    while (t < n && t - tStart < 24 && isAlpha(text.charCodeAt(t))) t++;
    if (t - tStart >= 2) return t;
  }
  return -1;
}

/**
 * Clue: a match runs from a local-part start s < atSign to a domain end e > atSign + 1, so it
 * contains the '@' at atSign.
 */
const EMAIL_CLUES: readonly MatchClue[] = [{ char: '@', digits: 0 }];

export function emailDetector(replacement = '[REDACTED_EMAIL]'): Detector {
  return builtIn(
    {
      name: 'email',
      replacement,
      mayMatch: (text) => text.includes('@'),
      scan: (text) => (from) => {
        let atSign = text.indexOf('@', from);
        while (atSign !== -1) {
          const minStart = Math.max(from, atSign - 64);
          let s = atSign;
          while (s > minStart && isLocalChar(text.charCodeAt(s - 1))) s--;
          if (s < atSign) {
            const e = emailDomainEnd(text, atSign + 1);
            if (e !== -1) return { start: s, end: e };
          }
          atSign = text.indexOf('@', atSign + 1);
        }
        return null;
      },
    },
    EMAIL_CLUES,
  );
}

// --------------------------------------------------------------------------- digit helpers

const DIGIT = /[0-9]/g;

/** Position of the next digit at or after `from`, or -1 (native scan, no allocation). */
function nextDigit(text: string, from: number): number {
  DIGIT.lastIndex = from;
  return DIGIT.test(text) ? DIGIT.lastIndex - 1 : -1;
}

// At least 7 (13) ASCII digits. Anchored on purpose: unanchored, `[0-9](?:[^0-9]*[0-9]){12}`
// is retried from every digit and each attempt backtracks through every non-digit run after it,
// which made the card precondition the hottest code on digit-rich text; anchored there is one
// attempt, and giving back a non-digit fails at once, so the test is linear.
const SEVEN_DIGITS = /^(?:[^0-9]*[0-9]){7}/;
const THIRTEEN_DIGITS = /^(?:[^0-9]*[0-9]){13}/;
// A phone has a "+", a parenthesis or a separator between two digits.
const PHONE_SHAPE = /[+(]|[0-9][ .-][0-9]/;
const SSN_SHAPE = /[0-9]{3}[- ][0-9]{2}[- ][0-9]{4}/;
const DOTTED_DIGITS = /[0-9]\.[0-9]/;

/** True when position i is inside a run of digit groups ("1234 5678"): prev is a separator after a digit. */
function continuesDigitGroups(text: string, i: number): boolean {
  const p = at(text, i - 1);
  return (p === 0x20 || p === 0x2d || p === 0x2e) && isDigit(at(text, i - 2));
}

// --------------------------------------------------------------------------------------- ssn

const SSN_DIGITS = [0, 1, 2, 4, 5, 7, 8, 9, 10];

/** Clue: a match is text[i, i + 11) and SSN_DIGITS requires nine digits inside it. */
const SSN_CLUES: readonly MatchClue[] = [{ char: null, digits: 9 }];

export function ssnDetector(replacement = '[REDACTED_SSN]'): Detector {
  return builtIn(
    {
      name: 'ssn',
      replacement,
      mayMatch: (text) => SSN_SHAPE.test(text),
      scan: (text) => (from) => {
        for (let i = nextDigit(text, from); i !== -1; i = nextDigit(text, i + 1)) {
          const prev = at(text, i - 1);
          if (isWord(prev) || prev === 0x2d || continuesDigitGroups(text, i)) continue;
          const sep = at(text, i + 3);
          if (sep !== 0x2d && sep !== 0x20) continue;
          if (!SSN_DIGITS.every((k) => isDigit(at(text, i + k))) || at(text, i + 6) !== sep) continue;
          const next = at(text, i + 11);
          if (isWord(next)) continue;
          if ((next === 0x2d || next === 0x20 || next === 0x2e) && isDigit(at(text, i + 12))) continue;
          const area = text.slice(i, i + 3);
          if (area === '000' || text.slice(i + 4, i + 6) === '00' || text.slice(i + 7, i + 11) === '0000')
            continue;
          return { start: i, end: i + 11 };
        }
        return null;
      },
    },
    SSN_CLUES,
  );
}

// ------------------------------------------------------------------------------- credit card

export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 0x30;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/**
 * Clue: a match is [s, cand.end) and cand.digits, the digits read in that span, has at least 13
 * characters (shorter candidates end the loop).
 */
const CREDIT_CARD_CLUES: readonly MatchClue[] = [{ char: null, digits: 13 }];

export function creditCardDetector(replacement = '[REDACTED_CREDIT_CARD]'): Detector {
  return builtIn(
    {
      name: 'credit_card',
      replacement,
      mayMatch: (text) => THIRTEEN_DIGITS.test(text),
      scan: (text) => (from) => {
        const n = text.length;
        for (let s = nextDigit(text, from); s !== -1; s = nextDigit(text, s + 1)) {
          // Candidates start at a group start: not glued to a word or to a preceding digit.
          const prev = at(text, s - 1);
          if (isWord(prev)) continue;
          const first = text.charCodeAt(s);
          if (first < 0x32 || first > 0x36) continue;
          let digits = '';
          const ends: Array<{ end: number; digits: string }> = [];
          let p = s;
          while (p < n && digits.length < 19) {
            const c = text.charCodeAt(p);
            if (isDigit(c)) {
              digits += text[p];
              p++;
              if (!isDigit(at(text, p))) ends.push({ end: p, digits });
            } else if ((c === 0x20 || c === 0x2d) && isDigit(at(text, p + 1))) {
              p++;
            } else break;
          }
          for (let k = ends.length - 1; k >= 0; k--) {
            const cand = ends[k]!;
            if (cand.digits.length < 13) break;
            if (isWord(at(text, cand.end))) continue;
            if (luhnValid(cand.digits)) return { start: s, end: cand.end };
          }
        }
        return null;
      },
    },
    CREDIT_CARD_CLUES,
  );
}

// ------------------------------------------------------------------------------------- phone

/**
 * Clues: a match is [s, end) as returned by parsePhone, which counts every digit it reads in that
 * span. Without a '+' at s it needs `digits >= 10`; with one (the '+' is text[s], inside the
 * match) `digits >= 7`.
 */
const PHONE_CLUES: readonly MatchClue[] = [
  { char: null, digits: 10 },
  { char: '+', digits: 7 },
];

export function phoneDetector(replacement = '[REDACTED_PHONE]'): Detector {
  return builtIn(
    {
      name: 'phone',
      replacement,
      mayMatch: (text) => PHONE_SHAPE.test(text) && SEVEN_DIGITS.test(text),
      scan: (text) => (from) => {
        for (let s = nextPhoneStart(text, from); s !== -1; s = nextPhoneStart(text, s + 1)) {
          const c0 = text.charCodeAt(s);
          const prev = at(text, s - 1);
          if (isWord(prev) || prev === 0x2b || prev === 0x2d || prev === 0x2e || prev === 0x28) continue;
          if (isDigit(c0) && continuesDigitGroups(text, s)) continue;
          const m = parsePhone(text, s);
          if (m !== -1) return { start: s, end: m };
        }
        return null;
      },
    },
    PHONE_CLUES,
  );
}

const PHONE_START = /[0-9+(]/g;

function nextPhoneStart(text: string, from: number): number {
  PHONE_START.lastIndex = from;
  return PHONE_START.test(text) ? PHONE_START.lastIndex - 1 : -1;
}

/** End of a phone number starting at s, or -1. Reads at most 15 digits. */
function parsePhone(text: string, s: number): number {
  let p = s;
  const plus = text.charCodeAt(p) === 0x2b;
  if (plus) p++;
  const groups: number[] = [];
  let seps = 0;
  let paren = false;
  let digits = 0;
  let lastParen = false;
  for (;;) {
    const c = at(text, p);
    let len = 0;
    if (c === 0x28) {
      let q = p + 1;
      while (isDigit(at(text, q)) && q - p <= 5) q++;
      len = q - p - 1;
      if (len < 1 || len > 5 || at(text, q) !== 0x29) return -1;
      p = q + 1;
      paren = true;
      lastParen = true;
    } else if (isDigit(c)) {
      while (isDigit(at(text, p))) {
        p++;
        len++;
        if (digits + len > 15) return -1;
      }
      lastParen = false;
    } else {
      return -1;
    }
    digits += len;
    if (digits > 15) return -1;
    groups.push(len);
    const sep = at(text, p);
    const after = at(text, p + 1);
    if ((sep === 0x20 || sep === 0x2d || sep === 0x2e) && (isDigit(after) || after === 0x28)) {
      seps++;
      p++;
      continue;
    }
    if (lastParen && isDigit(sep)) continue;
    break;
  }
  const end = p;
  const next = at(text, end);
  if (isWord(next) || next === 0x2b) return -1;
  if (plus) return digits >= 7 ? end : -1;
  if (digits < 10 || (seps < 2 && !paren)) return -1;
  const [a, b, c] = groups;
  if ((a === 4 && b === 2 && c === 2) || (a === 2 && b === 2 && c === 4)) return -1;
  return end;
}

// ---------------------------------------------------------------------------------------- ip

/** Strict dotted quad: four decimal octets 0-255 without leading zeros. */
export function isDottedQuad(s: string): boolean {
  const parts = s.split('.');
  if (parts.length !== 4) return false;
  return parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255);
}

/** Strict RFC 4291 text form (no zone id). */
export function isIPv6Text(s: string): boolean {
  if (s.length < 2 || s.length > 45) return false;
  const dbl = s.indexOf('::');
  if (dbl !== -1 && s.indexOf('::', dbl + 1) !== -1) return false;
  const split = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const left = dbl === -1 ? split(s) : split(s.slice(0, dbl));
  const right = dbl === -1 ? [] : split(s.slice(dbl + 2));
  const all = [...left, ...right];
  let groups = 0;
  for (let i = 0; i < all.length; i++) {
    const g = all[i]!;
    if (g.includes('.')) {
      if (i !== all.length - 1 || !isDottedQuad(g)) return false;
      groups += 2;
    } else if (/^[0-9A-Fa-f]{1,4}$/.test(g)) {
      groups += 1;
    } else return false;
  }
  return dbl === -1 ? groups === 8 : groups <= 7;
}

const isIpRunChar = (c: number): boolean => isHex(c) || c === 0x3a || c === 0x2e;

/** Leftmost dotted quad at or after `from`: starts at a digit not glued to [0-9A-Za-z_.]. */
function nextIPv4(text: string, from: number): DetectorMatch | null {
  for (let s = nextDigit(text, from); s !== -1; s = nextDigit(text, s + 1)) {
    const prev = at(text, s - 1);
    if (isWord(prev) || prev === 0x2e) continue;
    const end = ipv4At(text, s);
    if (end !== -1) return { start: s, end };
  }
  return null;
}

/**
 * Leftmost IPv6 at or after `from`: a run of [0-9A-Fa-f:.] (at most 45 characters, trailing
 * dots and a single trailing colon trimmed) that is not glued to a word, a colon or a dot and
 * parses as IPv6. Every IPv6 text has a colon within its first five characters, so runs are
 * found from the colons.
 */
function nextIPv6(text: string, from: number): DetectorMatch | null {
  let colon = text.indexOf(':', from);
  while (colon !== -1) {
    let s = colon;
    while (s > from && colon - s < 4 && isIpRunChar(text.charCodeAt(s - 1))) s--;
    const prev = at(text, s - 1);
    let e = colon;
    while (e < text.length && e - s <= 45 && isIpRunChar(text.charCodeAt(e))) e++;
    const boundary = !isWord(prev) && prev !== 0x3a && prev !== 0x2e && !isWord(at(text, e));
    if (boundary && e - s <= 45) {
      let end = e;
      while (end > s && text.charCodeAt(end - 1) === 0x2e) end--;
      if (end > s + 1 && text.charCodeAt(end - 1) === 0x3a && text.charCodeAt(end - 2) !== 0x3a) end--;
      const cand = text.slice(s, end);
      if (/[0-9A-Fa-f]/.test(cand) && isIPv6Text(cand)) return { start: s, end };
    }
    // Later colons of the same run cannot start a better candidate.
    colon = text.indexOf(':', Math.max(e, colon + 1));
  }
  return null;
}

/**
 * Clues: an IPv4 match is four octets of at least one digit joined by three dots (ipv4At), so it
 * holds a '.' and at least four digits. An IPv6 match is [s, end) with s <= colon < e; trimming
 * trailing dots cannot pass the colon, and trimming one trailing colon leaves a candidate with
 * no colon only if that colon was the only one, and isIPv6Text rejects a colonless text (one
 * group, or two with a dotted-quad tail, never the eight a text without "::" needs). So every
 * IPv6 match holds a ':'.
 */
const IP_ADDRESS_CLUES: readonly MatchClue[] = [
  { char: ':', digits: 0 },
  { char: '.', digits: 4 },
];

export function ipAddressDetector(replacement = '[REDACTED_IP]'): Detector {
  return builtIn(
    {
      name: 'ip_address',
      replacement,
      mayMatch: (text) => text.includes(':') || DOTTED_DIGITS.test(text),
      scan: (text) => {
        let v4: DetectorMatch | null | undefined;
        let v6: DetectorMatch | null | undefined;
        return (from) => {
          if (v4 === undefined || (v4 !== null && v4.start < from)) v4 = nextIPv4(text, from);
          if (v6 === undefined || (v6 !== null && v6.start < from)) v6 = nextIPv6(text, from);
          if (v4 && v6) return v6.start <= v4.start ? v6 : v4;
          return v4 ?? v6 ?? null;
        };
      },
    },
    IP_ADDRESS_CLUES,
  );
}

/** End of a dotted quad starting at s and not glued to more digits or letters, or -1. */
function ipv4At(text: string, s: number): number {
  let p = s;
  for (let octet = 0; octet < 4; octet++) {
    if (octet > 0) {
      if (at(text, p) !== 0x2e) return -1;
      p++;
    }
    const start = p;
    while (isDigit(at(text, p)) && p - start < 4) p++;
    const len = p - start;
    if (len === 0 || len > 3 || (len > 1 && text.charCodeAt(start) === 0x30)) return -1;
    if (Number(text.slice(start, p)) > 255) return -1;
  }
  const next = at(text, p);
  if (isWord(next)) return -1;
  if (next === 0x2e && isDigit(at(text, p + 1))) return -1;
  return p;
}
