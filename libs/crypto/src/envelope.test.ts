import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  DecryptionError,
  isEnvelope,
  needsRewrap,
  openJson,
  parseMasterKeys,
  rewrap,
  sealJson,
  type Envelope,
} from './index.js';

const keyA = randomBytes(32).toString('base64');
const keyB = randomBytes(32).toString('base64');
const ring = parseMasterKeys(keyA);
const SECRET = { accessToken: 'ya29.super-secret-access-token', refreshToken: '1//refresh-secret' };
const AAD = 'connection:c_123';

function expectDecryptionError(fn: () => unknown, reason: DecryptionError['reason']): DecryptionError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(DecryptionError);
  const err = caught as DecryptionError;
  expect(err.code).toBe('VLT_DECRYPTION_FAILED');
  expect(err.reason).toBe(reason);
  // Nothing secret may reach a message that will be logged.
  const text = `${err.message} ${err.stack ?? ''} ${JSON.stringify(err)}`;
  for (const secret of [
    SECRET.accessToken,
    SECRET.refreshToken,
    keyA,
    keyB,
    ring.current.key.toString('hex'),
  ]) {
    expect(text).not.toContain(secret);
  }
  return err;
}

/** Flips one bit of a base64 field, keeping it canonical base64 of the same length. */
function flip(b64: string, byte = 0): string {
  const buf = Buffer.from(b64, 'base64');
  buf[byte] = buf[byte]! ^ 0x01;
  return buf.toString('base64');
}

describe('sealJson / openJson', () => {
  it('round-trips a value and produces a valid envelope', () => {
    const env = sealJson(ring, SECRET, AAD);
    expect(isEnvelope(env)).toBe(true);
    expect(env).toMatchObject({ version: 1, alg: 'A256GCM', keyId: ring.current.id });
    expect(openJson(ring, env, AAD)).toEqual(SECRET);
  });

  it('never stores the plaintext visibly', () => {
    const serialized = JSON.stringify(sealJson(ring, SECRET, AAD));
    expect(serialized).not.toContain(SECRET.accessToken);
    expect(serialized).not.toContain(Buffer.from(SECRET.accessToken).toString('base64').slice(0, 12));
  });

  it('gives different envelopes for the same value (fresh data key and IVs)', () => {
    const a = sealJson(ring, SECRET, AAD);
    const b = sealJson(ring, SECRET, AAD);
    for (const field of ['wrappedKey', 'wrapIv', 'wrapTag', 'iv', 'tag', 'ciphertext'] as const) {
      expect(a[field]).not.toBe(b[field]);
    }
  });

  it('works without aad, and aad "" equals no aad', () => {
    expect(openJson(ring, sealJson(ring, [1, 'two', null]))).toEqual([1, 'two', null]);
    expect(openJson(ring, sealJson(ring, 'x'), '')).toBe('x');
  });

  it('refuses values JSON cannot represent', () => {
    expect(() => sealJson(ring, undefined)).toThrow(TypeError);
    expect(() => sealJson(ring, () => 1)).toThrow(TypeError);
  });
});

