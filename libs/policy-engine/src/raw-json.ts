/**
 * The stream filters' raw fast path: decides from a payload's bytes alone, without decoding,
 * JSON.parse or re-serialisation, that the full path would emit the payload unchanged. It only
 * ever answers "unchanged" or "don't know"; "don't know" means the full path runs as before.
 *
 * Eligible plans (`rawJsonCheck`): no provider inbound filter, no contact field stripping and no
 * rule with allowFields or denyFields. For such a plan `filterJsonValue(v)` is `redactJsonValue(v, plan.detectors)`,
 * which changes a value only through (response-filter.ts, redactWalk):
 * - a string value (object keys are never redacted) for which `redactText` finds a match;
 * - an integer: with only built-in detectors one with |v| >= 1e12 (smaller ones are returned as
 *   they are); with a custom pattern every integer, as the text String(v);
 * - nesting deeper than MAX_JSON_DEPTH, which throws.
 *
 * `rawJsonEnd` (and `rawJsonUnchanged`) accepts a JSON text only when all of these hold:
 * 1. It is JSON by the RFC 8259 grammar, which is exactly what JSON.parse accepts (a strict
 *    validator; anything it does not know, such as a byte >= 0x80 outside a string, is a "no").
 *    Without `lineBreaks` only space and tab count as whitespace, so the text cannot contain a
 *    CR or LF at all (inside strings control characters are refused anyway): callers use this
 *    to find the end of an SSE line and its JSON in one pass.
 * 2. Containers nest at most RAW_MAX_DEPTH (< MAX_JSON_DEPTH) deep, so nothing throws.
 * 3. Every number has at most 11 integer digits and no exponent or a negative one, so its value
 *    is below 1e12 (rounding to a double is monotone, and 1e12 is exact) and no built-in
 *    detector touches it; with custom patterns, an integer value's String(v) has no match of any
 *    custom detector (the built-ins cannot match a bare integer below 1e12).
 * 4. No object repeats a key (JSON.parse would drop the earlier value, which the full path
 *    then re-serialises away), and every string literal, keys included (conservatively), has no backslash, so the decoded
 *    value is exactly the text between the quotes; and satisfies none of the plan's MatchClues
 *    (pii-detectors.ts), so no detector has a match in it and redactText returns it unchanged
 *    (every text a detector is run on is a substring of the value: the value has no line break,
 *    and long values are scanned in rounds over contiguous windows); and, when the plan has
 *    custom patterns, is shorter than REDACTION_WINDOW bytes (so redactText scans it in one
 *    piece, and a pattern's anchors see the value's own ends) and has no match of any of them,
 *    run on the value decoded exactly as the full path decodes it (a literal's bytes lie
 *    between two ASCII quotes, and the codecs resynchronise at every ASCII byte).
 * Then JSON.parse succeeds, filterJsonValue returns its input, and the full path emits the
 * original bytes: exactly what the fast path emits.
 *
 * Why bytes suffice: the codecs the filters use (UTF-8 with U+FFFD for invalid input, and the
 * single-byte charsets) are ASCII-transparent (content-type.ts): every byte < 0x80 decodes to
 * that same character, in order, and every run of bytes >= 0x80 to one or more characters
 * >= U+0080. All JSON structure, every clue character ('@', '+', ':', '.', digits) and the line
 * breaks are ASCII, so the checks above read the same on bytes as on the decoded text, and a
 * non-ASCII byte is only accepted inside a string, where JSON.parse accepts any character.
 */
import type { Detector } from './pii-detectors.js';
import { builtInClues } from './pii-detectors.js';
import { REDACTION_WINDOW } from './redaction.js';
import type { ResponsePlan } from './response-filter.js';
import { MAX_JSON_DEPTH } from './response-filter.js';

/** Deepest container nesting the fast path accepts; deeper JSON takes the full path. */
export const RAW_MAX_DEPTH = 64;
if (RAW_MAX_DEPTH >= MAX_JSON_DEPTH) throw new Error('RAW_MAX_DEPTH must stay below MAX_JSON_DEPTH');

