/**
 * User credentials (spec: Authentication; Session token exchange and key set; API access JWT
 * claims; Personal access tokens; docs/threat-model-identity.md): forged or stale API JWTs, expired
 * and revoked PATs, and credentials presented where they do not belong are refused with 401;
 * the PAT routes behave as the spec says; sign-in failures are rate limited per address and per
 * account; sessions are listed and revoked by their owner and sign-out ends them server-side;
 * the token exchange narrows scopes to the role held in the target workspace.
 *
 * API JWT expiry: a client cannot obtain an expired token signed by a key in the JWKS, and the
 * gateway has no controllable clock. So expiry is covered three ways: a real token's exp − iat
 * is decoded and must be 300 s; an expired token forged with an unknown key is refused; and,
 * white-box, the test unseals the gateway's real signing key with the master key it gave the
 * gateway and signs an expired token with it (plus a positive control signed the same way).
 *
 * Every sign-up and sign-in costs one scrypt (~0.3 s here), so users are shared where a test
 * does not need a fresh account.
 */
import { createPublicKey, randomBytes, randomUUID } from 'node:crypto';
import { generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectStatus, http, sessionFrom, type Admin } from '../support/api-client.js';
import {
  agentToken,
  apiJwtFor,
  bearer,
  decodeJwtParts,
  enrolledAgent,
  exchange,
  fromIp,
  joinAs,
  missingServices,
  newUser,
  nextIp,
  realSigningKey,
  signApiJwt,
  signInRequest,
  startIdentityGateway,
  unsignedJwt,
  type IdentityGateway,
  type TestUser,
} from '../support/identity-harness.js';

const skip = missingServices();

/**
 * The limiter counts in fixed windows aligned to the clock. A burst that straddles a window
 * edge would see its count reset, so it starts in a window with enough time left.
 */
async function startOfRoomyWindow(windowSeconds: number, needSeconds: number) {
  const ms = windowSeconds * 1000;
  const left = ms - (Date.now() % ms);
  if (left < needSeconds * 1000) await new Promise((r) => setTimeout(r, left + 50));
}

function expectRetryAfter(
  r: { status: number; headers: Record<string, unknown>; body: unknown; text: string },
  maxSeconds: number,
) {
  expect(r.status, r.text).toBe(429);
  const header = Number(r.headers['retry-after']);
  expect(Number.isInteger(header)).toBe(true);
  expect(header).toBeGreaterThanOrEqual(1);
  expect(header).toBeLessThanOrEqual(maxSeconds);
  expect((r.body as { retryAfter?: number }).retryAfter).toBe(header);
}

interface PatBody {
  token: { id: string; name: string; expiresAt: string; createdAt: string; isExpired: boolean };
  plainToken: string;
}