describe('tampering and misuse', () => {
  const env = sealJson(ring, SECRET, AAD);

  it.each(['ciphertext', 'tag', 'iv', 'wrappedKey', 'wrapTag', 'wrapIv'] as const)(
    'a changed %s fails authentication',
    (field) => {
      const tampered: Envelope = { ...env, [field]: flip(env[field]) };
      expect(isEnvelope(tampered)).toBe(true);
      expectDecryptionError(() => openJson(ring, tampered, AAD), 'auth_failed');
    },
  );

  it('a changed keyId is an unknown key', () => {
    const tampered = { ...env, keyId: '0123456789abcdef' };
    const err = expectDecryptionError(() => openJson(ring, tampered, AAD), 'unknown_key');
    expect(err.keyId).toBe('0123456789abcdef');
  });

  it('a keyId pointing at another configured key fails authentication', () => {
    const both = parseMasterKeys(keyA, keyB);
    const tampered = { ...env, keyId: both.old[0]!.id };
    expectDecryptionError(() => openJson(both, tampered, AAD), 'auth_failed');
  });

  it('another version is refused as unsupported', () => {
    expectDecryptionError(() => openJson(ring, { ...env, version: 2 }, AAD), 'unsupported_version');
    expectDecryptionError(() => openJson(ring, { ...env, version: '1' }, AAD), 'unsupported_version');
  });

  it('malformed envelopes are refused', () => {
    for (const bad of [
      null,
      'x',
      [],
      {},
      { ...env, alg: 'A128GCM' },
      { ...env, tag: 'not base64!' },
      { ...env, extra: 1 },
      { ...env, tag: Buffer.alloc(12).toString('base64') },
    ]) {
      expectDecryptionError(() => openJson(ring, bad, AAD), 'malformed');
    }
  });

  it('a wrong aad fails (envelope swapped between rows)', () => {
    expectDecryptionError(() => openJson(ring, env, 'connection:c_999'), 'auth_failed');
    expectDecryptionError(() => openJson(ring, env), 'auth_failed');
  });

  it("payload moved under another envelope's wrapped key fails", () => {
    const other = sealJson(ring, { accessToken: 'other' }, AAD);
    const spliced = { ...env, iv: other.iv, tag: other.tag, ciphertext: other.ciphertext };
    expectDecryptionError(() => openJson(ring, spliced, AAD), 'auth_failed');
  });

  it('a keyring without the sealing key cannot open', () => {
    expectDecryptionError(() => openJson(parseMasterKeys(keyB), env, AAD), 'unknown_key');
  });
});

describe('rotation', () => {
  it('old key still opens after rotation; rewrap moves the envelope to the current key', () => {
    const before = parseMasterKeys(keyA);
    const env = sealJson(before, SECRET, AAD);
    const after = parseMasterKeys(keyB, keyA);
    expect(needsRewrap(after, env)).toBe(true);
    expect(openJson(after, env, AAD)).toEqual(SECRET);

    const moved = rewrap(after, env, AAD);
    expect(moved.keyId).toBe(after.current.id);
    expect(needsRewrap(after, moved)).toBe(false);
    // Payload untouched, data key re-wrapped.
    expect(moved.ciphertext).toBe(env.ciphertext);
    expect(moved.wrappedKey).not.toBe(env.wrappedKey);
    expect(openJson(after, moved, AAD)).toEqual(SECRET);
    // Once the old key is retired, only the re-wrapped envelope opens.
    const retired = parseMasterKeys(keyB);
    expect(openJson(retired, moved, AAD)).toEqual(SECRET);
    expectDecryptionError(() => openJson(retired, env, AAD), 'unknown_key');
  });

  it('rewrap of a current envelope is a no-op; rewrap refuses damaged or misbound envelopes', () => {
    const env = sealJson(ring, SECRET, AAD);
    expect(rewrap(ring, env, AAD)).toEqual(env);
    expectDecryptionError(() => rewrap(ring, env, 'connection:other'), 'auth_failed');
    expectDecryptionError(
      () => rewrap(ring, { ...env, ciphertext: flip(env.ciphertext) }, AAD),
      'auth_failed',
    );
  });
});

describe('property: round trip on random JSON', () => {
  it('openJson(sealJson(v)) equals v after JSON normalisation', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string(), (value, aad) => {
        const env = sealJson(ring, value, aad);
        expect(isEnvelope(env)).toBe(true);
        expect(openJson(ring, env, aad)).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 300 },
    );
  });

  it('any different aad fails', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.string(), fc.string(), (value, aad, other) => {
        fc.pre(aad !== other);
        expect(() => openJson(ring, sealJson(ring, value, aad), other)).toThrow(DecryptionError);
      }),
      { numRuns: 100 },
    );
  });
});