/** Keys of all open objects the scratch holds; a text with more takes the full path. */
const MAX_OPEN_KEYS = 4096;
/**
 * The key scratch starts this small and doubles up to MAX_OPEN_KEYS: every stream with a filter
 * has its own, and a full-size one (16 KiB) was a fifth of what an LLM stream held.
 */
const INITIAL_OPEN_KEYS = 64;
/** Objects with fewer keys are searched linearly (cheapest for the common small object). */
const LINEAR_KEYS = 16;

/** Integer digits a number may have and still be certain to stay below 1e12 (the redaction bound). */
const MAX_INT_DIGITS = 11;

/** Per-plan thresholds: a string literal is suspicious when any clue of any detector holds. */
export interface RawJsonCheck {
  /** Least digits that alone make a literal suspicious (Infinity: none). */
  readonly digits: number;
  /** Least digits that make a literal holding '@' (':', '+', '.') suspicious. */
  readonly at: number;
  readonly colon: number;
  readonly plus: number;
  readonly dot: number;
  /** Scratch stack of open containers; the check is synchronous, so one per filter suffices. */
  readonly stack: Uint8Array;
  /**
   * Hashes of the keys of all open objects, innermost last (a repeated key forces the full
   * path); keyStart[d] is where the keys of the container open at depth d begin.
   */
  keys: Int32Array;
  readonly keyStart: Int32Array;
  keyCount: number;
  /** Per depth: the keys of the open object as a set, once it is wide (cleared when one opens). */
  readonly keySets: Array<Set<number> | undefined>;
  /** Detectors without clues (custom patterns): run on every string value and integer. */
  readonly opaque: readonly Detector[];
  /** The filter's codec: how the full path decodes the bytes the opaque detectors see. */
  readonly decode: (bytes: Uint8Array) => string;
  /**
   * Where the string and number values of the last text read lie, in order, three numbers per
   * value: first byte, after the last, 1 for a number. The first MAX_SPANS values only;
   * RawEventFrame learns from them. Keys are never recorded.
   */
  readonly spans: Int32Array;
  spanCount: number;
}

/** Values whose place rawJsonEnd records per text. */
const MAX_SPANS = 16;

/**
 * The fast-path check for a plan, or null when the plan needs the full path. Mirrors the
 * conditions filterJsonValue and redactJsonValue use (truthiness of inbound, contacts,
 * allowFields, denyFields), so a change there must be reflected here.
 */
export function rawJsonCheck(plan: ResponsePlan, decode: (bytes: Uint8Array) => string): RawJsonCheck | null {
  if (plan.inbound || plan.contacts) return null;
  const opaque: Detector[] = [];
  for (const rule of plan.rules) if (rule.allowFields || rule.denyFields) return null;
  let digits = Infinity;
  let at = Infinity;
  let colon = Infinity;
  let plus = Infinity;
  let dot = Infinity;
  for (const d of plan.detectors) {
    const clues = builtInClues(d);
    if (clues === null) {
      opaque.push(d);
      continue;
    }
    for (const c of clues) {
      switch (c.char) {
        case null:
          digits = Math.min(digits, c.digits);
          break;
        case '@':
          at = Math.min(at, c.digits);
          break;
        case ':':
          colon = Math.min(colon, c.digits);
          break;
        case '+':
          plus = Math.min(plus, c.digits);
          break;
        case '.':
          dot = Math.min(dot, c.digits);
          break;
      }
    }
  }
  return {
    digits,
    at,
    colon,
    plus,
    dot,
    stack: new Uint8Array(RAW_MAX_DEPTH),
    keys: new Int32Array(INITIAL_OPEN_KEYS),
    keyStart: new Int32Array(RAW_MAX_DEPTH),
    keyCount: 0,
    keySets: [],
    opaque,
    decode,
    spans: new Int32Array(3 * MAX_SPANS),
    spanCount: 0,
  };
}

/** True when no opaque detector has a match in `text` (what redactText would find first). */
function opaqueClean(text: string, check: RawJsonCheck): boolean {
  if (text === '') return true;
  for (const d of check.opaque)
    if ((!d.mayMatch || d.mayMatch(text)) && d.scan(text)(0) !== null) return false;
  return true;
}

