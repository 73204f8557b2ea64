import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/*
 * Cost: N = 2^16, r = 8, p = 1 (64 MiB, about 175 ms per hash on this project's 2-core machines).
 * 2^15 (32 MiB, ~86 ms) is the common floor; OWASP's 2^17 costs 128 MiB per hash, and with libuv's
 * 4 threads a burst of sign-ins could then hold 512 MiB in a small control-plane pod. Raising it
 * later is one constant: needsRehash() tells the sign-in path to re-hash on the next success.
 * Measurements in docs/decisions/0009-credential-encryption-and-secrets.md.
 */
export const SCRYPT_PARAMS = { N: 2 ** 16, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const HASH_BYTES = 32;
/** Refuse to run parameters from a stored string that would need more memory than this (DoS guard). */
const MAX_MEMORY_BYTES = 256 * 1024 * 1024;

type ScryptParams = { N: number; r: number; p: number };

function scryptAsync(password: string, salt: Buffer, length: number, params: ScryptParams): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 2 * 128 * params.N * params.r };
  return new Promise((resolve, reject) => {
    // NFC so the same password typed on different keyboards/OSes hashes the same.
    scrypt(password.normalize('NFC'), salt, length, options, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

/** `scrypt$N$r$p$<salt b64url>$<hash b64url>`: self-describing, so the cost can change over time. */
export async function hashPassword(password: string): Promise<string> {
  if (typeof password !== 'string') throw new TypeError('password must be a string');
  const salt = randomBytes(SALT_BYTES);
  const hash = await scryptAsync(password, salt, HASH_BYTES, SCRYPT_PARAMS);
  const { N, r, p } = SCRYPT_PARAMS;
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

type Parsed = ScryptParams & { salt: Buffer; hash: Buffer };

const B64URL = /^[A-Za-z0-9_-]+$/;
const INT = /^[1-9][0-9]{0,9}$/;

function parseStored(stored: string): Parsed | undefined {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined;
  const [, n, r, p, salt, hash] = parts as [string, string, string, string, string, string];
  if (![n, r, p].every((x) => INT.test(x)) || !B64URL.test(salt) || !B64URL.test(hash)) return undefined;
  const params = { N: Number(n), r: Number(r), p: Number(p) };
  const isPowerOfTwo = params.N > 1 && (params.N & (params.N - 1)) === 0;
  if (!isPowerOfTwo || params.r > 32 || params.p > 16 || 128 * params.N * params.r > MAX_MEMORY_BYTES)
    return undefined;
  const parsed = { ...params, salt: Buffer.from(salt, 'base64url'), hash: Buffer.from(hash, 'base64url') };
  if (parsed.salt.length < SALT_BYTES || parsed.hash.length < 16 || parsed.hash.length > 64) return undefined;
  return parsed;
}

/** True when the password matches. A malformed or unsupported stored string is false, never an exception. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  if (typeof password !== 'string' || typeof stored !== 'string') return false;
  const parsed = parseStored(stored);
  if (!parsed) return false;
  const candidate = await scryptAsync(password, parsed.salt, parsed.hash.length, parsed);
  return timingSafeEqual(candidate, parsed.hash);
}

/** True when a stored hash uses other parameters than the current ones (re-hash after a successful sign-in). */
export function needsRehash(stored: string): boolean {
  const parsed = parseStored(stored);
  return (
    !parsed || parsed.N !== SCRYPT_PARAMS.N || parsed.r !== SCRYPT_PARAMS.r || parsed.p !== SCRYPT_PARAMS.p
  );
}
