/** Small JSON helpers with the comparison semantics the rules document. */
import { isPlainObject } from './json-path.js';

/**
 * Scalars compare strictly, except that a number equals its own decimal string: APIs accept
 * `"chat_id": 123` and `"chat_id": "123"` alike, so a rule must not be dodged by quoting.
 */
export function scalarEquals(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'string') return Number.isFinite(a) && String(a) === b;
  if (typeof a === 'string' && typeof b === 'number') return Number.isFinite(b) && String(b) === a;
  return false;
}

/** Deep equality on parsed JSON; key order never matters. */
export function jsonEquals(a: unknown, b: unknown): boolean {
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEquals(a[i], b[i])) return false;
    return true;
  }
  if (isPlainObject(a)) {
    if (!isPlainObject(b)) return false;
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    for (const k of ka) if (!Object.hasOwn(b, k) || !jsonEquals(a[k], b[k])) return false;
    return true;
  }
  if (Array.isArray(b) || isPlainObject(b)) return false;
  return scalarEquals(a, b);
}

/** JSON with object keys sorted at every level: equal values give equal strings. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  const s = JSON.stringify(value);
  return s === undefined ? 'null' : s;
}

/**
 * The first object key that occurs twice in one object of `text`, which must already be valid
 * JSON. JSON.parse keeps the last duplicate while some upstream parsers keep the first, so a
 * body like `{"to":"ok","to":"evil"}` would be judged on one value and executed with another.
 *
 * Runs on every unchanged streamed event, so the common case is written for speed: string
 * bodies are skipped with native indexOf and keys are compared in place by their positions,
 * without allocating. A text with any escape in a key takes the plain decoding scan instead.
 */
export function findDuplicateKey(text: string): string | null {
  const n = text.length;
  // Keys of all open objects as [start, end) positions, innermost object's last; frame[d] is
  // where the keys of the container open at depth d begin.
  const keyStart: number[] = [];
  const keyEnd: number[] = [];
  const frame: number[] = [];
  const isObject: boolean[] = [];
  const expectKey: boolean[] = [];
  // Per depth: the keys of the open object as a set, once it has LINEAR_KEYS keys.
  const wide: Array<Set<string> | undefined> = [];
  let keys = 0;
  let depth = -1;
  // The next backslash at or after the last search (n: none), so each string learns whether it
  // holds an escape without rescanning the text.
  let backslash = -1;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      if (backslash < i + 1) {
        backslash = text.indexOf('\\', i + 1);
        if (backslash === -1) backslash = n;
      }
      let end = text.indexOf('"', i + 1);
      if (end === -1) return null; // not JSON; callers parse first, so this cannot happen
      const escaped = backslash < end;
      if (escaped) {
        // A quote after an odd run of backslashes belongs to the string.
        let j = backslash;
        while (j < n) {
          const d = text.charCodeAt(j);
          if (d === 0x5c) j += 2;
          else if (d === 0x22) break;
          else j++;
        }
        end = j;
      }
      if (depth >= 0 && expectKey[depth]) {
        if (escaped) return findDuplicateKeyDecoding(text);
        const from = i + 1;
        const len = end - from;
        const first = frame[depth]!;
        if (keys - first < LINEAR_KEYS) {
          for (let k = first; k < keys; k++) {
            if (keyEnd[k]! - keyStart[k]! === len && sameChars(text, keyStart[k]!, from, len)) {
              return text.slice(from, end);
            }
          }
        } else {
          // A wide object: a set keeps the scan linear in the number of keys (a 100k-key body
          // compared pairwise took seconds and blocked every tenant's requests).
          let seen = wide[depth];
          if (seen === undefined) {
            seen = new Set<string>();
            for (let k = first; k < keys; k++) seen.add(text.slice(keyStart[k]!, keyEnd[k]!));
            wide[depth] = seen;
          }
          const key = text.slice(from, end);
          if (seen.has(key)) return key;
          seen.add(key);
        }
        keyStart[keys] = from;
        keyEnd[keys] = end;
        keys++;
        expectKey[depth] = false;
      }
      i = end + 1;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      depth++;
      frame[depth] = keys;
      wide[depth] = undefined;
      isObject[depth] = c === 0x7b;
      expectKey[depth] = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      keys = frame[depth]!;
      depth--;
    } else if (c === 0x2c /* , */) {
      if (depth >= 0 && isObject[depth]) expectKey[depth] = true;
    }
    i++;
  }
  return null;
}

/** Objects with fewer keys are searched pairwise: cheapest for the common small object. */
const LINEAR_KEYS = 16;

function sameChars(text: string, a: number, b: number, len: number): boolean {
  for (let k = 0; k < len; k++) if (text.charCodeAt(a + k) !== text.charCodeAt(b + k)) return false;
  return true;
}

/** findDuplicateKey for texts with escaped keys: every key is decoded before it is compared. */
function findDuplicateKeyDecoding(text: string): string | null {
  const stack: Array<{ keys: Set<string> | null; expectKey: boolean }> = [];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) j += 2;
        else if (d === 0x22) break;
        else j++;
      }
      const top = stack[stack.length - 1];
      if (top?.keys && top.expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (top.keys.has(key)) return key;
        top.keys.add(key);
        top.expectKey = false;
      }
      i = j;
    } else if (c === 0x7b) stack.push({ keys: new Set(), expectKey: true });
    else if (c === 0x5b) stack.push({ keys: null, expectKey: false });
    else if (c === 0x7d || c === 0x5d) stack.pop();
    else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (top?.keys) top.expectKey = true;
    }
  }
  return null;
}