describe.skipIf(skip)(skip ? `user credentials (skipped: ${skip})` : 'user credentials', () => {
  let g: IdentityGateway;
  /** Owns the workspace the exchange tests join; also the "some other account" of several tests. */
  let owner: TestUser;
  let victim: TestUser;
  let lister: TestUser;
  let viewerUser: TestUser;
  let memberUser: TestUser;
  let leaver: TestUser;

  const withKey = (pat: string): Admin => ({
    base: g.baseUrl,
    headers: { 'x-api-key': pat, ...fromIp(nextIp()) },
  });
  const listAgents = (a: Admin) => http('GET', `${g.baseUrl}/v1/agents`, { headers: a.headers });
  const createPat = (a: Admin, json: unknown) =>
    http<PatBody>('POST', `${g.baseUrl}/v1/tokens`, { headers: a.headers, json });

  beforeAll(async () => {
    g = await startIdentityGateway('creds');
    const users = await Promise.all(
      ['owner', 'victim', 'lister', 'viewer', 'member', 'leaver'].map((tag) => newUser(g.baseUrl, tag)),
    );
    [owner, victim, lister, viewerUser, memberUser, leaver] = users as [
      TestUser,
      TestUser,
      TestUser,
      TestUser,
      TestUser,
      TestUser,
    ];
  });
  afterAll(async () => {
    await g?.close();
  });

  describe('API JWT', () => {
    /** Claims exactly like the gateway's own, for forgeries that differ in one point only. */
    function claimsLike(token: string, override: Record<string, unknown> = {}): Record<string, unknown> {
      return { ...decodeJwtParts(token).payload, jti: randomUUID(), ...override };
    }

    it('control: the real token is RS256 with a kid from the JWKS, audience api, and lives exactly 300 s', async () => {
      const { header, payload } = decodeJwtParts(owner.jwt);
      const jwks = await http<{ keys: { kid: string; kty: string; d?: string }[] }>(
        'GET',
        `${g.baseUrl}/.well-known/jwks.json`,
      );
      expect(jwks.status).toBe(200);
      expect(header.alg).toBe('RS256');
      expect(jwks.body.keys.map((k) => k.kid)).toContain(header.kid);
      expect(jwks.body.keys.every((k) => k.d === undefined)).toBe(true);
      expect(payload).toMatchObject({
        iss: g.baseUrl,
        aud: 'api',
        sub: owner.id,
        wid: owner.workspaceId,
        roles: ['owner'],
      });
      expect(typeof payload.sid).toBe('string');
      expect(typeof payload.jti).toBe('string');
      expect(Number(payload.exp) - Number(payload.iat)).toBe(300);
      expect((await listAgents(owner.admin)).status).toBe(200);
    });

    it('refuses a token forged with another RSA key under the real kid, and under an unknown kid (401)', async () => {
      const mine = await generateKeyPair('RS256', { extractable: true });
      const realKid = String(decodeJwtParts(owner.jwt).header.kid);
      for (const kid of [realKid, randomUUID()]) {
        const forged = await signApiJwt({ kid, privateKey: mine.privateKey }, claimsLike(owner.jwt));
        expect((await listAgents(bearer(g.baseUrl, forged))).status).toBe(401);
      }
    });

    it('refuses a token with a wrong issuer, forged with an unknown key (401)', async () => {
      const mine = await generateKeyPair('RS256', { extractable: true });
      const forged = await signApiJwt(
        { kid: randomUUID(), privateKey: mine.privateKey },
        claimsLike(owner.jwt, { iss: 'https://attacker.example' }),
      );
      expect((await listAgents(bearer(g.baseUrl, forged))).status).toBe(401);
    });

    it('refuses a real token whose payload was tampered with (401)', async () => {
      const [h, , s] = owner.jwt.split('.');
      const { payload } = decodeJwtParts(owner.jwt);
      const tampered = [
        { ...payload, roles: ['owner', 'admin'], scp: [...(payload.scp as string[]), 'admin'] },
        { ...payload, wid: randomUUID() },
        { ...payload, exp: Number(payload.exp) + 86_400 },
      ];
      for (const p of tampered) {
        const t = `${h}.${Buffer.from(JSON.stringify(p)).toString('base64url')}.${s}`;
        expect((await listAgents(bearer(g.baseUrl, t))).status).toBe(401);
      }
    });

    it('refuses alg none and HS256 keyed with the published RSA public key (401)', async () => {
      const { header } = decodeJwtParts(owner.jwt);
      expect(
        (
          await listAgents(
            bearer(g.baseUrl, unsignedJwt({ alg: 'none', kid: header.kid }, claimsLike(owner.jwt))),
          )
        ).status,
      ).toBe(401);
      const jwks = await http<{ keys: Record<string, unknown>[] }>(
        'GET',
        `${g.baseUrl}/.well-known/jwks.json`,
      );
      const pub = jwks.body.keys.find((k) => k.kid === header.kid)!;
      const pem = String(
        createPublicKey({ key: pub as never, format: 'jwk' }).export({ type: 'spki', format: 'pem' }),
      );
      const hs = await signApiJwt(
        { kid: String(header.kid), privateKey: new TextEncoder().encode(pem) },
        claimsLike(owner.jwt),
        'HS256',
      );
      expect((await listAgents(bearer(g.baseUrl, hs))).status).toBe(401);
    });

    it('refuses an expired token forged with an unknown key (401)', async () => {
      const mine = await generateKeyPair('RS256', { extractable: true });
      const now = Math.floor(Date.now() / 1000);
      const forged = await signApiJwt(
        { kid: randomUUID(), privateKey: mine.privateKey },
        claimsLike(owner.jwt, { iat: now - 900, exp: now - 600 }),
      );
      expect((await listAgents(bearer(g.baseUrl, forged))).status).toBe(401);
    });

    it('white-box, with the real signing key: the control passes; expired, wrong issuer, wrong audience, no sid are refused (401)', async () => {
      const key = await realSigningKey(g, String(decodeJwtParts(owner.jwt).header.kid));
      const now = Math.floor(Date.now() / 1000);
      const good = await signApiJwt(key, claimsLike(owner.jwt, { iat: now, exp: now + 300 }));
      expect((await listAgents(bearer(g.baseUrl, good))).status).toBe(200);
      const bad: [string, Record<string, unknown>][] = [
        ['expired', { iat: now - 900, exp: now - 600 }],
        ['wrong issuer', { iss: 'https://attacker.example' }],
        ['wrong audience', { aud: 'agents' }],
        ['no sid', { sid: undefined }],
        ['unknown session', { sid: randomUUID() }],
      ];
      for (const [label, over] of bad) {
        const claims = claimsLike(owner.jwt, { iat: now, exp: now + 300, ...over });
        for (const k of Object.keys(claims)) if (claims[k] === undefined) delete claims[k];
        const r = await listAgents(bearer(g.baseUrl, await signApiJwt(key, claims)));
        expect(r.status, `${label}: ${r.text}`).toBe(401);
      }
    });

    it('refuses a missing, malformed or non-Bearer Authorization header (401)', async () => {
      for (const authorization of [
        undefined,
        'Bearer',
        'Basic dXNlcjpwYXNz',
        `Token ${owner.jwt}`,
        'Bearer a b',
      ]) {
        const r = await http('GET', `${g.baseUrl}/v1/agents`, {
          headers: authorization ? { authorization } : {},
        });
        expect(r.status, `${authorization}: ${r.text}`).toBe(401);
      }
    });
  });

  describe('personal access tokens', () => {
    it('validates expiresInDays: 0, 91, 1.5 and "30" are 400; the default is 30 days', async () => {
      for (const expiresInDays of [0, 91, 1.5, -1, '30']) {
        const r = await createPat(owner.admin, { name: 'bad', expiresInDays });
        expect(r.status, `${JSON.stringify(expiresInDays)}: ${r.text}`).toBe(400);
      }
      const r = await createPat(owner.admin, { name: 'default' });
      expect(r.status, r.text).toBe(201);
      expect(r.body.plainToken).toMatch(/^vltp_/);
      expect(r.body.token.isExpired).toBe(false);
      const days = (Date.parse(r.body.token.expiresAt) - Date.parse(r.body.token.createdAt)) / 86_400_000;
      expect(Math.abs(days - 30)).toBeLessThan(0.001);
      for (const d of [1, 90])
        expect((await createPat(owner.admin, { name: `d${d}`, expiresInDays: d })).status).toBe(201);
    });

    it('stores only the hash and never lists a plain token', async () => {
      const created = await createPat(owner.admin, { name: 'secret-check', expiresInDays: 7 });
      expect(created.status).toBe(201);
      const plain = created.body.plainToken;
      const list = await http<{ tokens: Record<string, unknown>[] }>('GET', `${g.baseUrl}/v1/tokens`, {
        headers: owner.admin.headers,
      });
      expect(list.status).toBe(200);
      expect(list.text).not.toContain(plain);
      expect(list.text).not.toContain(plain.slice(5));
      const item = list.body.tokens.find((t) => t.id === created.body.token.id);
      expect(Object.keys(item!).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'isExpired', 'name']);
      const rows = await g.sql<{ token_hash: string }>(
        'SELECT token_hash FROM personal_access_tokens WHERE id = $1',
        [created.body.token.id],
      );
      expect(rows[0]!.token_hash).not.toContain(plain.slice(5));
      expect(JSON.stringify(rows)).not.toContain(plain);
    });

    it('DELETE revokes at once (401 on the next call) and hides the token from the list', async () => {
      const created = await createPat(owner.admin, { name: 'to-revoke', expiresInDays: 7 });
      const pat = withKey(created.body.plainToken);
      expect((await listAgents(pat)).status).toBe(200);
      const del = await http('DELETE', `${g.baseUrl}/v1/tokens/${created.body.token.id}`, {
        headers: owner.admin.headers,
      });
      expect(del.status, del.text).toBe(200);
      expect(del.body).toMatchObject({ revoked: true, id: created.body.token.id });
      expect((await listAgents(pat)).status).toBe(401);
      const list = await http<{ tokens: { id: string }[] }>('GET', `${g.baseUrl}/v1/tokens`, {
        headers: owner.admin.headers,
      });
      expect(list.body.tokens.map((t) => t.id)).not.toContain(created.body.token.id);
      expect(
        (
          await http('DELETE', `${g.baseUrl}/v1/tokens/${created.body.token.id}`, {
            headers: owner.admin.headers,
          })
        ).status,
      ).toBe(404);
    });

    it('PUT renames; an empty name is 400', async () => {
      const created = await createPat(owner.admin, { name: 'before', expiresInDays: 7 });
      const put = await http<{ token: { name: string } }>(
        'PUT',
        `${g.baseUrl}/v1/tokens/${created.body.token.id}`,
        {
          headers: owner.admin.headers,
          json: { name: 'after' },
        },
      );
      expect(put.status, put.text).toBe(200);
      expect(put.body.token.name).toBe('after');
      const list = await http<{ tokens: { id: string; name: string }[] }>('GET', `${g.baseUrl}/v1/tokens`, {
        headers: owner.admin.headers,
      });
      expect(list.body.tokens.find((t) => t.id === created.body.token.id)?.name).toBe('after');
      const empty = await http('PUT', `${g.baseUrl}/v1/tokens/${created.body.token.id}`, {
        headers: owner.admin.headers,
        json: { name: ' ' },
      });
      expect(empty.status).toBe(400);
      // Renaming does not change what the token can do.
      expect((await listAgents(withKey(created.body.plainToken))).status).toBe(200);
    });

    it('refuses an expired PAT (401) and lists it as expired', async () => {
      const created = await createPat(owner.admin, { name: 'expiring', expiresInDays: 1 });
      const pat = withKey(created.body.plainToken);
      expect((await listAgents(pat)).status).toBe(200);
      await g.sql(
        `UPDATE personal_access_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`,
        [created.body.token.id],
      );
      expect((await listAgents(pat)).status).toBe(401);
      const list = await http<{ tokens: { id: string; isExpired: boolean }[] }>(
        'GET',
        `${g.baseUrl}/v1/tokens`,
        { headers: owner.admin.headers },
      );
      expect(list.body.tokens.find((t) => t.id === created.body.token.id)?.isExpired).toBe(true);
    });

    it('refuses an unknown PAT and a PAT without its prefix (401)', async () => {
      const created = await createPat(owner.admin, { name: 'prefix', expiresInDays: 1 });
      expect((await listAgents(withKey(`vltp_${randomUUID().replace(/-/g, '')}`))).status).toBe(401);
      expect((await listAgents(withKey(created.body.plainToken.slice(5)))).status).toBe(401);
    });

    it('a PAT created with narrowed scopes cannot mint itself a wider PAT', async () => {
      const narrow = await createPat(owner.admin, {
        name: 'read-only',
        expiresInDays: 1,
        scopes: ['api:read'],
      });
      expect(narrow.status, narrow.text).toBe(201);
      const ro = withKey(narrow.body.plainToken);
      expect((await listAgents(ro)).status).toBe(200);
      expect(
        (await http('POST', `${g.baseUrl}/v1/agents`, { headers: ro.headers, json: { name: 'x' } })).status,
      ).toBe(403);
      // Escalation attempt: the read-only PAT asks for a new PAT with no scope list (= all of the role's).
      const child = await createPat(ro, { name: 'escalated', expiresInDays: 1 });
      if (child.status === 201) {
        const wide = withKey(child.body.plainToken);
        const write = await http('POST', `${g.baseUrl}/v1/agents`, {
          headers: wide.headers,
          json: { name: 'escalated' },
        });
        expect(write.status, 'a PAT minted by a read-only PAT must not be able to write').toBe(403);
      } else {
        expect([400, 403]).toContain(child.status);
      }
    });

    it('a narrowed API JWT (token exchange) cannot mint a wider PAT either', async () => {
      const narrow = expectStatus(await exchange(owner.admin, owner.workspaceId, ['api:read']), 200).body
        .accessToken;
      const as = bearer(g.baseUrl, narrow);
      expect(
        (await http('POST', `${g.baseUrl}/v1/agents`, { headers: as.headers, json: { name: 'x' } })).status,
      ).toBe(403);
      const child = await createPat(as, { name: 'from-narrow-jwt', expiresInDays: 1 });
      if (child.status === 201) {
        const write = await http('POST', `${g.baseUrl}/v1/agents`, {
          headers: withKey(child.body.plainToken).headers,
          json: { name: 'escalated' },
        });
        expect(write.status, 'a PAT minted by a read-only JWT must not be able to write').toBe(403);
      } else {
        expect([400, 403]).toContain(child.status);
      }
    });
  });

  describe('credentials where they do not belong', () => {
    it('refuses an agent token sent as X-API-Key, and a PAT sent as a bearer token (401), on both planes', async () => {
      const agent = await enrolledAgent(owner.admin);
      const token = await agentToken(g.baseUrl, agent);
      const pat = (await createPat(owner.admin, { name: 'misuse', expiresInDays: 1 })).body.plainToken;
      expect((await listAgents({ base: g.baseUrl, headers: { 'x-api-key': token } })).status).toBe(401);
      expect((await listAgents(bearer(g.baseUrl, pat))).status).toBe(401);
      const dp = (headers: Record<string, string>) =>
        http('POST', `${g.baseUrl}/v1/vault/execute`, { headers, json: { model: 'B' } });
      expect((await dp({ authorization: `Bearer ${pat}` })).status).toBe(401);
      expect((await dp({ 'x-api-key': pat })).status).toBe(401);
      expect((await dp({ authorization: `Bearer ${owner.jwt}` })).status).toBe(401);
      expect((await dp({ 'x-api-key': token })).status).toBe(401);
    });

    it('refuses a bootstrap secret as a bearer token, and two credentials at once (401)', async () => {
      const created = await http<{ bootstrapSecret: string }>('POST', `${g.baseUrl}/v1/agents`, {
        headers: owner.admin.headers,
        json: { name: 'b' },
      });
      expect((await listAgents(bearer(g.baseUrl, created.body.bootstrapSecret))).status).toBe(401);
      const pat = (await createPat(owner.admin, { name: 'two', expiresInDays: 1 })).body.plainToken;
      const both = await http('GET', `${g.baseUrl}/v1/agents`, {
        headers: { authorization: `Bearer ${owner.jwt}`, 'x-api-key': pat },
      });
      expect(both.status).toBe(401);
    });

    it('refuses a PAT at the token exchange (403: needs a session-bound token)', async () => {
      const pat = (await createPat(owner.admin, { name: 'exchange', expiresInDays: 1 })).body.plainToken;
      const r = await exchange(withKey(pat), owner.workspaceId);
      expect(r.status, r.text).toBe(403);
    });
  });

  it('the session token endpoint refuses a missing or forged session cookie (401)', async () => {
    const r = await http('POST', `${g.baseUrl}/api/auth/token`, { headers: fromIp(nextIp()) });
    expect(r.status).toBe(401);
    const bogus = await http('POST', `${g.baseUrl}/api/auth/token`, {
      headers: { cookie: 'vlt_session=forged', ...fromIp(nextIp()) },
    });
    expect(bogus.status).toBe(401);
  });

  describe('sign-in rate limits', () => {
    it('regression: wrong passwords from many addresses never lock the owner out (security review, class 11)', async () => {
      await startOfRoomyWindow(900, 20);
      // The review's attack: wrong passwords for one account from 12 addresses. It used to lock
      // the real user out for 15 minutes. Every attacking address is throttled instead.
      const ips = Array.from({ length: 12 }, () => nextIp());
      const results = await Promise.all(
        ips.map((ip, i) => signInRequest(g.baseUrl, victim.email, `burst-wrong-${i}-pw`, ip)),
      );
      expect(results.map((r) => r.status)).toEqual(Array(12).fill(401));
      // The owner, from the address they signed up from, gets in at once.
      const mine = await signInRequest(g.baseUrl, victim.email, victim.password, victim.ip);
      expect(mine.status).toBe(200);
      expect(mine.headers['set-cookie']).toBeDefined();
      // From an address never used before, too: slowed down past the account's threshold, not refused.
      expect(
        (await signInRequest(g.baseUrl, ` ${victim.email.toUpperCase()} `, victim.password, nextIp())).status,
      ).toBe(200);
    });

    it('per account and address: 5 failures block that address for that account only', async () => {
      await startOfRoomyWindow(900, 20);
      const target = await newUser(g.baseUrl, 'pair');
      const attacker = nextIp();
      const failures = [];
      for (let i = 0; i < 5; i++) {
        failures.push((await signInRequest(g.baseUrl, target.email, `pair-wrong-${i}-pw`, attacker)).status);
      }
      expect(failures).toEqual(Array(5).fill(401));
      // Now even the right password from that address is refused for that account...
      expectRetryAfter(await signInRequest(g.baseUrl, target.email, target.password, attacker), 900);
      // ...while the account signs in from elsewhere, and the address still reaches other accounts.
      expect((await signInRequest(g.baseUrl, target.email, target.password, target.ip)).status).toBe(200);
      expect((await signInRequest(g.baseUrl, owner.email, owner.password, attacker)).status).toBe(200);
    });

    it('per address: after 20 failures the address gets 429 + Retry-After, for any account', async () => {
      await startOfRoomyWindow(300, 10);
      const ip = nextIp();
      const failures = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          signInRequest(
            g.baseUrl,
            `nobody-${i}-${randomBytes(3).toString('hex')}@identity.test`,
            'wrong-password-123',
            ip,
          ),
        ),
      );
      expect(failures.map((r) => r.status)).toEqual(Array(20).fill(401));
      expectRetryAfter(await signInRequest(g.baseUrl, owner.email, owner.password, ip), 300);
      expect((await signInRequest(g.baseUrl, owner.email, owner.password, nextIp())).status).toBe(200);
    });

    it('unknown account and wrong password get the same generic 401', async () => {
      const a = await signInRequest(g.baseUrl, owner.email, 'definitely-wrong-pw', nextIp());
      const b = await signInRequest(
        g.baseUrl,
        `ghost-${randomBytes(3).toString('hex')}@identity.test`,
        'definitely-wrong-pw',
        nextIp(),
      );
      expect([a.status, b.status]).toEqual([401, 401]);
      expect(a.body).toEqual(b.body);
    });
  });

  describe('sessions', () => {
    it('are listed for their owner (current one marked, nothing secret) and revoking one ends it at once', async () => {
      const ip2 = nextIp();
      const second = sessionFrom(
        expectStatus(await signInRequest(g.baseUrl, lister.email, lister.password, ip2), 200),
      );
      const secondJwt = await apiJwtFor(g.baseUrl, second, ip2);
      const r = await http<{ sessions: Record<string, unknown>[] }>('GET', `${g.baseUrl}/api/auth/sessions`, {
        headers: lister.admin.headers,
      });
      expect(r.status).toBe(200);
      expect(r.body.sessions).toHaveLength(2);
      expect(r.body.sessions.filter((s) => s.current)).toHaveLength(1);
      expect(r.body.sessions.find((s) => s.current)!.id).toBe(decodeJwtParts(lister.jwt).payload.sid);
      for (const s of r.body.sessions) {
        expect(Object.keys(s).sort()).toEqual([
          'createdAt',
          'current',
          'expiresAt',
          'id',
          'ip',
          'lastSeenAt',
          'userAgent',
        ]);
      }
      for (const v of [...lister.session.cookieValues, ...second.cookieValues])
        expect(r.text).not.toContain(v);
      // The address recorded is the client's (trusted X-Forwarded-For), not the proxy's.
      expect(r.body.sessions.map((s) => s.ip).sort()).toEqual([lister.ip, ip2].sort());

      expect((await listAgents(bearer(g.baseUrl, secondJwt))).status).toBe(200);
      const sid = String(decodeJwtParts(secondJwt).payload.sid);
      const del = await http('DELETE', `${g.baseUrl}/api/auth/sessions/${sid}`, {
        headers: lister.admin.headers,
      });
      expect(del.status, del.text).toBe(200);
      expect(del.body).toEqual({ revoked: true, id: sid });
      expect((await listAgents(bearer(g.baseUrl, secondJwt))).status).toBe(401);
      const cookie = await http('POST', `${g.baseUrl}/api/auth/token`, {
        headers: { cookie: second.cookie, ...fromIp(ip2) },
      });
      expect(cookie.status).toBe(401);
      const list = await http<{ sessions: { id: string }[] }>('GET', `${g.baseUrl}/api/auth/sessions`, {
        headers: lister.admin.headers,
      });
      expect(list.body.sessions.map((s) => s.id)).not.toContain(sid);
      expect(
        (await http('DELETE', `${g.baseUrl}/api/auth/sessions/${sid}`, { headers: lister.admin.headers }))
          .status,
      ).toBe(404);
      // The caller's own session is unaffected.
      expect((await listAgents(lister.admin)).status).toBe(200);
    });

    it("another user cannot list or revoke someone else's session (404)", async () => {
      const sid = String(decodeJwtParts(lister.jwt).payload.sid);
      const list = await http<{ sessions: { id: string }[] }>('GET', `${g.baseUrl}/api/auth/sessions`, {
        headers: owner.admin.headers,
      });
      expect(list.status).toBe(200);
      expect(list.body.sessions.map((s) => s.id)).not.toContain(sid);
      expect(
        (await http('DELETE', `${g.baseUrl}/api/auth/sessions/${sid}`, { headers: owner.admin.headers }))
          .status,
      ).toBe(404);
      expect((await listAgents(lister.admin)).status).toBe(200);
    });

    it('sign-out invalidates the session server-side: an API JWT of that session is refused afterwards', async () => {
      const ip = nextIp();
      const session = sessionFrom(
        expectStatus(await signInRequest(g.baseUrl, lister.email, lister.password, ip), 200),
      );
      const jwt = await apiJwtFor(g.baseUrl, session, ip);
      expect((await listAgents(bearer(g.baseUrl, jwt))).status).toBe(200);
      const out = await http('POST', `${g.baseUrl}/api/auth/sign-out`, {
        headers: { cookie: session.cookie, ...fromIp(ip) },
      });
      expect(out.status).toBe(200);
      expect(out.body).toEqual({ signedOut: true });
      expect(String(out.headers['set-cookie'])).toMatch(/vlt_session=;/);
      expect((await listAgents(bearer(g.baseUrl, jwt))).status).toBe(401);
      expect(
        (
          await http('POST', `${g.baseUrl}/api/auth/token`, {
            headers: { cookie: session.cookie, ...fromIp(ip) },
          })
        ).status,
      ).toBe(401);
      const revoked = await g.sql<{ revoked: boolean }>(
        'SELECT revoked_at IS NOT NULL AS revoked FROM sessions WHERE id = $1',
        [decodeJwtParts(jwt).payload.sid],
      );
      expect(revoked).toEqual([{ revoked: true }]);
      // Other sessions of the same account live on.
      expect((await listAgents(lister.admin)).status).toBe(200);
    });
  });

  describe('token exchange', () => {
    let viewer: Admin;
    let member: Admin;
    let agentId: string;

    beforeAll(async () => {
      agentId = expectStatus(
        await http<{ agent: { id: string } }>('POST', `${g.baseUrl}/v1/agents`, {
          headers: owner.admin.headers,
          json: { name: 'in-owner-ws' },
        }),
        201,
      ).body.agent.id;
      [viewer, member] = await Promise.all([
        joinAs(owner, viewerUser, 'viewer'),
        joinAs(owner, memberUser, 'member'),
      ]);
    });

    it("a viewer switching into another of their workspaces gets that workspace's token, narrowed to the viewer scopes", async () => {
      const r = await exchange(viewerUser.admin, owner.workspaceId, [
        'api:read',
        'api:write',
        'admin',
        'approvals:decide',
        'vault:execute',
      ]);
      expect(r.status, r.text).toBe(200);
      expect(r.body.tokenType).toBe('Bearer');
      expect(r.body.expiresIn).toBeGreaterThan(0);
      expect(r.body.expiresIn).toBeLessThanOrEqual(300);
      const { payload } = decodeJwtParts(r.body.accessToken);
      expect(payload).toMatchObject({
        sub: viewerUser.id,
        wid: owner.workspaceId,
        roles: ['viewer'],
        aud: 'api',
      });
      expect(payload.scp).toEqual(['api:read']);
      const as = bearer(g.baseUrl, r.body.accessToken);
      const list = await http<{ agents: { id: string }[] }>('GET', `${g.baseUrl}/v1/agents`, {
        headers: as.headers,
      });
      expect(list.body.agents.map((a) => a.id)).toContain(agentId);
      expect(
        (await http('POST', `${g.baseUrl}/v1/agents`, { headers: as.headers, json: { name: 'nope' } }))
          .status,
      ).toBe(403);
      // Without requested scopes: every scope the viewer role has, and no more.
      expect(decodeJwtParts(viewer.headers.authorization!.slice(7)).payload.scp).toEqual([
        'api:read',
        'capabilities:read',
      ]);
      // Their own workspace is untouched by the switch.
      expect(decodeJwtParts(viewerUser.jwt).payload).toMatchObject({
        wid: viewerUser.workspaceId,
        roles: ['owner'],
      });
    });

    it('a member gets write but not admin', async () => {
      const scp = decodeJwtParts(member.headers.authorization!.slice(7)).payload.scp as string[];
      expect(scp).toContain('api:write');
      expect(scp).not.toContain('admin');
      expect(
        (
          await http('POST', `${g.baseUrl}/v1/agents`, {
            headers: member.headers,
            json: { name: 'by-member' },
          })
        ).status,
      ).toBe(201);
      const addMember = await http('POST', `${g.baseUrl}/v1/workspaces/${owner.workspaceId}/members`, {
        headers: member.headers,
        json: { email: lister.email, role: 'viewer' },
      });
      expect(addMember.status).toBe(403);
    });

    it('a non-member gets 404, the same as for a workspace that does not exist', async () => {
      const r = await exchange(lister.admin, owner.workspaceId);
      expect(r.status, r.text).toBe(404);
      const none = await exchange(lister.admin, randomUUID());
      expect(none.status).toBe(404);
      expect(r.body).toEqual(none.body);
      expect((await exchange(lister.admin, 'not-a-uuid')).status).toBe(400);
    });

    it('a narrowed token cannot widen itself through another exchange', async () => {
      const narrow = expectStatus(await exchange(memberUser.admin, owner.workspaceId, ['api:read']), 200).body
        .accessToken;
      expect(decodeJwtParts(narrow).payload.scp).toEqual(['api:read']);
      const again = await exchange(bearer(g.baseUrl, narrow), owner.workspaceId);
      if (again.status === 200) {
        expect(
          decodeJwtParts(again.body.accessToken).payload.scp,
          'exchange must not grant more than the presented token had',
        ).toEqual(['api:read']);
      } else {
        expect(again.status).toBe(403);
      }
    });

    it('membership changes take effect at once: a demoted admin loses write, a removed one loses everything (incl. their PAT)', async () => {
      const as = await joinAs(owner, leaver, 'admin');
      expect(
        (await http('POST', `${g.baseUrl}/v1/agents`, { headers: as.headers, json: { name: 'by-admin' } }))
          .status,
      ).toBe(201);
      const pat = expectStatus(await createPat(as, { name: 'leaver-pat', expiresInDays: 1 }), 201).body
        .plainToken;
      expectStatus(
        await http('PUT', `${g.baseUrl}/v1/workspaces/${owner.workspaceId}/members/${leaver.id}`, {
          headers: owner.admin.headers,
          json: { role: 'viewer' },
        }),
        200,
      );
      // The JWT still says admin; the role held now decides.
      expect(
        (
          await http('POST', `${g.baseUrl}/v1/agents`, {
            headers: as.headers,
            json: { name: 'after-demotion' },
          })
        ).status,
      ).toBe(403);
      expect(
        (
          await http('POST', `${g.baseUrl}/v1/agents`, {
            headers: withKey(pat).headers,
            json: { name: 'pat-after-demotion' },
          })
        ).status,
      ).toBe(403);
      expect((await listAgents(as)).status).toBe(200);

      const del = await http(
        'DELETE',
        `${g.baseUrl}/v1/workspaces/${owner.workspaceId}/members/${leaver.id}`,
        { headers: owner.admin.headers },
      );
      expect(del.status, del.text).toBe(200);
      expect((await exchange(leaver.admin, owner.workspaceId)).status).toBe(404);
      const after = await listAgents(as);
      expect([401, 403], `removed member's exchanged JWT still works: ${after.status}`).toContain(
        after.status,
      );
      expect((await listAgents(withKey(pat))).status).toBe(401);
      // Their own workspace is unaffected.
      expect((await listAgents(leaver.admin)).status).toBe(200);
    });

    it("an expired session's JWT and cookie are refused (401)", async () => {
      const ip = nextIp();
      const session = sessionFrom(
        expectStatus(await signInRequest(g.baseUrl, memberUser.email, memberUser.password, ip), 200),
      );
      const jwt = await apiJwtFor(g.baseUrl, session, ip);
      expect((await listAgents(bearer(g.baseUrl, jwt))).status).toBe(200);
      await g.sql(`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id = $1`, [
        decodeJwtParts(jwt).payload.sid,
      ]);
      expect((await listAgents(bearer(g.baseUrl, jwt))).status).toBe(401);
      expect(
        (
          await http('POST', `${g.baseUrl}/api/auth/token`, {
            headers: { cookie: session.cookie, ...fromIp(ip) },
          })
        ).status,
      ).toBe(401);
    });
  });
});
