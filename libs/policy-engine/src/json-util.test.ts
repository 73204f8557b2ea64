import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJsonPath, resolveJsonPath } from './json-path.js';
import { canonicalJson, findDuplicateKey, jsonEquals, scalarEquals } from './json-util.js';

describe('parseJsonPath', () => {
  it.each([
    ['a.b.c', ['a', 'b', 'c']],
    ['items.*.id', ['items', null, 'id']],
    ['a\\.b.c', ['a.b', 'c']],
    ['a.\\*', ['a', '*']],
    ['x.0', ['x', '0']],
    ['a*', ['a*']],
  ])('%s', (path, segments) => {
    expect(parseJsonPath(path)).toEqual({ ok: true, segments });
  });

  it.each(['', 'a..b', '.a', 'a.', 'a\\', 'a\\x'])('refuses %j', (path) => {
    expect(parseJsonPath(path).ok).toBe(false);
  });
});

describe('resolveJsonPath', () => {
  const doc = {
    to: ['a@x.com', 'b@y.com'],
    messages: [{ to: 'c@z.com', meta: { n: 1 } }, { to: 'd@z.com' }, [{ to: 'e@z.com' }]],
    map: { k1: { v: 1 }, k2: { v: 2 } },
    '0': 'zero',
  };
  it.each([
    ['to', [['a@x.com', 'b@y.com']]],
    ['to.1', ['b@y.com']],
    ['to.5', []],
    ['messages.to', ['c@z.com', 'd@z.com', 'e@z.com']],
    ['messages.0.to', ['c@z.com']],
    // `*` picks each element; the nested array is then transparent for `to`.
    ['messages.*.to', ['c@z.com', 'd@z.com', 'e@z.com']],
    ['messages.*.meta.n', [1]],
    ['map.*.v', [1, 2]],
    ['0', ['zero']],
    ['missing.x', []],
    ['to.length', []],
    ['constructor', []],
    ['__proto__', []],
  ])('%s', (path, expected) => {
    const p = parseJsonPath(path);
    if (!p.ok) throw new Error(p.reason);
    expect(resolveJsonPath(doc, p.segments)).toEqual(expected);
  });
});

describe('JSON comparison', () => {
  it('treats a number and its decimal string as equal, nothing else', () => {
    expect(scalarEquals(123, '123')).toBe(true);
    expect(scalarEquals('-100123', -100123)).toBe(true);
    expect(scalarEquals(123, '0123')).toBe(false);
    expect(scalarEquals(true, 'true')).toBe(false);
    expect(scalarEquals(null, 'null')).toBe(false);
    expect(scalarEquals(0, '')).toBe(false);
  });

  it('ignores key order and compares deeply', () => {
    expect(jsonEquals({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
    expect(jsonEquals({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(jsonEquals([1, 2], [2, 1])).toBe(false);
    expect(jsonEquals({}, [])).toBe(false);
  });

  it('canonical JSON is equal exactly for equal values', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const shuffled = JSON.parse(
          JSON.stringify(v, (_k, x: unknown) =>
            x && typeof x === 'object' && !Array.isArray(x)
              ? Object.fromEntries(Object.entries(x).reverse())
              : x,
          ),
        ) as unknown;
        expect(canonicalJson(shuffled)).toBe(canonicalJson(v));
        expect(JSON.parse(canonicalJson(v))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
    );
  });
});

describe('findDuplicateKey', () => {
  it.each([
    ['{"to":"a","to":"b"}', 'to'],
    ['{"a":{"x":1,"x":2}}', 'x'],
    ['[{"a":1},{"a":2},{"b":1,"\\u0062":2}]', 'b'],
    ['{"a":1,"b":{"a":2},"c":[{"a":3}]}', null],
    ['{"k":"\\"k\\":1","j":"}"}', null],
    ['"{\\"a\\":1,\\"a\\":2}"', null],
  ])('%s', (text, expected) => {
    JSON.parse(text);
    expect(findDuplicateKey(text)).toBe(expected);
  });

  it.each([
    ['{"a\\"b":1,"a\\"b":2}', 'a"b'],
    ['{"\\\\":1,"\\\\":2}', '\\'],
    ['{"x":"\\\\","x":1}', 'x'],
    ['{"x":"a\\\\\\"b","y":{"x":1}}', null],
    [`{${Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`).join(',')},"k7":0}`, 'k7'],
  ])('escapes and large objects: %s', (text, expected) => {
    JSON.parse(text);
    expect(findDuplicateKey(text)).toBe(expected);
  });

  it('agrees with a plain reference scan on JSON with frequent duplicates and escapes', () => {
    // Keys from a tiny alphabet, some spelled with escapes, so duplicates are common.
    const key = fc.constantFrom('a', 'b', '\\u0061', 'a\\"', 'a\\\\', '\\\\');
    const value: fc.Arbitrary<string> = fc.letrec<{ v: string }>((tie) => ({
      v: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.constantFrom('1', '"x"', '"\\\\"', '"\\""', '"{\\"a\\":1}"', 'null'),
        fc.array(tie('v'), { maxLength: 4 }).map((xs) => `[${xs.join(',')}]`),
        fc
          .array(fc.tuple(key, tie('v')), { maxLength: 5 })
          .map((kv) => `{${kv.map(([k, v]) => `"${k}":${v}`).join(',')}}`),
      ),
    })).v;
    fc.assert(
      fc.property(value, (text) => {
        JSON.parse(text);
        expect(findDuplicateKey(text)).toBe(referenceFindDuplicateKey(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('never reports a duplicate in JSON.stringify output', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(findDuplicateKey(JSON.stringify(v))).toBeNull();
      }),
    );
  });
});

/**
 * An independent oracle: a regex tokenizer and a stack of per-object key sets, every key decoded
 * with JSON.parse (findDuplicateKey scans characters and compares raw keys in place).
 */
function referenceFindDuplicateKey(text: string): string | null {
  const tokens = text.match(/"(?:[^"\\]|\\.)*"|[{}[\],:]|[^\s{}[\],:"]+/g) ?? [];
  const stack: Array<Set<string> | null> = [];
  for (let t = 0; t < tokens.length; t++) {
    const tok = tokens[t]!;
    if (tok === '{') stack.push(new Set());
    else if (tok === '[') stack.push(null);
    else if (tok === '}' || tok === ']') stack.pop();
    else if (tok.startsWith('"') && tokens[t + 1] === ':') {
      const keys = stack[stack.length - 1]!;
      const key = JSON.parse(tok) as string;
      if (keys.has(key)) return key;
      keys.add(key);
    }
  }
  return null;
}

describe('regression: findDuplicateKey is linear (security review, class 3)', () => {
  const wide = (n: number, extra = '') =>
    `{${Array.from({ length: n }, (_, i) => `"key-${i}":${i}`).join(',')}${extra}}`;

  it('answers for 200k distinct keys, and finds a duplicate at the very end', () => {
    expect(findDuplicateKey(wide(200_000))).toBeNull();
    expect(findDuplicateKey(wide(200_000, ',"key-7":0'))).toBe('key-7');
  });

  it('keeps sibling wide objects apart, and sees duplicates in nested wide objects', () => {
    const a = wide(50);
    expect(findDuplicateKey(`[${a},${a}]`)).toBeNull();
    expect(findDuplicateKey(`{"x":${a},"y":${wide(30, ',"key-29":1')}}`)).toBe('key-29');
    expect(findDuplicateKey(`{"x":${a},"y":1,"x":2}`)).toBe('x');
  });
});
