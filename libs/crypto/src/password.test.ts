import { describe, expect, it } from 'vitest';
import { SCRYPT_PARAMS, hashPassword, needsRehash, verifyPassword } from './index.js';

describe('passwords', () => {
  it('hashes into a self-describing scrypt string and verifies', async () => {
    const stored = await hashPassword('correct horse battery staple');
    const [scheme, n, r, p, salt, hash] = stored.split('$');
    expect([scheme, Number(n), Number(r), Number(p)]).toEqual([
      'scrypt',
      SCRYPT_PARAMS.N,
      SCRYPT_PARAMS.r,
      SCRYPT_PARAMS.p,
    ]);
    expect(Buffer.from(salt!, 'base64url')).toHaveLength(16);
    expect(Buffer.from(hash!, 'base64url')).toHaveLength(32);
    expect(stored).not.toContain('correct horse');
    expect(await verifyPassword('correct horse battery staple', stored)).toBe(true);
    expect(await verifyPassword('correct horse battery stapl', stored)).toBe(false);
    expect(await verifyPassword('', stored)).toBe(false);
    expect(needsRehash(stored)).toBe(false);
  });

  it('salts: the same password hashes differently', async () => {
    expect(await hashPassword('same password!')).not.toBe(await hashPassword('same password!'));
  });

  it('treats Unicode normalisation forms as the same password', async () => {
    const stored = await hashPassword('caf\u00e9-passphrase');
    expect(await verifyPassword('cafe\u0301-passphrase', stored)).toBe(true);
  });

  it('verifies hashes made with other (older) parameters and flags them for re-hash', async () => {
    // N=2^14 hash of "old-password-1" with a fixed salt, computed once with node:crypto.
    const { scryptSync } = await import('node:crypto');
    const salt = Buffer.alloc(16, 7);
    const legacy = `scrypt$16384$8$1$${salt.toString('base64url')}$${scryptSync('old-password-1', salt, 32, { N: 16384, r: 8, p: 1 }).toString('base64url')}`;
    expect(await verifyPassword('old-password-1', legacy)).toBe(true);
    expect(needsRehash(legacy)).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['other scheme', 'bcrypt$2b$10$abc'],
    ['too few parts', 'scrypt$65536$8$1$abc'],
    ['N not a power of two', `scrypt$65535$8$1$${'A'.repeat(22)}$${'A'.repeat(43)}`],
    ['absurd cost (DoS guard)', `scrypt$1073741824$8$1$${'A'.repeat(22)}$${'A'.repeat(43)}`],
    ['short salt', `scrypt$16384$8$1$AAAA$${'A'.repeat(43)}`],
    ['bad base64url', `scrypt$16384$8$1$${'!'.repeat(22)}$${'A'.repeat(43)}`],
    ['leading zero', `scrypt$016384$8$1$${'A'.repeat(22)}$${'A'.repeat(43)}`],
  ])('malformed stored value (%s) verifies false without throwing', async (_label, stored) => {
    await expect(verifyPassword('anything-at-all', stored)).resolves.toBe(false);
    expect(needsRehash(stored)).toBe(true);
  });

  it('non-string input verifies false', async () => {
    await expect(verifyPassword(undefined as never, 'scrypt$1$1$1$a$b')).resolves.toBe(false);
  });
});