// Byte classes inside a string literal.
const K_DIGIT = 1;
const K_AT = 2;
const K_COLON = 4;
const K_PLUS = 8;
const K_DOT = 16;
const K_QUOTE = 32; // the closing quote
const K_STOP = 64; // a backslash (escape: full path) or a control character (not JSON)

const STRING_CLASS = (() => {
  const t = new Uint8Array(256);
  for (let c = 0; c < 0x20; c++) t[c] = K_STOP;
  for (let c = 0x30; c <= 0x39; c++) t[c] = K_DIGIT;
  t[0x40] = K_AT;
  t[0x3a] = K_COLON;
  t[0x2b] = K_PLUS;
  t[0x2e] = K_DOT;
  t[0x22] = K_QUOTE;
  t[0x5c] = K_STOP;
  return t;
})();

const QUOTE = 0x22;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const COLON = 0x3a;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

const isDigit = (c: number): boolean => c >= ZERO && c <= NINE;

/** Skips JSON whitespace; line breaks only when `lineBreaks` is set. */
function skipWs(b: Uint8Array, i: number, end: number, lineBreaks: boolean): number {
  while (i < end) {
    const c = b[i]!;
    if (c === 0x20 || c === 0x09 || (lineBreaks && (c === 0x0a || c === 0x0d))) i++;
    else break;
  }
  return i;
}

/** True when a literal with these digits and clue characters may hold a built-in match. */
function suspicious(digits: number, flags: number, check: RawJsonCheck): boolean {
  return (
    digits >= check.digits ||
    ((flags & K_AT) !== 0 && digits >= check.at) ||
    ((flags & K_COLON) !== 0 && digits >= check.colon) ||
    ((flags & K_PLUS) !== 0 && digits >= check.plus) ||
    ((flags & K_DOT) !== 0 && digits >= check.dot)
  );
}

/**
 * Reads a string literal whose opening quote is at i - 1. Returns the index after the closing
 * quote, or -1 when the literal is unterminated, not JSON, escaped, or may hold a match.
 * Keys (`value` false) are never redacted, so the opaque detectors skip them.
 */
function scanString(b: Uint8Array, i: number, end: number, check: RawJsonCheck, value: boolean): number {
  const from = i;
  let digits = 0;
  let flags = 0;
  for (;;) {
    if (i >= end) return -1;
    const k = STRING_CLASS[b[i++]!]!;
    if (k === 0) continue;
    if (k === K_DIGIT) digits++;
    else if (k === K_QUOTE) break;
    else if (k === K_STOP) return -1;
    else flags |= k;
  }
  if ((digits !== 0 || flags !== 0) && suspicious(digits, flags, check)) return -1;
  if (value && check.opaque.length > 0) {
    if (i - 1 - from >= REDACTION_WINDOW) return -1;
    if (!opaqueClean(check.decode(b.subarray(from, i - 1)), check)) return -1;
  }
  return i;
}

/**
 * Reads a number starting at i (a '-' or a digit). Returns the index after it, or -1 when it is
 * not a JSON number or its value might reach the redaction bound (see condition 3 above).
 */
function scanNumber(b: Uint8Array, i: number, end: number, check: RawJsonCheck): number {
  const start = i;
  if (b[i] === MINUS) i++;
  const intStart = i;
  if (i >= end) return -1;
  if (b[i] === ZERO) i++;
  else if (isDigit(b[i]!)) while (i < end && isDigit(b[i]!)) i++;
  else return -1;
  if (i - intStart > MAX_INT_DIGITS) return -1;
  if (i < end && b[i] === DOT) {
    const fracStart = ++i;
    while (i < end && isDigit(b[i]!)) i++;
    if (i === fracStart) return -1;
  }
  if (i < end && (b[i] === 0x65 || b[i] === 0x45)) {
    // "e"/"E": only a negative exponent keeps the value below its integer part.
    if (++i >= end || b[i] !== MINUS) return -1;
    const expStart = ++i;
    while (i < end && isDigit(b[i]!)) i++;
    if (i === expStart) return -1;
  }
  if (check.opaque.length > 0) {
    // As redactWalk does: an integer value is redacted as the text String(v).
    const v = Number(check.decode(b.subarray(start, i)));
    if (Number.isInteger(v) && !opaqueClean(String(v), check)) return -1;
  }
  return i;
}

