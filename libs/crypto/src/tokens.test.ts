import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateToken, hashToken, safeEqual } from './index.js';

describe('tokens', () => {
  it.each(['vltp_', 'vltb_', 'vltt_'] as const)(
    '%s tokens are prefix + 32 random bytes in base64url',
    (prefix) => {
      const token = generateToken(prefix);
      expect(token).toMatch(new RegExp(`^${prefix}[A-Za-z0-9_-]{43}$`));
      expect(Buffer.from(token.slice(prefix.length), 'base64url')).toHaveLength(32);
      expect(generateToken(prefix)).not.toBe(token);
    },
  );

  it('refuses unknown prefixes', () => {
    expect(() => generateToken('xyz_' as never)).toThrow(TypeError);
  });

  it('hashes with SHA-256 hex', () => {
    const token = generateToken('vltp_');
    expect(hashToken(token)).toBe(createHash('sha256').update(token).digest('hex'));
    expect(hashToken(token)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('compares safely', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual('', '')).toBe(true);
    expect(safeEqual(Buffer.from('abc'), 'abc')).toBe(true);
  });
});
