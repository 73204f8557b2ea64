import { randomBytes } from 'node:crypto';
import { createLocalJWKSet, jwtVerify, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMasterKeys } from '@vlt/crypto';
import { createPrismaClient, type PrismaClient } from '@vlt/db';
import { createRunDatabase } from '@vlt/test-support/run-database.js';
import { realServices } from '@vlt/test-support/services.js';
import { createSigningKeys } from '../src/infra/signing-keys.js';

const issuer = 'https://vault.test';
const claims = {
  sub: '00000000-0000-4000-8000-000000000001',
  sid: 's',
  wid: 'w',
  roles: ['owner'],
  scp: ['api:read'],
};

describe.skipIf(!realServices.hasPostgres())(
  `API signing keys (real PostgreSQL) ${realServices.missing()}`,
  () => {
    let prisma: PrismaClient;
    let drop: () => Promise<void>;
    const keyring = parseMasterKeys(randomBytes(32).toString('base64'));

    beforeAll(async () => {
      const admin = new URL(realServices.databaseUrl());
      admin.pathname = '/postgres';
      const db = await createRunDatabase(admin.toString(), `vlt_keys_${randomBytes(4).toString('hex')}`);
      drop = db.drop;
      prisma = createPrismaClient(db.url);
    });
    afterAll(async () => {
      await prisma?.$disconnect();
      await drop?.();
    });

    it('rotation publishes old and new keys during the overlap, and replicas agree', async () => {
      const a = await createSigningKeys({ prisma, keyring, issuer });
      const old = await a.sign(claims, new Date());
      const oldKid = decodeProtectedHeader(old.token).kid!;

      const newKid = await a.rotate(600);
      expect(newKid).not.toBe(oldKid);
      expect(
        a
          .jwks()
          .keys.map((k) => k.kid)
          .sort(),
      ).toEqual([oldKid, newKid].sort());
      const fresh = await a.sign(claims, new Date());
      expect(decodeProtectedHeader(fresh.token).kid).toBe(newKid);

      // Both verify, here and on another replica, and against the published key set alone.
      const b = await createSigningKeys({ prisma, keyring, issuer });
      for (const token of [old.token, fresh.token]) {
        await expect(a.verify(token)).resolves.toMatchObject({ sub: claims.sub });
        await expect(b.verify(token)).resolves.toMatchObject({ sub: claims.sub });
        const { payload } = await jwtVerify(token, createLocalJWKSet(b.jwks() as never), {
          issuer,
          audience: 'api',
        });
        expect(payload.sub).toBe(claims.sub);
      }
      expect(decodeProtectedHeader((await b.sign(claims, new Date())).token).kid).toBe(newKid);
      // Private halves never appear in the key set.
      for (const k of b.jwks().keys) expect(Object.keys(k)).not.toContain('d');
    });

    it('a retired key leaves the key set and its tokens stop verifying', async () => {
      const a = await createSigningKeys({ prisma, keyring, issuer });
      const before = await a.sign(claims, new Date());
      const beforeKid = decodeProtectedHeader(before.token).kid!;
      await a.rotate(0);
      await a.reload();
      expect(a.jwks().keys.map((k) => k.kid)).not.toContain(beforeKid);
      await expect(a.verify(before.token)).rejects.toThrow();
    });

    it('a replica learns a key rotated elsewhere as soon as it meets its kid', async () => {
      const a = await createSigningKeys({ prisma, keyring, issuer });
      const b = await createSigningKeys({ prisma, keyring, issuer });
      await new Promise((r) => setTimeout(r, 1_100));
      await a.rotate(600);
      const token = (await a.sign(claims, new Date())).token;
      await expect(b.verify(token)).resolves.toMatchObject({ sub: claims.sub });
    });
  },
);