const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];

function scanWord(b: Uint8Array, i: number, end: number, word: readonly number[]): number {
  if (end - i < word.length) return -1;
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word[k]) return -1;
  return i + word.length;
}

/**
 * Reads `"key" :` at i for the object open at `level`; returns the index after the colon or -1.
 * A key repeated in one object forces the full path: JSON.parse keeps the last value, so the
 * raw bytes would carry an earlier one that the full path re-serialises away. Keys are compared
 * by a hash of their bytes (a collision only sends the payload to the full path, the safe side),
 * and a non-ASCII key also takes the full path (distinct invalid UTF-8 runs decode alike).
 */
function scanKey(
  b: Uint8Array,
  i: number,
  end: number,
  check: RawJsonCheck,
  lineBreaks: boolean,
  level: number,
): number {
  if (i >= end || b[i] !== QUOTE) return -1;
  i++;
  // One pass: the literal's classes (as scanString, keys are checked conservatively) and the
  // FNV-1a hash of its bytes.
  let h = 0x811c9dc5 | 0; // as int32, like Math.imul results and the Int32Array it is compared with
  let digits = 0;
  let flags = 0;
  for (;;) {
    if (i >= end) return -1;
    const c = b[i++]!;
    if (c >= 0x80) return -1;
    const k = STRING_CLASS[c]!;
    if (k === K_QUOTE) break;
    if (k === K_STOP) return -1;
    if (k === K_DIGIT) digits++;
    else flags |= k;
    h = Math.imul(h ^ c, 0x01000193);
  }
  if ((digits !== 0 || flags !== 0) && suspicious(digits, flags, check)) return -1;
  const keys = check.keys;
  const first = check.keyStart[level]!;
  const open = check.keyCount - first;
  if (open < LINEAR_KEYS) {
    for (let k = first; k < check.keyCount; k++) if (keys[k] === h) return -1;
  } else {
    // A wide object: look keys up in a set so the scan stays linear in the number of keys.
    let seen = check.keySets[level];
    if (seen === undefined) {
      seen = new Set<number>();
      for (let k = first; k < check.keyCount; k++) seen.add(keys[k]!);
      check.keySets[level] = seen;
    }
    if (seen.has(h)) return -1;
    seen.add(h);
  }
  if (check.keyCount === keys.length) {
    if (keys.length >= MAX_OPEN_KEYS) return -1; // more keys open than the scratch may hold
    check.keys = new Int32Array(Math.min(keys.length * 2, MAX_OPEN_KEYS));
    check.keys.set(keys);
  }
  check.keys[check.keyCount++] = h;
  i = skipWs(b, i, end, lineBreaks);
  return i < end && b[i] === COLON ? i + 1 : -1;
}

/**
 * Reads one JSON value from `start`, with whitespace around it, and returns where the
 * whitespace after it ends: `b[start, result)` is JSON that the full path provably leaves
 * unchanged for the plan `check` was made from (see the module comment). Reading stops at the
 * first byte that cannot follow the value (or at `end`); the caller decides what may come
 * there. -1 means "take the full path".
 */
