/**
 * Agent authentication (spec: Agent authentication; Limits "Client assertion validity", per-IP
 * rates): every hostile client assertion and bootstrap attempt is refused with the spec's status
 * and mints nothing; the per-IP limits answer 429 with Retry-After. Each group also has a control
 * that succeeds, so a harness mistake cannot make the refusals pass vacuously. (That an untrusted
 * peer's X-Forwarded-For is ignored is checked in split-processes.test.ts, whose second control
 * plane does not trust the test process as a proxy.)
 */
import { createPublicKey, randomBytes, randomUUID } from 'node:crypto';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/api-client.js';
import {
  assertionFor,
  bootstrapRequest,
  createAgentAs,
  dataPlaneStatus,
  enrolledAgent,
  missingServices,
  newAgentKeys,
  newUser,
  nextIp,
  refusalAfter,
  startIdentityGateway,
  tokenRequestFrom,
  unsignedJwt,
  type IdentityGateway,
  type TestAgent,
  type TestUser,
} from '../support/identity-harness.js';

const skip = missingServices();

function expect429(r: { status: number; headers: Record<string, unknown>; body: unknown; text: string }) {
  expect(r.status, r.text).toBe(429);
  const retryAfter = Number(r.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect((r.body as { retryAfter?: number }).retryAfter).toBe(retryAfter);
}

describe.skipIf(skip)(skip ? `agent authentication (skipped: ${skip})` : 'agent authentication', () => {
  let g: IdentityGateway;
  let owner: TestUser;
  let agent: TestAgent;
  let other: TestAgent;
  let aud: string;

  const tokenCount = async (agentId: string) =>
    (
      await g.sql<{ n: number }>('SELECT count(*)::int AS n FROM agent_access_tokens WHERE agent_id = $1', [
        agentId,
      ])
    )[0]!.n;

  /** 401 with the one generic message (no oracle), and no token minted for the agent. */
  async function expectRefused(assertion: string, forAgent = agent) {
    const before = await tokenCount(forAgent.id);
    const r = await tokenRequestFrom(g.baseUrl, assertion, nextIp());
    expect(r.status, r.text).toBe(401);
    expect(r.body.access_token).toBeUndefined();
    expect(r.body.error).toBe('invalid client assertion');
    expect(await tokenCount(forAgent.id)).toBe(before);
  }

  beforeAll(async () => {
    g = await startIdentityGateway('assert');
    aud = g.baseUrl;
    owner = await newUser(g.baseUrl, 'owner');
    [agent, other] = await Promise.all([enrolledAgent(owner.admin), enrolledAgent(owner.admin)]);
  });
  afterAll(async () => {
    await g?.close();
  });

  describe('token endpoint', () => {
    it('control: a well-formed assertion gets an opaque vltt_ token (not a JWT) valid for 7200 s', async () => {
      const r = await tokenRequestFrom(g.baseUrl, await assertionFor(agent, { audience: aud }), nextIp());
      expect(r.status, r.text).toBe(200);
      expect(r.body.token_type).toBe('Bearer');
      expect(r.body.expires_in).toBe(7200);
      expect(r.body.access_token).toMatch(/^vltt_[A-Za-z0-9_-]+$/);
      expect(r.headers['cache-control']).toBe('no-store');
      expect(await dataPlaneStatus(g.baseUrl, r.body.access_token)).toBe(400);
    });

    it('accepts the grant form-encoded too (spec), with the same checks', async () => {
      const form = async (assertion: string) => {
        const res = await request(`${g.baseUrl}/v1/agents/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': nextIp() },
          body: new URLSearchParams({
            grant_type: 'client_assertion',
            client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
            client_assertion: assertion,
          }).toString(),
        });
        return { status: res.statusCode, body: (await res.body.json()) as { access_token?: string } };
      };
      const ok = await form(await assertionFor(agent, { audience: aud }));
      expect(ok.status).toBe(200);
      expect(ok.body.access_token).toMatch(/^vltt_/);
      expect(
        (await form(await assertionFor(agent, { audience: aud, key: other.keys.privateKey }))).status,
      ).toBe(401);
    });

    it('refuses alg "none" (401)', async () => {
      const now = Math.floor(Date.now() / 1000);
      const claims = { iss: agent.id, sub: agent.id, aud, iat: now, exp: now + 60, jti: randomUUID() };
      await expectRefused(unsignedJwt({ alg: 'none', typ: 'JWT' }, claims));
      // Also with a real ES256 signature left in place: the header alone decides nothing.
      const real = (await assertionFor(agent, { audience: aud })).split('.');
      await expectRefused(unsignedJwt({ alg: 'none', typ: 'JWT' }, claims, real[2]));
    });

    it('refuses HS256 signed with the agent public key as the HMAC secret (401)', async () => {
      const spkiPem = createPublicKey({ key: agent.publicJwk as never, format: 'jwk' }).export({
        type: 'spki',
        format: 'pem',
      });
      for (const secret of [String(spkiPem), JSON.stringify(agent.publicJwk), agent.publicJwk.x!]) {
        const now = Math.floor(Date.now() / 1000);
        const forged = await new SignJWT({ jti: randomUUID() })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
          .setIssuer(agent.id)
          .setSubject(agent.id)
          .setAudience(aud)
          .setIssuedAt(now)
          .setExpirationTime(now + 60)
          .sign(new TextEncoder().encode(secret));
        await expectRefused(forged);
      }
    });

    it("refuses an assertion for one agent signed by another agent's key (401)", async () => {
      await expectRefused(await assertionFor(agent, { audience: aud, key: other.keys.privateKey }));
    });

    it('refuses ECDSA signatures with r = 0 or s = 0 (401)', async () => {
      const [h, p, sig] = (await assertionFor(agent, { audience: aud })).split('.');
      const raw = Buffer.from(sig!, 'base64url');
      expect(raw.length).toBe(64);
      const zero = Buffer.alloc(32);
      const variants = [
        Buffer.concat([zero, raw.subarray(32)]), // r = 0
        Buffer.concat([raw.subarray(0, 32), zero]), // s = 0
        Buffer.alloc(64), // r = s = 0
      ];
      for (const v of variants) await expectRefused(`${h}.${p}.${v.toString('base64url')}`);
    });

    it('refuses an expired assertion (401)', async () => {
      const now = Math.floor(Date.now() / 1000);
      await expectRefused(
        await assertionFor(agent, { audience: aud, claims: { iat: now - 130, exp: now - 70 } }),
      );
    });

    it('refuses exp more than 60 s after iat, and exp not after iat (401); exactly 60 s is accepted', async () => {
      const now = Math.floor(Date.now() / 1000);
      await expectRefused(await assertionFor(agent, { audience: aud, claims: { iat: now, exp: now + 61 } }));
      await expectRefused(
        await assertionFor(agent, { audience: aud, claims: { iat: now, exp: now + 3600 } }),
      );
      await expectRefused(
        await assertionFor(agent, { audience: aud, claims: { iat: now + 10, exp: now + 10 } }),
      );
      const ok = await tokenRequestFrom(
        g.baseUrl,
        await assertionFor(agent, { audience: aud, claims: { iat: now, exp: now + 60 } }),
        nextIp(),
      );
      expect(ok.status, ok.text).toBe(200);
    });

    it('refuses iat in the future beyond a small skew (401); a few seconds of skew is tolerated', async () => {
      const now = Math.floor(Date.now() / 1000);
      await expectRefused(
        await assertionFor(agent, { audience: aud, claims: { iat: now + 120, exp: now + 180 } }),
      );
      await expectRefused(
        await assertionFor(agent, { audience: aud, claims: { iat: now + 3600, exp: now + 3660 } }),
      );
      const ok = await tokenRequestFrom(
        g.baseUrl,
        await assertionFor(agent, { audience: aud, claims: { iat: now + 3, exp: now + 60 } }),
        nextIp(),
      );
      expect(ok.status, ok.text).toBe(200);
    });

    it('refuses a wrong audience (401)', async () => {
      await expectRefused(await assertionFor(agent, { audience: 'https://attacker.example' }));
      await expectRefused(await assertionFor(agent, { audience: `${aud}/v1/agents/token` }));
      await expectRefused(await assertionFor(agent, { audience: 'api' }));
    });

    it('refuses iss different from sub (401)', async () => {
      await expectRefused(await assertionFor(agent, { audience: aud, claims: { iss: other.id } }));
      await expectRefused(await assertionFor(agent, { audience: aud, claims: { sub: other.id } }));
      // Signed by the other agent, naming it as issuer but us as subject: still no.
      await expectRefused(await assertionFor(other, { audience: aud, claims: { sub: agent.id } }), other);
    });

    it('refuses a missing or empty jti, iat or exp (401)', async () => {
      await expectRefused(await assertionFor(agent, { audience: aud, claims: { jti: undefined } }));
      await expectRefused(await assertionFor(agent, { audience: aud, claims: { jti: '' } }));
      await expectRefused(await assertionFor(agent, { audience: aud, claims: { iat: undefined } }));
      await expectRefused(await assertionFor(agent, { audience: aud, claims: { exp: undefined } }));
    });

    it('refuses the same jti a second time (401)', async () => {
      const jti = randomUUID();
      const first = await tokenRequestFrom(
        g.baseUrl,
        await assertionFor(agent, { audience: aud, claims: { jti } }),
        nextIp(),
      );
      expect(first.status, first.text).toBe(200);
      // Same assertion replayed, and a freshly signed one reusing the jti.
      const replay = await tokenRequestFrom(
        g.baseUrl,
        await assertionFor(agent, { audience: aud, claims: { jti } }),
        nextIp(),
      );
      expect(replay.status, replay.text).toBe(401);
    });

    it('lets exactly one of 8 concurrent copies of one assertion through (one process)', async () => {
      const assertion = await assertionFor(agent, { audience: aud });
      const before = await tokenCount(agent.id);
      const results = await Promise.all(
        Array.from({ length: 8 }, () => tokenRequestFrom(g.baseUrl, assertion, nextIp())),
      );
      expect(results.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401, 401, 401, 401]);
      expect(await tokenCount(agent.id)).toBe(before + 1);
    });

    it('ignores jku / jwk / x5u headers pointing at another key: signed by that key, refused (401)', async () => {
      const attacker = await generateKeyPair('ES256', { extractable: true });
      const attackerJwk = await exportJWK(attacker.publicKey);
      const header = {
        jwk: attackerJwk,
        jku: 'https://attacker.example/jwks.json',
        x5u: 'https://attacker.example/cert.pem',
        kid: 'attacker',
      };
      await expectRefused(await assertionFor(agent, { audience: aud, header, key: attacker.privateKey }));
      // The same headers on an assertion signed by the enrolled key change nothing: accepted.
      const ok = await tokenRequestFrom(
        g.baseUrl,
        await assertionFor(agent, { audience: aud, header }),
        nextIp(),
      );
      expect(ok.status, ok.text).toBe(200);
    });

    it('refuses garbage and non-JWT assertions (401), and malformed grant bodies (400)', async () => {
      for (const junk of [
        'not-a-jwt',
        'a.b.c',
        `${agent.id}`,
        unsignedJwt({ alg: 'ES256' }, { iss: agent.id }),
      ])
        await expectRefused(junk);
      const bad = await http('POST', `${g.baseUrl}/v1/agents/token`, {
        headers: { 'x-forwarded-for': nextIp() },
        json: { grant_type: 'password', client_assertion_type: 'x', client_assertion: 'y' },
      });
      expect(bad.status).toBe(400);
    });

    it('refuses a disabled agent (401) and its existing token everywhere; a deleted agent likewise', async () => {
      const a = await enrolledAgent(owner.admin);
      const token = (await tokenRequestFrom(g.baseUrl, await assertionFor(a, { audience: aud }), nextIp()))
        .body.access_token;
      expect(await dataPlaneStatus(g.baseUrl, token)).toBe(400);
      const dis = await http('POST', `${g.baseUrl}/v1/agents/${a.id}/disable`, {
        headers: owner.admin.headers,
      });
      expect(dis.status, dis.text).toBe(200);
      const disabledAt = performance.now();
      await expectRefused(await assertionFor(a, { audience: aud }), a);
      // The data plane learns of revocations by push: the spec allows it 1 s.
      expect((await refusalAfter(g.baseUrl, token, disabledAt)).status).toBe(401);

      const d = await enrolledAgent(owner.admin);
      const dToken = (await tokenRequestFrom(g.baseUrl, await assertionFor(d, { audience: aud }), nextIp()))
        .body.access_token;
      expect(await dataPlaneStatus(g.baseUrl, dToken)).toBe(400);
      const del = await http('DELETE', `${g.baseUrl}/v1/agents/${d.id}`, { headers: owner.admin.headers });
      expect(del.status, del.text).toBe(200);
      expect((await refusalAfter(g.baseUrl, dToken, performance.now())).status).toBe(401);
      const again = await tokenRequestFrom(g.baseUrl, await assertionFor(d, { audience: aud }), nextIp());
      expect(again.status).toBe(401);
    });
  });

  describe('bootstrap', () => {
    const status = async (agentId: string) =>
      (
        await g.sql<{ status: string }>('SELECT status::text AS status FROM agents WHERE id = $1', [agentId])
      )[0]?.status;

    it('refuses an unknown bootstrap secret (401)', async () => {
      const { publicJwk } = await newAgentKeys();
      const r = await bootstrapRequest(
        g.baseUrl,
        `vltb_${randomBytes(32).toString('base64url')}`,
        publicJwk,
        nextIp(),
      );
      expect(r.status, r.text).toBe(401);
    });

    it('refuses a consumed secret (401) and keeps the enrolled key', async () => {
      const a = await enrolledAgent(owner.admin);
      const { keys, publicJwk } = await newAgentKeys();
      const r = await bootstrapRequest(g.baseUrl, a.bootstrapSecret, publicJwk, nextIp());
      expect(r.status, r.text).toBe(401);
      // The thief's key was not registered; the enrolled one still works.
      await expectRefused(await assertionFor(a, { audience: aud, key: keys.privateKey }), a);
      const ok = await tokenRequestFrom(g.baseUrl, await assertionFor(a, { audience: aud }), nextIp());
      expect(ok.status, ok.text).toBe(200);
    });

    it('refuses an expired secret (401); the agent stays created', async () => {
      const created = await createAgentAs(owner.admin);
      await g.sql(
        `UPDATE bootstrap_secrets SET expires_at = now() - interval '1 second' WHERE agent_id = $1`,
        [created.agent.id],
      );
      const { publicJwk } = await newAgentKeys();
      const r = await bootstrapRequest(g.baseUrl, created.bootstrapSecret, publicJwk, nextIp());
      expect(r.status, r.text).toBe(401);
      expect(await status(created.agent.id)).toBe('created');
    });

    it('refuses a secret superseded by a newer one (401)', async () => {
      const created = await createAgentAs(owner.admin);
      const fresh = await http<{ bootstrapSecret: string }>(
        'POST',
        `${g.baseUrl}/v1/agents/${created.agent.id}/bootstrap-secret`,
        {
          headers: owner.admin.headers,
        },
      );
      expect(fresh.status, fresh.text).toBe(200);
      const { publicJwk } = await newAgentKeys();
      expect((await bootstrapRequest(g.baseUrl, created.bootstrapSecret, publicJwk, nextIp())).status).toBe(
        401,
      );
      expect(
        (await bootstrapRequest(g.baseUrl, fresh.body.bootstrapSecret, publicJwk, nextIp())).status,
      ).toBe(200);
    });

    it('enrols exactly once when one secret is raced with two keys', async () => {
      const created = await createAgentAs(owner.admin);
      const [k1, k2] = await Promise.all([newAgentKeys(), newAgentKeys()]);
      const rs = await Promise.all(
        [k1, k2].map((k) => bootstrapRequest(g.baseUrl, created.bootstrapSecret, k.publicJwk, nextIp())),
      );
      expect(rs.map((r) => r.status).sort()).toEqual([200, 401]);
    });

    it('refuses a JWK on the wrong curve, with private parts, or malformed (400), and does not burn the secret', async () => {
      const created = await createAgentAs(owner.admin);
      const p384 = await exportJWK((await generateKeyPair('ES384', { extractable: true })).publicKey);
      const withD = await exportJWK((await generateKeyPair('ES256', { extractable: true })).privateKey);
      const rsa = await exportJWK((await generateKeyPair('RS256', { extractable: true })).publicKey);
      const { publicJwk } = await newAgentKeys();
      const notOnCurve = { ...publicJwk, y: Buffer.alloc(32, 7).toString('base64url') };
      const bad: [string, unknown][] = [
        ['P-384 key', p384],
        ['P-384 key labelled P-256', { ...p384, crv: 'P-256' }],
        ['private JWK with d', withD],
        ['RSA key', rsa],
        ['point not on the curve', notOnCurve],
        ['short x', { ...publicJwk, x: publicJwk.x!.slice(0, 20) }],
        ['missing y', { kty: 'EC', crv: 'P-256', x: publicJwk.x }],
        ['symmetric key', { kty: 'oct', k: randomBytes(32).toString('base64url') }],
        ['not an object', 'BEGIN PUBLIC KEY'],
        ['absent', undefined],
      ];
      for (const [label, key] of bad) {
        const r = await bootstrapRequest(g.baseUrl, created.bootstrapSecret, key, nextIp());
        expect(r.status, `${label}: ${r.text}`).toBe(400);
      }
      expect(await status(created.agent.id)).toBe('created');
      // None of the refusals consumed the secret.
      const ok = await bootstrapRequest(g.baseUrl, created.bootstrapSecret, publicJwk, nextIp());
      expect(ok.status, ok.text).toBe(200);
      expect(ok.body.status).toBe('active');
    });

    it('refuses a secret without the vltb_ prefix (400) and a missing secret (400)', async () => {
      const { publicJwk } = await newAgentKeys();
      expect(
        (await bootstrapRequest(g.baseUrl, `vltp_${randomBytes(16).toString('hex')}`, publicJwk, nextIp()))
          .status,
      ).toBe(400);
      const r = await http('POST', `${g.baseUrl}/v1/agents/bootstrap`, {
        headers: { 'x-forwarded-for': nextIp() },
        json: { publicKey: publicJwk },
      });
      expect(r.status).toBe(400);
    });
  });

  describe('per-IP limits', () => {
    /** Fixed one-minute windows: start a burst with enough of the window left that it cannot straddle an edge. */
    async function roomyMinute(needSeconds = 3) {
      const left = 60_000 - (Date.now() % 60_000);
      if (left < needSeconds * 1000) await new Promise((r) => setTimeout(r, left + 50));
    }
    const garbageBootstrap = (ip: string) =>
      http<{ retryAfter?: number }>('POST', `${g.baseUrl}/v1/agents/bootstrap`, {
        headers: { 'x-forwarded-for': ip },
        json: {},
      });
    const garbageToken = (ip: string) =>
      http<{ retryAfter?: number }>('POST', `${g.baseUrl}/v1/agents/token`, {
        headers: { 'x-forwarded-for': ip },
        json: { grant_type: 'client_assertion' },
      });

    it('bootstrap: the 6th request in a minute from one address gets 429 with Retry-After; another address does not', async () => {
      await roomyMinute();
      const ip = nextIp();
      // Requests are counted before validation: garbage counts too.
      for (let i = 0; i < 5; i++) expect((await garbageBootstrap(ip)).status).toBe(400);
      expect429(await garbageBootstrap(ip));
      // A valid request from the limited address is refused as well.
      const created = await createAgentAs(owner.admin);
      const { publicJwk } = await newAgentKeys();
      expect429(await bootstrapRequest(g.baseUrl, created.bootstrapSecret, publicJwk, ip));
      expect((await bootstrapRequest(g.baseUrl, created.bootstrapSecret, publicJwk, nextIp())).status).toBe(
        200,
      );
    });

    it('token: the 31st request in a minute from one address gets 429 with Retry-After; another address does not', async () => {
      await roomyMinute();
      const ip = nextIp();
      const first = await Promise.all(Array.from({ length: 30 }, () => garbageToken(ip)));
      expect(first.map((r) => r.status)).toEqual(Array(30).fill(400));
      expect429(await tokenRequestFrom(g.baseUrl, await assertionFor(agent, { audience: aud }), ip));
      expect(
        (await tokenRequestFrom(g.baseUrl, await assertionFor(agent, { audience: aud }), nextIp())).status,
      ).toBe(200);
      // The limits are per endpoint: the token-limited address can still bootstrap.
      expect((await garbageBootstrap(ip)).status).toBe(400);
    });

    const tokenHits = async (ip: string) =>
      (
        await g.sql<{ n: number }>(
          "SELECT coalesce(sum(count), 0)::int AS n FROM rate_limit_counters WHERE key = 'agent-token:' || $1",
          [ip],
        )
      )[0]!.n;

    // The issuing statement counts the hit itself (ADR 0066): these fail if a path skips it.
    it('token: tokens issued count against the address; past the limit a valid assertion mints nothing and stays unused', async () => {
      await roomyMinute(10);
      const ip = nextIp();
      const issued = await Promise.all(
        Array.from({ length: 30 }, async () =>
          tokenRequestFrom(g.baseUrl, await assertionFor(agent, { audience: aud }), ip),
        ),
      );
      expect(issued.map((r) => r.status)).toEqual(Array(30).fill(200));
      expect(await tokenHits(ip)).toBe(30);
      const before = await tokenCount(agent.id);
      const held = await assertionFor(agent, { audience: aud });
      expect429(await tokenRequestFrom(g.baseUrl, held, ip));
      expect(await tokenCount(agent.id)).toBe(before);
      // Its jti was not consumed: from an address under the limit it is still good, once.
      expect((await tokenRequestFrom(g.baseUrl, held, nextIp())).status).toBe(200);
      expect((await tokenRequestFrom(g.baseUrl, held, nextIp())).status).toBe(401);
    });

    it('token: refused assertions count too (bad signature, replay), then even a valid one gets 429', async () => {
      await roomyMinute(10);
      const ip = nextIp();
      const forged = await Promise.all(
        Array.from({ length: 20 }, () => assertionFor(agent, { audience: aud, key: other.keys.privateKey })),
      );
      const replayed = await assertionFor(agent, { audience: aud });
      expect((await tokenRequestFrom(g.baseUrl, replayed, nextIp())).status).toBe(200);
      const refused = await Promise.all([
        ...forged.map((a) => tokenRequestFrom(g.baseUrl, a, ip)),
        ...Array.from({ length: 10 }, () => tokenRequestFrom(g.baseUrl, replayed, ip)),
      ]);
      expect(refused.map((r) => r.status)).toEqual(Array(30).fill(401));
      expect(await tokenHits(ip)).toBe(30);
      expect429(await tokenRequestFrom(g.baseUrl, await assertionFor(agent, { audience: aud }), ip));
    });

    it('token: once over, an address is refused from memory for the rest of its window (nothing more is counted)', async () => {
      await roomyMinute(10);
      const ip = nextIp();
      await Promise.all(Array.from({ length: 31 }, () => garbageToken(ip)));
      expect(await tokenHits(ip)).toBe(31);
      for (let i = 0; i < 5; i++) expect429(await garbageToken(ip));
      expect429(await tokenRequestFrom(g.baseUrl, await assertionFor(agent, { audience: aud }), ip));
      expect(await tokenHits(ip)).toBe(31);
    });
  });
});
