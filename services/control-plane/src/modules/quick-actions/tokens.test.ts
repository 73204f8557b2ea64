import { randomBytes, randomUUID } from 'node:crypto';
import { parseMasterKeys } from '@vlt/crypto';
import { describe, expect, it } from 'vitest';
import { parseQuickActionToken, signQuickAction, verifyQuickAction } from './tokens.js';

const key = () => randomBytes(32).toString('base64');

describe('quick-action tokens', () => {
  const keyring = parseMasterKeys(key());
  const t = {
    id: randomUUID(),
    approvalId: randomUUID(),
    action: 'approve' as const,
    expiresAt: new Date(1_800_000_000_000),
  };

  it('round-trips: the signature covers row, approval, action and expiry', () => {
    const parsed = parseQuickActionToken(signQuickAction(keyring, t))!;
    expect(parsed.id).toBe(t.id);
    expect(verifyQuickAction(keyring, parsed.sig, t)).toBe(true);
    // The same signature does not stand for anything else.
    expect(verifyQuickAction(keyring, parsed.sig, { ...t, action: 'deny' })).toBe(false);
    expect(verifyQuickAction(keyring, parsed.sig, { ...t, approvalId: randomUUID() })).toBe(false);
    expect(verifyQuickAction(keyring, parsed.sig, { ...t, expiresAt: new Date(1_900_000_000_000) })).toBe(
      false,
    );
  });

  it('refuses forged and malformed tokens before any lookup', () => {
    expect(parseQuickActionToken('x')).toBeNull();
    expect(parseQuickActionToken(`${t.id}.`)).toBeNull();
    expect(parseQuickActionToken(`${t.id}.${'A'.repeat(43)}/`)).toBeNull();
    const forged = parseQuickActionToken(`${t.id}.${Buffer.alloc(32).toString('base64url')}`)!;
    expect(verifyQuickAction(keyring, forged.sig, t)).toBe(false);
    const otherKey = parseMasterKeys(key());
    expect(verifyQuickAction(keyring, parseQuickActionToken(signQuickAction(otherKey, t))!.sig, t)).toBe(
      false,
    );
  });

  it('a link minted before a master-key rotation still works while the old key is configured', () => {
    const old = key();
    const before = parseMasterKeys(old);
    const after = parseMasterKeys(key(), old);
    const sig = parseQuickActionToken(signQuickAction(before, t))!.sig;
    expect(verifyQuickAction(after, sig, t)).toBe(true);
  });
});
