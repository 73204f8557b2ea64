/**
 * RS256 keys for the 5-minute API JWTs. Keys are persisted (private part sealed with the
 * master key) so restarts and replicas sign and verify alike. Rotation: a new key starts
 * signing while the old one stays in the JWKS until it retires.
 */
import { randomUUID, type webcrypto } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, jwtVerify, SignJWT, type JWK, type JWTPayload } from 'jose';
import { openJson, sealJson, type MasterKeyring } from '@vlt/crypto';
import type { Prisma, PrismaClient } from '@vlt/db';

type CryptoKey = webcrypto.CryptoKey;

export const API_JWT_TTL_SECONDS = 300;
const ALG = 'RS256';

interface LoadedKey {
  kid: string;
  publicJwk: JWK;
  /** Null when this process's master keys cannot open it: it still verifies, never signs. */
  privateKey: CryptoKey | null;
  publicKey: CryptoKey;
  notBefore: Date;
  retiresAt: Date | null;
}

export interface ApiJwtClaims {
  sub: string;
  sid: string;
  wid: string;
  roles: string[];
  scp: string[];
}

export interface VerifiedApiJwt extends ApiJwtClaims {
  jti: string;
  exp: number;
  iat: number;
}

export interface SigningKeys {
  sign(claims: ApiJwtClaims, now: Date): Promise<{ token: string; expiresAt: Date; jti: string }>;
  /** Throws on anything but a valid, unexpired token of ours. */
  verify(token: string): Promise<VerifiedApiJwt>;
  jwks(): { keys: JWK[] };
  /** Creates a new signing key; the previous ones keep verifying until `retireOldAfterSeconds`. */
  rotate(retireOldAfterSeconds: number): Promise<string>;
  reload(): Promise<void>;
  /** Key ids whose private half this process cannot decrypt (reported at start-up). */
  undecryptable(): string[];
}

export async function createSigningKeys(deps: {
  prisma: PrismaClient;
  keyring: MasterKeyring;
  issuer: string;
}): Promise<SigningKeys> {
  const { prisma, keyring, issuer } = deps;
  let keys: LoadedKey[] = [];
  let lastReload = 0;
  const undecryptable = new Set<string>();

  async function load(): Promise<void> {
    const rows = await prisma.signingKey.findMany({
      where: { retiredAt: null },
      orderBy: { notBefore: 'desc' },
    });
    const now = Date.now();
    const loaded: LoadedKey[] = [];
    for (const row of rows) {
      if (row.retiresAt && row.retiresAt.getTime() <= now) continue;
      let privateKey: CryptoKey | null = null;
      try {
        const privateJwk = openJson<JWK>(keyring, row.privateKey as never, `signing-key:${row.kid}`);
        privateKey = (await importJWK(privateJwk, ALG)) as CryptoKey;
      } catch {
        // Sealed under a master key this process does not hold (rotation not finished, or a
        // misconfigured replica): keep verifying with its public half, sign with another key.
        undecryptable.add(row.kid);
      }
      loaded.push({
        kid: row.kid,
        publicJwk: row.publicJwk as JWK,
        privateKey,
        publicKey: (await importJWK(row.publicJwk as JWK, ALG)) as CryptoKey,
        notBefore: row.notBefore,
        retiresAt: row.retiresAt,
      });
    }
    keys = loaded;
    lastReload = now;
  }

  async function create(): Promise<string> {
    const kid = randomUUID();
    const pair = await generateKeyPair(ALG, { extractable: true, modulusLength: 2048 });
    const publicJwk = { ...(await exportJWK(pair.publicKey)), kid, alg: ALG, use: 'sig' };
    const privateJwk = await exportJWK(pair.privateKey);
    await prisma.signingKey.create({
      data: {
        kid,
        algorithm: ALG,
        publicJwk: publicJwk as Prisma.InputJsonValue,
        privateKey: sealJson(keyring, privateJwk, `signing-key:${kid}`) as unknown as Prisma.InputJsonValue,
        notBefore: new Date(),
      },
    });
    return kid;
  }

  await load();
  if (!keys.some((k) => k.privateKey)) {
    // Two replicas starting together may both create one: both stay valid, the newest signs.
    await create();
    await load();
  }

  const current = () => {
    const now = Date.now();
    const usable = keys.filter((x) => x.privateKey);
    const k = usable.find((x) => x.notBefore.getTime() <= now) ?? usable[0];
    if (!k?.privateKey) throw new Error('no signing key');
    return { ...k, privateKey: k.privateKey };
  };

  return {
    async sign(claims, now) {
      const key = current();
      const iat = Math.floor(now.getTime() / 1000);
      const exp = iat + API_JWT_TTL_SECONDS;
      const jti = randomUUID();
      const token = await new SignJWT({
        sid: claims.sid,
        wid: claims.wid,
        roles: claims.roles,
        scp: claims.scp,
      })
        .setProtectedHeader({ alg: ALG, kid: key.kid, typ: 'JWT' })
        .setIssuer(issuer)
        .setAudience('api')
        .setSubject(claims.sub)
        .setIssuedAt(iat)
        .setExpirationTime(exp)
        .setJti(jti)
        .sign(key.privateKey);
      return { token, expiresAt: new Date(exp * 1000), jti };
    },
    async verify(token) {
      const { payload } = await jwtVerify<JWTPayload & Partial<ApiJwtClaims>>(
        token,
        async (header) => {
          let key = keys.find((k) => k.kid === header.kid);
          // Another replica may have rotated: reload on an unknown kid, at most once a second
          // (bounded database load from forged kids, and no long window of refusals).
          if (!key && Date.now() - lastReload > 1_000) {
            await load();
            key = keys.find((k) => k.kid === header.kid);
          }
          if (!key) throw new Error('unknown key id');
          return key.publicKey;
        },
        { issuer, audience: 'api', algorithms: [ALG], requiredClaims: ['sub', 'jti', 'exp', 'iat'] },
      );
      if (typeof payload.sid !== 'string' || typeof payload.wid !== 'string')
        throw new Error('missing claims');
      if (!Array.isArray(payload.roles) || !Array.isArray(payload.scp)) throw new Error('missing claims');
      return {
        sub: payload.sub!,
        sid: payload.sid,
        wid: payload.wid,
        roles: payload.roles.map(String),
        scp: payload.scp.map(String),
        jti: payload.jti!,
        exp: payload.exp!,
        iat: payload.iat!,
      };
    },
    jwks() {
      return { keys: keys.map((k) => k.publicJwk) };
    },
    async rotate(retireOldAfterSeconds) {
      const retiresAt = new Date(Date.now() + retireOldAfterSeconds * 1000);
      await prisma.signingKey.updateMany({
        where: { retiredAt: null, retiresAt: null },
        data: { retiresAt },
      });
      const kid = await create();
      await load();
      return kid;
    },
    reload: load,
    undecryptable: () => [...undecryptable],
  };
}