export function rawJsonEnd(
  b: Uint8Array,
  start: number,
  end: number,
  check: RawJsonCheck,
  lineBreaks: boolean,
): number {
  const stack = check.stack;
  let depth = 0;
  let i = start;
  check.keyCount = 0;
  check.spanCount = 0;
  for (;;) {
    // A value.
    i = skipWs(b, i, end, lineBreaks);
    if (i >= end) return -1;
    const c = b[i]!;
    if (c === LBRACE || c === LBRACKET) {
      if (depth === RAW_MAX_DEPTH) return -1;
      i = skipWs(b, i + 1, end, lineBreaks);
      if (i < end && b[i] === (c === LBRACE ? RBRACE : RBRACKET)) {
        i++; // an empty container is a complete value
      } else {
        stack[depth++] = c;
        if (c === LBRACE) {
          check.keyStart[depth - 1] = check.keyCount;
          check.keySets[depth - 1] = undefined;
          i = scanKey(b, i, end, check, lineBreaks, depth - 1);
          if (i === -1) return -1;
        }
        continue; // its first member's value
      }
    } else if (c === QUOTE) {
      const from = i;
      i = scanString(b, i + 1, end, check, true);
      if (i !== -1) recordSpan(check, from, i, 0);
    } else if (c === MINUS || isDigit(c)) {
      const from = i;
      i = scanNumber(b, i, end, check);
      if (i !== -1) recordSpan(check, from, i, 1);
    } else if (c === 0x74) {
      i = scanWord(b, i, end, TRUE);
    } else if (c === 0x66) {
      i = scanWord(b, i, end, FALSE);
    } else if (c === 0x6e) {
      i = scanWord(b, i, end, NULL);
    } else {
      return -1;
    }
    if (i === -1) return -1;
    // After a value: close containers until a comma leads to the next value, or the text ends.
    for (;;) {
      i = skipWs(b, i, end, lineBreaks);
      if (depth === 0) return i;
      if (i >= end) return -1;
      const top = stack[depth - 1];
      const d = b[i]!;
      if (d === COMMA) {
        i++;
        if (top === LBRACE) {
          i = scanKey(b, skipWs(b, i, end, lineBreaks), end, check, lineBreaks, depth - 1);
          if (i === -1) return -1;
        }
        break;
      }
      if (d !== (top === LBRACE ? RBRACE : RBRACKET)) return -1;
      depth--;
      // A closed object's keys are out of scope.
      if (top === LBRACE) check.keyCount = check.keyStart[depth]!;
      i++;
    }
  }
}

function recordSpan(check: RawJsonCheck, from: number, to: number, isNumber: number): void {
  const k = check.spanCount;
  if (k === MAX_SPANS) return;
  check.spans[3 * k] = from;
  check.spans[3 * k + 1] = to;
  check.spans[3 * k + 2] = isNumber;
  check.spanCount = k + 1;
}

/** True only if all of `b[start, end)` is JSON the full path provably leaves unchanged. */
export function rawJsonUnchanged(b: Uint8Array, start: number, end: number, check: RawJsonCheck): boolean {
  return rawJsonEnd(b, start, end, check, true) === end;
}

const LF = 0x0a;
/** The longest event a frame is learnt from: the event is kept to find what the next one changes. */
const MAX_FRAMED_EVENT = 2048;
/** The most values a frame leaves open (a delta, a sequence number, token counts). */
const MAX_HOLES = 4;
/** Learning attempts a stream may make ahead of its frame's hits (a stream no frame fits stops). */
const LEARN_BUDGET = 8;

const compareBytes = Buffer.prototype.compare;

/** True when `a[af, at)` and `b[bf, bt)` are the same bytes. */
function sameBytes(a: Uint8Array, af: number, at: number, b: Uint8Array, bf: number, bt: number): boolean {
  return at - af === bt - bf && compareBytes.call(a, b, bf, bt, af, at) === 0;
}

/**
 * An event kept to learn a frame from: a copy of its bytes and where its values lie in them,
 * three numbers per value (first byte, after the last, 1 for a number).
 */
interface LearntEvent {
  bytes: Uint8Array;
  values: Int32Array;
}

/**
 * Most events of an LLM stream are one template with a few values changed: the text delta, and
 * in some APIs a sequence number or token counts. rawEventEnd reads each of them whole, most of
 * it the same id, model and keys as the last one. A frame is such an event with those values cut
 * out: fixed byte segments around holes, each hole a string or a number value. It decides an
 * event made of the segments, with in each hole a token that scanString (a string hole) or
 * scanNumber (a number hole) accepts, from those bytes alone.
 *
 * Why that is exactly rawEventEnd's answer: the frame is cut from an event rawEventEnd accepted
 * whole, and each hole is a place where rawJsonEnd read a value (it records where; never a key).
 * The check reads left to right, so up to a hole it is in the same state for any event that
 * starts with the same bytes. There it dispatches on the value's first byte: a quote to
 * scanString, a minus or digit to scanNumber, as the frame requires. A value does not change the
 * state (only keys are remembered), so after the token the check reads the next segment as it
 * did before, and so on to the end of the last segment. That segment ends with a line feed:
 * after a carriage return, where the event ends would depend on the next byte (CRLF).
 *
 * How holes are chosen: the event is compared with the last one the frame learnt from, value by
 * value. The bytes between values must be the same in both; a value whose bytes differ becomes
 * a hole. A frame that stops fitting only costs its check; learning is bounded by LEARN_BUDGET,
 * refilled by the frame's hits.
 */
