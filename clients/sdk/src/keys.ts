/**
 * The agent's ES256 key: generated on the agent's machine, only its public half ever leaves it
 * (at bootstrap). The PKCS8 PEM is for the agent's own storage.
 */
import {
  exportJWK,
  exportPKCS8,
  generateKeyPair,
  importJWK,
  importPKCS8,
  type CryptoKey,
  type JWK,
} from 'jose';

export interface AgentKeys {
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  /** EC P-256 public JWK, what `bootstrapAgent` sends. */
  publicJwk: JWK;
  /** PKCS8 PEM of the private key, for storing it; read back with `importAgentKey`. */
  privateKeyPem: string;
}

export async function generateAgentKeys(): Promise<AgentKeys> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const { kty, crv, x, y } = await exportJWK(publicKey);
  return {
    privateKey,
    publicKey,
    // Only the public members: the server refuses anything else anyway.
    publicJwk: { kty, crv, x, y },
    privateKeyPem: await exportPKCS8(privateKey),
  };
}

/**
 * The agent's private key from where it is stored: a PKCS8 PEM, a private JWK, or the JWK as
 * base64 JSON (the agent plugin's `privateKey` setting). The key is imported non-extractable.
 */
export async function importAgentKey(key: string | JWK): Promise<CryptoKey> {
  if (typeof key === 'string' && key.includes('-----BEGIN')) return importPKCS8(key, 'ES256');
  const jwk = typeof key === 'string' ? parseJwk(key) : key;
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.d !== 'string') {
    throw new TypeError('the agent key must be an EC P-256 private key (ES256)');
  }
  const imported = await importJWK({ ...jwk, ext: false }, 'ES256');
  if (imported instanceof Uint8Array)
    throw new TypeError('the agent key must be an EC P-256 private key (ES256)');
  return imported;
}

/** A JWK given as base64 (or plain) JSON; errors never repeat the input, which is a secret. */
function parseJwk(text: string): JWK {
  const trimmed = text.trim();
  const json = trimmed.startsWith('{') ? trimmed : Buffer.from(trimmed, 'base64').toString('utf8');
  try {
    const v: unknown = JSON.parse(json);
    if (v && typeof v === 'object' && !Array.isArray(v)) return v as JWK;
  } catch {
    // fall through to the error below
  }
  throw new TypeError('the agent key is neither a PKCS8 PEM nor a (base64) JWK');
}

/** The private key as base64 JSON of its JWK: the agent plugin's `privateKey` setting. */
export async function exportAgentKeyBase64(key: CryptoKey): Promise<string> {
  const { kty, crv, x, y, d } = await exportJWK(key);
  return Buffer.from(JSON.stringify({ kty, crv, x, y, d })).toString('base64');
}
