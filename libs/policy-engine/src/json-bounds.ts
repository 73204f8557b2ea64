/**
 * Bounds on JSON text, checked before anything expensive touches it. `JSON.parse` itself is
 * iterative, but nearly everything after it recurses (serialisation, rule walks, validation),
 * and a megabyte of `[[[[…` parses into a million-deep value whose walk overflows the stack.
 * Wide values cost linear time downstream, but without a cap a body's cost would be bounded
 * only by its size.
 *
 * One pass over the characters, no allocation: strings are skipped with native indexOf, the
 * nesting depth and the number of members (object keys plus array elements) are counted
 * outside strings. The text need not be valid JSON: whatever the parser then says about it
 * stands.
 */

export interface JsonBounds {
  /** Deepest allowed nesting of objects and arrays. */
  maxDepth: number;
  /** Most values inside containers (object members and array elements), whole document. */
  maxMembers: number;
  /**
   * Most object members (key: value pairs), whole document. Keys are what make parsing
   * expensive: V8 parses 100,000 distinct keys in about 100 ms against a few ms for as many
   * array elements, and a parse cannot be interrupted. Unlimited when absent.
   */
  maxObjectMembers?: number;
}

/**
 * Request bodies: provider payloads fit easily (rich-text documents such as Atlassian's ADF
 * nest about 20 deep; the largest batch APIs take a few thousand items; long arrays of numbers,
 * such as pre-tokenised model input, stay cheap), while the worst body parses in about 25 ms:
 * the event loop every tenant shares is never held much longer (ADR 0039).
 */
export const REQUEST_JSON_BOUNDS: JsonBounds = {
  maxDepth: 64,
  maxMembers: 100_000,
  maxObjectMembers: 25_000,
};

/** The reason `text` exceeds `bounds`, or null when it does not. */
export function jsonBoundsViolation(text: string, bounds: JsonBounds): string | null {
  const n = text.length;
  let depth = 0;
  let members = 0;
  let objectMembers = 0;
  const maxObjectMembers = bounds.maxObjectMembers ?? Number.POSITIVE_INFINITY;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Skip the string: a quote after an odd run of backslashes belongs to it.
      let j = text.indexOf('"', i + 1);
      while (j !== -1) {
        let k = j - 1;
        while (text.charCodeAt(k) === 0x5c /* \ */) k--;
        if ((j - 1 - k) % 2 === 0) break;
        j = text.indexOf('"', j + 1);
      }
      if (j === -1) return null; // unterminated: the parser will refuse it
      i = j + 1;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > bounds.maxDepth) return `JSON nested deeper than ${bounds.maxDepth} levels`;
      if (++members > bounds.maxMembers) return `JSON with more than ${bounds.maxMembers} members`;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    } else if (c === 0x2c /* , */) {
      if (++members > bounds.maxMembers) return `JSON with more than ${bounds.maxMembers} members`;
    } else if (c === 0x3a /* : */) {
      // Outside strings, every object member has exactly one colon.
      if (++objectMembers > maxObjectMembers) return `JSON with more than ${maxObjectMembers} object keys`;
    }
    i++;
  }
  return null;
}
