/**
 * Text PostgreSQL can store. `text` and `jsonb` refuse NUL (`\u0000`), and a lone UTF-16
 * surrogate cannot be encoded as UTF-8 at all; both arrive in agent-supplied names, header
 * names and bodies. Where such a value is only recorded (audit metadata, an approval's
 * display copy), it is stored with each offending character replaced by U+FFFD, so the record
 * is never lost to its content. Values that decide anything are refused instead (zod).
 */
// eslint-disable-next-line no-control-regex -- NUL is exactly what must be found
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Deepest nesting kept; anything deeper is replaced by a marker (audit metadata is shallow). */
const MAX_DEPTH = 32;

export function storableText(s: string): string {
  UNSTORABLE.lastIndex = 0;
  return UNSTORABLE.test(s) ? s.replace(UNSTORABLE, '\ufffd') : s;
}

export function hasUnstorableText(s: string): boolean {
  UNSTORABLE.lastIndex = 0;
  return UNSTORABLE.test(s);
}

/** A copy of a JSON value whose every string and key can be stored. */
export function storableJson(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return storableText(value);
  if (value === null || typeof value !== 'object') {
    return typeof value === 'number' && !Number.isFinite(value) ? null : value;
  }
  if (depth >= MAX_DEPTH) return '[too deep]';
  if (Array.isArray(value)) return value.map((v) => storableJson(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined) continue;
    Object.defineProperty(out, storableText(k), {
      value: storableJson(v, depth + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}
