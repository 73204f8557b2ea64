/**
 * The agent's ES256 private key in the agent plugin's format: base64 of the private JWK's JSON.
 * Checked member by member at start-up, so a bad key is a configuration error that names the
 * setting (never its value), then imported as a non-extractable key: once imported, nothing in
 * the process can read `d` back.
 */
import { webcrypto } from 'node:crypto';
import { ConfigError } from './errors.js';

export interface AgentPrivateJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  d: string;
}

/** A P-256 coordinate or scalar: 32 bytes, base64url without padding. */
const B64URL_32 = /^[A-Za-z0-9_-]{43}$/;

/**
 * Parses the key text: base64 of the JWK JSON (the plugin's `privateKey`), or the JSON itself
 * (a key file written by hand). Errors say what is wrong, never what the text was: JSON.parse
 * quotes its input in its messages, so its errors are not passed on.
 */
export function decodeAgentPrivateKey(text: string, source: string): AgentPrivateJwk {
  const trimmed = text.trim();
  if (!trimmed) throw new ConfigError(`${source} is empty`);
  const json = trimmed.startsWith('{') ? trimmed : Buffer.from(trimmed, 'base64').toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new ConfigError(
      `${source} is not a base64-encoded JWK (expected base64 of the private JWK's JSON)`,
    );
  }
  if (typeof value !== 'object' || value === null) {
    throw new ConfigError(`${source} is not a JWK object`);
  }
  const k = value as Record<string, unknown>;
  if (k.kty !== 'EC' || k.crv !== 'P-256') {
    throw new ConfigError(`${source} must be an ES256 key (kty EC, crv P-256)`);
  }
  for (const member of ['x', 'y', 'd'] as const) {
    const v = k[member];
    if (typeof v !== 'string' || !B64URL_32.test(v)) {
      throw new ConfigError(
        member === 'd'
          ? `${source} is not a private key (its "d" member is missing or malformed)`
          : `${source} has a malformed "${member}" member`,
      );
    }
  }
  return { kty: 'EC', crv: 'P-256', x: k.x as string, y: k.y as string, d: k.d as string };
}

/** A non-extractable ECDSA P-256 signing key; the point is checked by Web Crypto. */
export async function importAgentPrivateKey(jwk: AgentPrivateJwk): Promise<webcrypto.CryptoKey> {
  try {
    return await webcrypto.subtle.importKey(
      'jwk',
      { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y, d: jwk.d },
      { name: 'ECDSA', namedCurve: 'P-256' },
      false,
      ['sign'],
    );
  } catch {
    throw new ConfigError('the agent private key is not a valid P-256 key');
  }
}