export class RawEventFrame {
  /**
   * The fixed bytes, one more segment than holes: views of one copy of the event the frame was
   * cut from (one backing store per frame, not one per segment).
   */
  private segments: Uint8Array[] | null = null;
  /** Per hole: 1 for a number, 0 for a string. */
  private holes: number[] = [];
  /** The last event learnt from (a copy: a view would keep the whole chunk alive). */
  private last: LearntEvent | null = null;
  private budget = LEARN_BUDGET;

  /** The end of the event at `start` when the frame decides it unchanged, else -1. */
  end(b: Uint8Array, start: number, check: RawJsonCheck): number {
    const segments = this.segments;
    if (segments === null) return -1;
    const holes = this.holes;
    let i = start;
    for (let k = 0; ; k++) {
      const segment = segments[k]!;
      const to = i + segment.length;
      // The three-argument compare: a source range costs two more offset checks per call.
      if (to > b.length || compareBytes.call(segment, b, i, to) !== 0) return -1;
      i = to;
      if (k === holes.length) break;
      if (i >= b.length) return -1;
      const c = b[i]!;
      if (holes[k] === 0) {
        if (c !== QUOTE) return -1;
        i = scanString(b, i + 1, b.length, check, true);
      } else {
        if (c !== MINUS && !isDigit(c)) return -1;
        i = scanNumber(b, i, b.length, check);
      }
      if (i === -1) return -1;
    }
    if (this.budget < LEARN_BUDGET) this.budget++;
    return i;
  }

  /**
   * Called right after rawEventEnd accepted `b[start, end)`, with that event's values recorded in
   * `check`: frames the values in which this event differs from the last one learnt from.
   */
  learn(b: Uint8Array, start: number, end: number, check: RawJsonCheck): void {
    if (this.budget === 0) return;
    this.budget--;
    if (end - start > MAX_FRAMED_EVENT || b[end - 1] !== LF) {
      this.last = null;
      return;
    }
    const n = check.spanCount;
    const values = new Int32Array(3 * n);
    for (let k = 0; k < n; k++) {
      const from = check.spans[3 * k]! - start;
      const to = check.spans[3 * k + 1]! - start;
      if (from < 0 || to > end - start) return; // not this event's values: learn nothing
      values[3 * k] = from;
      values[3 * k + 1] = to;
      values[3 * k + 2] = check.spans[3 * k + 2]!;
    }
    const cur: LearntEvent = { bytes: new Uint8Array(b.subarray(start, end)), values };
    const last = this.last;
    this.last = cur;
    if (last === null || last.values.length !== values.length) return;
    const segments: Uint8Array[] = [];
    const holes: number[] = [];
    let segmentStart = 0;
    let curAt = 0;
    let lastAt = 0;
    for (let k = 0; k < values.length; k += 3) {
      const from = values[k]!;
      const to = values[k + 1]!;
      const isNumber = values[k + 2]!;
      const lastFrom = last.values[k]!;
      const lastTo = last.values[k + 1]!;
      if (isNumber !== last.values[k + 2]) return;
      if (!sameBytes(cur.bytes, curAt, from, last.bytes, lastAt, lastFrom)) return;
      if (!sameBytes(cur.bytes, from, to, last.bytes, lastFrom, lastTo)) {
        if (holes.length === MAX_HOLES) return;
        segments.push(cur.bytes.subarray(segmentStart, from));
        holes.push(isNumber);
        segmentStart = to;
      }
      curAt = to;
      lastAt = lastTo;
    }
    const size = cur.bytes.length;
    if (holes.length === 0 || !sameBytes(cur.bytes, curAt, size, last.bytes, lastAt, last.bytes.length))
      return;
    segments.push(cur.bytes.subarray(segmentStart, size));
    this.segments = segments;
    this.holes = holes;
    // Every open stream keeps its frame; the event it was compared with need not stay too.
    // Relearning after a miss then starts from the next accepted event.
    this.last = null;
  }
}
