import { describe, expect, it } from 'vitest';
import { uuidv7 } from './ids.js';

describe('uuidv7', () => {
  it('is a version-7 RFC 9562 UUID', () => {
    expect(uuidv7()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
  it('sorts by time as a string', () => {
    const ids = [1_000, 5_000, 2_000_000_000_000].map((t) => uuidv7(t));
    expect([...ids].sort()).toEqual(ids);
    expect(uuidv7(10)).not.toBe(uuidv7(10));
  });
});
