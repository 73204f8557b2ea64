/**
 * The agent's ES256 key: generated on the agent's machine, only its public half ever leaves it
 * (at bootstrap). The PKCS8 PEM is for the agent's own storage.
 */
import { exportJWK, exportPKCS8, generateKeyPair, importPKCS8, type CryptoKey, type JWK } from 'jose';

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

export function importAgentKey(pem: string): Promise<CryptoKey> {
  return importPKCS8(pem, 'ES256');
}
