/**
 * Agents: enrolment with an ES256 key, bootstrap secrets used once, and the token exchange
 * accepting only valid client assertions.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { expect, it } from 'vitest';
import {
  bootstrapAgent,
  createAgent,
  describeResult,
  expectStatus,
  http,
  signAssertion,
  tokenRequest,
} from '../../support/api-client.js';
import { newWorkspace, type Scenario } from './setup.js';

export function agentsScenario(sc: Scenario): void {
  it('enrols agents with ES256 keys and exchanges only valid assertions for vltt_ tokens', async () => {
    const ws = await newWorkspace(sc, 'agents');
    const env = sc.env();
    const cp = env.controlPlane;

    const empty = await http('POST', `${cp}/v1/agents`, { headers: ws.admin.headers, json: { name: '' } });
    expect(empty.status, describeResult(empty)).toBe(400);

    const created = await createAgent(ws.admin, 'e2e-main');
    expect(created.agent.status).toBe('created');
    expect(created.bootstrapSecret.startsWith('vltb_')).toBe(true);
    sc.secrets.add('bootstrap secret (main)', created.bootstrapSecret, 'vltb_');

    // A P-384 key is not what the spec accepts; the failed attempt must not burn the secret.
    const p384 = await exportJWK((await generateKeyPair('ES384', { extractable: true })).publicKey);
    const badKey = await http('POST', `${cp}/v1/agents/bootstrap`, {
      headers: { 'x-forwarded-for': sc.nextClientIp() },
      json: { bootstrapSecret: created.bootstrapSecret, publicKey: p384 },
    });
    expect(badKey.status, describeResult(badKey)).toBe(400);

    const main = await bootstrapAgent(cp, created.bootstrapSecret, { 'x-forwarded-for': sc.nextClientIp() });
    expect(main.id).toBe(created.agent.id);
    expect(main.workspaceId).toBe(ws.user.workspaceId);

    const reused = await http('POST', `${cp}/v1/agents/bootstrap`, {
      headers: { 'x-forwarded-for': sc.nextClientIp() },
      json: { bootstrapSecret: created.bootstrapSecret, publicKey: main.publicJwk },
    });
    expect(reused.status, `a consumed bootstrap secret must be refused: ${describeResult(reused)}`).toBe(401);

    const assertion = await signAssertion(main, { audience: env.publicBaseUrl });
    const ok = expectStatus(await tokenRequest(cp, assertion), 200);
    expect(ok.body.access_token.startsWith('vltt_')).toBe(true);
    expect(ok.body.token_type).toBe('Bearer');
    expect(Number.isInteger(ok.body.expires_in) && ok.body.expires_in > 0 && ok.body.expires_in <= 7200).toBe(
      true,
    );
    sc.secrets.add('access token (main)', ok.body.access_token, 'vltt_');

    const otherKey = (await generateKeyPair('ES256')).privateKey;
    const now = Math.floor(Date.now() / 1000);
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const claims = {
      iss: main.id,
      sub: main.id,
      aud: env.publicBaseUrl,
      iat: now,
      exp: now + 60,
      jti: randomUUID(),
    };
    const rejected: [string, string][] = [
      ['replayed jti', assertion],
      ['wrong audience', await signAssertion(main, { audience: 'https://elsewhere.example' })],
      [
        'exp more than 60 s after iat',
        await signAssertion(main, { audience: env.publicBaseUrl, lifetimeSeconds: 300 }),
      ],
      ['expired', await signAssertion(main, { audience: env.publicBaseUrl, iatOffsetSeconds: -600 })],
      ['iss differs from sub', await signAssertion(main, { audience: env.publicBaseUrl, iss: randomUUID() })],
      ['signed by another key', await signAssertion(main, { audience: env.publicBaseUrl, key: otherKey })],
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`],
      [
        'HS256 keyed with the public JWK',
        await new SignJWT({ ...claims, jti: randomUUID() })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
          .sign(new TextEncoder().encode(JSON.stringify(main.publicJwk))),
      ],
    ];
    for (const [why, jwt] of rejected) {
      const r = await tokenRequest(cp, jwt);
      expect(r.status, `token exchange with ${why}: ${describeResult(r)}`).toBe(401);
    }
  });
}
