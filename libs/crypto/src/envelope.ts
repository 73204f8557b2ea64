import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { DecryptionError } from './errors.js';
import { findMasterKey, type MasterKey, type MasterKeyring } from './keyring.js';

/**
 * A sealed JSON value (stored as a JSON column). Binary fields are standard base64 with padding.
 * `wrappedKey`/`wrapIv`/`wrapTag`: the per-record data key, AES-256-GCM encrypted by the master
 * key named by `keyId`. `iv`/`tag`/`ciphertext`: the payload, AES-256-GCM encrypted by the data key.
 */
export type Envelope = {
  version: 1;
  keyId: string;
  alg: 'A256GCM';
  wrappedKey: string;
  wrapIv: string;
  wrapTag: string;
  iv: string;
  tag: string;
  ciphertext: string;
};

const ALG = 'aes-256-gcm';
const DATA_KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[0-9a-f]{16}$/;
const ENVELOPE_KEYS = [
  'version',
  'keyId',
  'alg',
  'wrappedKey',
  'wrapIv',
  'wrapTag',
  'iv',
  'tag',
  'ciphertext',
];

/** Canonical padded base64 only, so an envelope has exactly one spelling; optional exact byte length. */
function isBase64(value: unknown, bytes?: number): value is string {
  if (typeof value !== 'string' || value.length === 0) return false;
  const decoded = Buffer.from(value, 'base64');
  return decoded.toString('base64') === value && (bytes === undefined || decoded.length === bytes);
}

/** Runtime check of an Envelope's shape (values come from the database as untyped JSON). */
export function isEnvelope(x: unknown): x is Envelope {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) return false;
  const e = x as Record<string, unknown>;
  return (
    Object.keys(e).length === ENVELOPE_KEYS.length &&
    ENVELOPE_KEYS.every((k) => Object.hasOwn(e, k)) &&
    e.version === 1 &&
    e.alg === 'A256GCM' &&
    typeof e.keyId === 'string' &&
    KEY_ID.test(e.keyId) &&
    isBase64(e.wrappedKey, DATA_KEY_BYTES) &&
    isBase64(e.wrapIv, IV_BYTES) &&
    isBase64(e.wrapTag, TAG_BYTES) &&
    isBase64(e.iv, IV_BYTES) &&
    isBase64(e.tag, TAG_BYTES) &&
    isBase64(e.ciphertext)
  );
}

/*
 * Associated data. The record binding (`aad`, e.g. `connection:<id>`) enters both layers, so an
 * envelope copied onto another row fails to open. The labels keep the two layers' inputs distinct.
 * The payload layer leaves out keyId so that rotation re-wraps the data key without touching it.
 */
const wrapAad = (keyId: string, aad: string) =>
  Buffer.from(`vlt.envelope.v1|wrap|A256GCM|${keyId}|${aad}`, 'utf8');
const payloadAad = (aad: string) => Buffer.from(`vlt.envelope.v1|data|A256GCM|${aad}`, 'utf8');

function encrypt(
  key: Buffer,
  plaintext: Buffer,
  aad: Buffer,
): { iv: Buffer; tag: Buffer; ciphertext: Buffer } {
  // A fresh random 96-bit IV per encryption; each data key encrypts exactly one payload.
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALG, key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { iv, tag: cipher.getAuthTag(), ciphertext };
}

