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
 */
export function findDuplicateKey(text: string): string | null {
  type Frame = { keys: Set<string> | null; expectKey: boolean };
  const stack: Frame[] = [];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c /* \ */) j += 2;
        else if (d === 0x22) break;
        else j++;
      }
      const top = stack[stack.length - 1];
      if (top && top.keys && top.expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (top.keys.has(key)) return key;
        top.keys.add(key);
        top.expectKey = false;
      }
      i = j;
    } else if (c === 0x7b /* { */) {
      stack.push({ keys: new Set(), expectKey: true });
    } else if (c === 0x5b /* [ */) {
      stack.push({ keys: null, expectKey: false });
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top && top.keys) top.expectKey = true;
    }
  }
  return null;
}
