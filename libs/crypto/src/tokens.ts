import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Personal access token, bootstrap secret, agent access token (spec: token prefixes). */
export type TokenPrefix = 'vltp_' | 'vltb_' | 'vltt_';

const TOKEN_PREFIXES: readonly TokenPrefix[] = ['vltp_', 'vltb_', 'vltt_'];
export const TOKEN_RANDOM_BYTES = 32;

/** A new bearer secret: the prefix (so scanners and humans can tell what leaked) + 256 random bits, base64url. */
export function generateToken(prefix: TokenPrefix): string {
  if (!TOKEN_PREFIXES.includes(prefix)) throw new TypeError('unknown token prefix');
  return prefix + randomBytes(TOKEN_RANDOM_BYTES).toString('base64url');
}

/**
 * SHA-256 hex of a token: the only form that is stored. A plain hash suffices (no salt, no
 * stretching) because tokens carry 256 random bits, and it keeps look-up by hash possible.
 */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** Constant-time comparison of two equal-length values; false when the lengths differ. */
export function safeEqual(a: string | Buffer, b: string | Buffer): boolean {
  const x = typeof a === 'string' ? Buffer.from(a, 'utf8') : a;
  const y = typeof b === 'string' ? Buffer.from(b, 'utf8') : b;
  return x.length === y.length && timingSafeEqual(x, y);
}