/** Throws (any error) when authentication fails; callers map that to DecryptionError. */
function decrypt(key: Buffer, iv: Buffer, tag: Buffer, ciphertext: Buffer, aad: Buffer): Buffer {
  // authTagLength pins the tag to 16 bytes: GCM would otherwise accept a truncated tag.
  const decipher = createDecipheriv(ALG, key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
}

function wrapDataKey(master: MasterKey, dataKey: Buffer, aad: string) {
  const { iv, tag, ciphertext } = encrypt(master.key, dataKey, wrapAad(master.id, aad));
  return {
    keyId: master.id,
    wrappedKey: ciphertext.toString('base64'),
    wrapIv: iv.toString('base64'),
    wrapTag: tag.toString('base64'),
  };
}

function checkAad(aad: unknown): string {
  if (typeof aad !== 'string') throw new TypeError('aad must be a string');
  return aad;
}

/** Validates the envelope, finds its master key and unwraps the data key (caller zeroes it). */
function unwrapDataKey(
  keyring: MasterKeyring,
  envelope: unknown,
  aad: string,
): { env: Envelope; dataKey: Buffer } {
  if (typeof envelope === 'object' && envelope !== null && 'version' in envelope && envelope.version !== 1) {
    throw new DecryptionError('unsupported_version');
  }
  if (!isEnvelope(envelope)) throw new DecryptionError('malformed');
  const master = findMasterKey(keyring, envelope.keyId);
  if (!master) throw new DecryptionError('unknown_key', envelope.keyId);
  try {
    const dataKey = decrypt(
      master.key,
      Buffer.from(envelope.wrapIv, 'base64'),
      Buffer.from(envelope.wrapTag, 'base64'),
      Buffer.from(envelope.wrappedKey, 'base64'),
      wrapAad(master.id, aad),
    );
    return { env: envelope, dataKey };
  } catch {
    throw new DecryptionError('auth_failed', envelope.keyId);
  }
}

function decryptPayload(env: Envelope, dataKey: Buffer, aad: string): Buffer {
  try {
    return decrypt(
      dataKey,
      Buffer.from(env.iv, 'base64'),
      Buffer.from(env.tag, 'base64'),
      Buffer.from(env.ciphertext, 'base64'),
      payloadAad(aad),
    );
  } catch {
    throw new DecryptionError('auth_failed', env.keyId);
  } finally {
    dataKey.fill(0);
  }
}

/**
 * Encrypts a JSON value under a fresh random data key, wrapped by the keyring's current master key.
 * `aad` binds the envelope to its record (e.g. `connection:<id>`); the same string must be given
 * to openJson. Values JSON cannot represent (undefined, functions, BigInt) are refused.
 */
export function sealJson(keyring: MasterKeyring, value: unknown, aad = ''): Envelope {
  checkAad(aad);
  const json = JSON.stringify(value) as string | undefined;
  if (json === undefined) throw new TypeError('sealJson: value is not JSON-serialisable');
  const dataKey = randomBytes(DATA_KEY_BYTES);
  const plaintext = Buffer.from(json, 'utf8');
  try {
    const payload = encrypt(dataKey, plaintext, payloadAad(aad));
    return {
      version: 1,
      alg: 'A256GCM',
      ...wrapDataKey(keyring.current, dataKey, aad),
      iv: payload.iv.toString('base64'),
      tag: payload.tag.toString('base64'),
      ciphertext: payload.ciphertext.toString('base64'),
    };
  } finally {
    dataKey.fill(0);
    plaintext.fill(0);
  }
}

/**
 * Opens an envelope sealed by sealJson under any key of the keyring. Throws DecryptionError on a
 * malformed envelope, an unsupported version, an unknown key, tampering or a different `aad`.
 * The result is whatever JSON was sealed; callers validate it (zod) like any other input.
 */
export function openJson<T = unknown>(keyring: MasterKeyring, envelope: unknown, aad = ''): T {
  checkAad(aad);
  const { env, dataKey } = unwrapDataKey(keyring, envelope, aad);
  const plaintext = decryptPayload(env, dataKey, aad);
  try {
    return JSON.parse(plaintext.toString('utf8')) as T;
  } catch {
    // Authentic but not JSON: only something holding the master key could have written it.
    throw new DecryptionError('malformed', env.keyId);
  } finally {
    plaintext.fill(0);
  }
}

/** True when the envelope was sealed under a key other than the current one (a rotation candidate). */
export function needsRewrap(keyring: MasterKeyring, envelope: Envelope): boolean {
  return envelope.keyId !== keyring.current.id;
}

/**
 * Rotation: re-wraps the data key under the current master key; the payload ciphertext is kept.
 * The whole envelope is authenticated first, so a damaged record is reported, not re-sealed.
 * An envelope already under the current key is returned unchanged (a copy).
 */
export function rewrap(keyring: MasterKeyring, envelope: unknown, aad = ''): Envelope {
  checkAad(aad);
  const { env, dataKey } = unwrapDataKey(keyring, envelope, aad);
  try {
    decryptPayload(env, Buffer.from(dataKey), aad).fill(0);
    if (env.keyId === keyring.current.id) return { ...env };
    return { ...env, ...wrapDataKey(keyring.current, dataKey, aad) };
  } finally {
    dataKey.fill(0);
  }
}
