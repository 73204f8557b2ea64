/**
 * Users: sign-up, sign-in, API JWTs verifiable against the published JWKS, PATs, sign-out.
 */
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { expect, it } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createPat,
  describeResult,
  expectStatus,
  http,
  patAdmin,
  signIn,
  signUp,
} from '../../support/api-client.js';
import { newWorkspace, random, type Scenario } from './setup.js';

export function identityScenario(sc: Scenario): void {
  it('signs up, signs in and issues an RS256 API JWT that verifies against the published JWKS', async () => {
    const env = sc.env();
    const cp = env.controlPlane;
    const email = `admin-${random(4)}@e2e.test`;
    const password = `pw-${random(10)}`;
    sc.secrets.add('user password', password);

    const short = await http('POST', `${cp}/api/auth/sign-up`, {
      json: { email: `short-${random(4)}@e2e.test`, password: 'elevenchars' },
    });
    expect(short.status, describeResult(short)).toBe(400);

    const { user, result } = await signUp(cp, email, password, 'E2E Admin', {
      'x-forwarded-for': sc.nextClientIp(),
    });
    expect(result.body.user.email).toBe(email);
    expect(
      user.setCookie.some((c) => /;\s*httponly/i.test(c)),
      `session cookie must be HttpOnly: ${user.setCookie}`,
    ).toBe(true);
    user.session.cookieValues.forEach((v) => sc.secrets.add('session cookie (sign-up)', v));

    const wrong = await http('POST', `${cp}/api/auth/sign-in`, { json: { email, password: `${password}x` } });
    expect(wrong.status, describeResult(wrong)).toBe(401);
    const session = await signIn(cp, email, password);
    session.cookieValues.forEach((v) => sc.secrets.add('session cookie (sign-in)', v));

    const noCookie = await http('POST', `${cp}/api/auth/token`);
    expect(noCookie.status, describeResult(noCookie)).toBe(401);

    const { token, expiresAt } = await apiJwt(cp, session);
    sc.secrets.addJwt('API JWT', token);
    const lifetime = Date.parse(expiresAt) - Date.now();
    expect(lifetime, `expiresAt ${expiresAt} should be ~5 minutes ahead`).toBeGreaterThan(240_000);
    expect(lifetime).toBeLessThanOrEqual(301_000);

    const jwks = expectStatus(await http<{ keys: object[] }>('GET', `${cp}/.well-known/jwks.json`), 200);
    expect(jwks.body.keys.length).toBeGreaterThan(0);
    const header = decodeProtectedHeader(token);
    expect(header.alg).toBe('RS256');
    expect(typeof header.kid, 'API JWT must carry a key id').toBe('string');
    const { payload } = await jwtVerify(token, createLocalJWKSet(jwks.body as never), {
      audience: 'api',
      issuer: env.publicBaseUrl,
      algorithms: ['RS256'],
    });
    expect(payload.sub).toBe(user.id);
    expect(payload.wid).toBe(user.workspaceId);
    expect(payload.roles).toContain('owner');
    expect(typeof payload.sid).toBe('string');
    expect(typeof payload.jti).toBe('string');
    expect(payload.exp! - payload.iat!).toBeLessThanOrEqual(300);

    const admin = bearerAdmin(cp, token);
    const unauth = await http('GET', `${cp}/v1/agents`);
    expect(unauth.status, describeResult(unauth)).toBe(401);
    // Flip one character in the middle of the signature: must no longer verify.
    const [h, p, sig] = token.split('.') as [string, string, string];
    const mid = Math.floor(sig.length / 2);
    const tampered = `${h}.${p}.${sig.slice(0, mid)}${sig[mid] === 'A' ? 'B' : 'A'}${sig.slice(mid + 1)}`;
    const bad = await http('GET', `${cp}/v1/agents`, { headers: { authorization: `Bearer ${tampered}` } });
    expect(bad.status, describeResult(bad)).toBe(401);

    const pat = await createPat(admin, 'e2e');
    expect(pat.plainToken.startsWith('vltp_'), `PAT ${pat.plainToken.slice(0, 5)}…`).toBe(true);
    sc.secrets.add('PAT', pat.plainToken, 'vltp_');
    const viaPat = await http('GET', `${cp}/v1/connections`, {
      headers: patAdmin(cp, pat.plainToken).headers,
    });
    expect(viaPat.status, describeResult(viaPat)).toBe(200);
    const badPat = await http('GET', `${cp}/v1/connections`, {
      headers: { 'x-api-key': `vltp_${random(20)}` },
    });
    expect(badPat.status, describeResult(badPat)).toBe(401);
  });

  it('ends the session on sign-out', async () => {
    const cp = sc.env().controlPlane;
    const ws = await newWorkspace(sc, 'sign-out');
    const session = await signIn(cp, ws.user.email, ws.user.password);
    session.cookieValues.forEach((v) => sc.secrets.add('session cookie (sign-out)', v));
    const out = await http('POST', `${cp}/api/auth/sign-out`, { headers: { cookie: session.cookie } });
    expect(out.status >= 200 && out.status < 300, describeResult(out)).toBe(true);
    const after = await http('POST', `${cp}/api/auth/token`, { headers: { cookie: session.cookie } });
    expect(after.status, `token exchange with a signed-out session: ${describeResult(after)}`).toBe(401);
  });
}
