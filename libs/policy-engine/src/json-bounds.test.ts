import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonBoundsViolation } from './json-bounds.js';

const B = { maxDepth: 3, maxMembers: 5 };

describe('jsonBoundsViolation', () => {
  it.each([
    ['[[[]]]', null],
    ['[[[[]]]]', 'JSON nested deeper than 3 levels'],
    ['{"a":{"b":{"c":1}}}', null],
    ['{"a":{"b":{"c":{}}}}', 'JSON nested deeper than 3 levels'],
    ['[1,2,3,4]', null],
    ['[1,2,3,4,5]', null],
    ['[1,2,3,4,5,6]', 'JSON with more than 5 members'],
    ['[[1],[2],[3]]', 'JSON with more than 5 members'],
    ['"[[[[[[,,,,,,,"', null],
    ['["\\"[[[[[[", 1]', null],
    ['["\\\\", [[[[]]]]]', 'JSON nested deeper than 3 levels'],
    ['[[[[', 'JSON nested deeper than 3 levels'],
    ['"unterminated [[[[[[', null],
  ])('%s', (text, want) => {
    expect(jsonBoundsViolation(text, B)).toBe(want);
  });

  it('agrees with the real depth of any JSON value', () => {
    const depthOf = (v: unknown): number =>
      Array.isArray(v)
        ? 1 + Math.max(0, ...v.map(depthOf))
        : v !== null && typeof v === 'object'
          ? 1 + Math.max(0, ...Object.values(v).map(depthOf))
          : 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
        const text = JSON.stringify(v);
        const over = jsonBoundsViolation(text, { maxDepth: 3, maxMembers: 1e9 }) !== null;
        expect(over).toBe(depthOf(v) > 3);
      }),
      { numRuns: 500 },
    );
  });
});

describe('regression (hostile input): object keys are bounded on their own', () => {
  const K = { maxDepth: 64, maxMembers: 1e9, maxObjectMembers: 3 };

  it.each([
    ['{"a":1,"b":2,"c":3}', null],
    ['{"a":1,"b":2,"c":3,"d":4}', 'JSON with more than 3 object keys'],
    ['[{"a":1},{"b":2},{"c":3},{"d":4}]', 'JSON with more than 3 object keys'],
    ['{"a":"x:y:z:w:v"}', null],
    ['[1,2,3,4,5,6,7,8,9]', null],
  ])('%s', (text, want) => {
    expect(jsonBoundsViolation(text, K)).toBe(want);
  });

  it('counts exactly the members of every object', () => {
    const keysOf = (v: unknown): number =>
      Array.isArray(v)
        ? v.reduce((n: number, x) => n + keysOf(x), 0)
        : v !== null && typeof v === 'object'
          ? Object.keys(v).length + Object.values(v).reduce((n: number, x) => n + keysOf(x), 0)
          : 0;
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5 }), fc.nat({ max: 20 }), (v, limit) => {
        const text = JSON.stringify(v);
        const over = jsonBoundsViolation(text, { maxDepth: 64, maxMembers: 1e9, maxObjectMembers: limit });
        expect(over !== null).toBe(keysOf(v) > limit);
      }),
      { numRuns: 500 },
    );
  });
});
