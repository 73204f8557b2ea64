import { createHash } from 'node:crypto';
import { MasterKeyError } from './errors.js';

export type MasterKey = { id: string; key: Buffer };

/** The key-encryption keys: `current` seals, `current` and every `old` key open. */
export type MasterKeyring = { current: MasterKey; old: MasterKey[] };

export const MASTER_KEY_BYTES = 32;

/**
 * Non-secret, stable identifier of a master key: the first 16 hex characters of its SHA-256.
 * Stored in every envelope so that opening picks the right key and rotation can find old rows.
 */
export function masterKeyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Decodes one base64 master key. Buffer.from(…, 'base64') silently skips invalid characters, so
 * the input is checked against the alphabet and the decoded length, never echoed in the error.
 */
function decodeMasterKey(encoded: string, label: string): MasterKey {
  const text = encoded.trim();
  const key = BASE64.test(text) ? Buffer.from(text, 'base64') : undefined;
  let problem: string | undefined;
  if (!key) problem = 'not valid base64';
  else if (key.length !== MASTER_KEY_BYTES) problem = `decodes to ${key.length} bytes`;
  // Non-zero padding bits would give a second spelling of the same key.
  else if (key.toString('base64').replace(/=+$/, '') !== text.replace(/=+$/, ''))
    problem = 'not canonical base64';
  if (problem || !key) {
    throw new MasterKeyError(`${label} must be base64 of exactly ${MASTER_KEY_BYTES} bytes (${problem})`);
  }
  return { id: masterKeyId(key), key };
}

/**
 * Builds the keyring from the configured strings: `current` (VLT_MASTER_KEY) and `old`
 * (VLT_MASTER_KEYS_OLD, comma or whitespace separated). Old keys equal to the current key or to
 * each other are dropped, so a rotation can be staged without editing both variables at once.
 */
export function parseMasterKeys(current: string, old?: string): MasterKeyring {
  const currentKey = decodeMasterKey(current, 'current master key');
  const oldKeys: MasterKey[] = [];
  const parts = (old ?? '').split(/[\s,]+/).filter(Boolean);
  parts.forEach((part, i) => {
    const k = decodeMasterKey(part, `old master key ${i + 1} of ${parts.length}`);
    const clash = [currentKey, ...oldKeys].find((seen) => seen.id === k.id);
    if (!clash) oldKeys.push(k);
    // Same id but different bytes would be a 64-bit prefix collision: refuse rather than guess.
    else if (!clash.key.equals(k.key))
      throw new MasterKeyError(`old master key ${i + 1} has the same key id as another key`);
  });
  return { current: currentKey, old: oldKeys };
}

/** The key with this id, or undefined. */
export function findMasterKey(keyring: MasterKeyring, keyId: string): MasterKey | undefined {
  if (keyring.current.id === keyId) return keyring.current;
  return keyring.old.find((k) => k.id === keyId);
}
