/**
 * The mock providers themselves: the connection tests trust its counters and checks, so the
 * checks are shown to refuse what a real provider refuses (PKCE, redirect URI, single-use
 * codes, client authentication) and to count what they claim to count.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import { providerEnv, s256, startMockProviders, type MockProviders } from '../support/mock-providers.js';

let mock: MockProviders;
let tls: Agent;
const REDIRECT = 'http://127.0.0.1:9/v1/connections/callback';

beforeAll(async () => {
  mock = await startMockProviders();
  tls = new Agent({ connect: { ca: mock.pki.caPem } });
});
afterAll(async () => {
  await tls?.close();
  await mock?.close();
});

async function call(
  method: string,
  path: string,
  opts: { form?: Record<string, string>; headers?: Record<string, string>; body?: string } = {},
) {
  const headers: Record<string, string> = { ...opts.headers };
  let body = opts.body;
  if (opts.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(opts.form).toString();
  }
  const res = await request(`${mock.url}${path}`, {
    method: method as 'GET',
    headers,
    body,
    dispatcher: tls,
  });
  const text = await res.body.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

function authorizeUrl(clientId: string, verifier: string, state = randomBytes(8).toString('hex')) {
  const u = new URL(`${mock.url}/oauth/authorize`);
  u.search = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    scope: 'a b',
    state,
    code_challenge: s256(verifier),
    code_challenge_method: 'S256',
  }).toString();
  return { url: u.toString(), state };
}

async function codeFor(clientId: string, verifier: string) {
  const { url, state } = authorizeUrl(clientId, verifier);
  const back = new URL(await mock.approve(url));
  expect(back.searchParams.get('state')).toBe(state);
  return back.searchParams.get('code')!;
}

describe('mock OAuth server', () => {
  it('authorization code + PKCE: one exchange per code, checked verifier, redirect URI and client', async () => {
    const app = mock.deploymentApp('suite_a');
    const verifier = randomBytes(32).toString('base64url');
    const exchange = (code: string, extra: Record<string, string> = {}) =>
      call('POST', '/oauth/token', {
        form: {
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT,
          code_verifier: verifier,
          client_id: app.clientId,
          client_secret: app.clientSecret,
          ...extra,
        },
      });
    expect(
      (await exchange(await codeFor(app.clientId, verifier), { code_verifier: 'x'.repeat(43) })).json,
    ).toEqual({
      error: 'invalid_grant',
    });
    expect(
      (await exchange(await codeFor(app.clientId, verifier), { redirect_uri: `${REDIRECT}x` })).status,
    ).toBe(400);
    expect((await exchange(await codeFor(app.clientId, verifier), { client_secret: 'nope' })).status).toBe(
      401,
    );

    const code = await codeFor(app.clientId, verifier);
    const ok = await exchange(code);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: 'a b' });
    expect(String(ok.json.access_token)).toMatch(/^at_suite_a_/);
    expect(String(ok.json.refresh_token)).toMatch(/^rt_suite_a_/);
    expect((await exchange(code)).json).toEqual({ error: 'invalid_grant' });
    expect(mock.refreshTokens()).toContain(ok.json.refresh_token);
  });

  it('refuses client_secret_basic: the ADR fixes client_secret_post', async () => {
    const app = mock.deploymentApp('board');
    const verifier = randomBytes(32).toString('base64url');
    const code = await codeFor(app.clientId, verifier);
    const r = await call('POST', '/oauth/token', {
      headers: {
        authorization: `Basic ${Buffer.from(`${app.clientId}:${app.clientSecret}`).toString('base64')}`,
      },
      form: { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier },
    });
    expect(r.status).toBe(401);
    expect(mock.tokenRequests.at(-1)!.clientAuth).toBe('basic');
  });

  it('denies at authorize when told, keeping the state', async () => {
    mock.authorizeOutcome = 'access_denied';
    try {
      const { url, state } = authorizeUrl(mock.deploymentApp('suite_a').clientId, 'v'.repeat(43));
      const back = new URL(await mock.approve(url));
      expect(back.searchParams.get('error')).toBe('access_denied');
      expect(back.searchParams.get('state')).toBe(state);
      expect(back.searchParams.get('code')).toBeNull();
    } finally {
      mock.authorizeOutcome = 'approve';
    }
  });

  it('refresh: counted, delayed, optionally rotated, invalid_grant on demand; revocation counted', async () => {
    const app = mock.deploymentApp('suite_b');
    const verifier = randomBytes(32).toString('base64url');
    const first = await call('POST', '/oauth/token', {
      form: {
        grant_type: 'authorization_code',
        code: await codeFor(app.clientId, verifier),
        redirect_uri: REDIRECT,
        code_verifier: verifier,
        client_id: app.clientId,
        client_secret: app.clientSecret,
      },
    });
    const refresh = (rt: string) =>
      call('POST', '/oauth/token', {
        form: {
          grant_type: 'refresh_token',
          refresh_token: rt,
          client_id: app.clientId,
          client_secret: app.clientSecret,
        },
      });
    const before = mock.refreshCount;
    mock.refreshExpiresIn = 50;
    mock.rotateRefreshToken = true;
    mock.refreshDelayMs = 200;
    const t0 = Date.now();
    const r1 = await refresh(String(first.json.refresh_token));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(r1.json).toMatchObject({ token_type: 'Bearer', expires_in: 50 });
    expect(r1.json.refresh_token).not.toBe(first.json.refresh_token);
    // Rotated: the old refresh token is dead.
    expect((await refresh(String(first.json.refresh_token))).json).toEqual({ error: 'invalid_grant' });
    mock.refreshOutcome = 'invalid_grant';
    expect((await refresh(String(r1.json.refresh_token))).status).toBe(400);
    expect(mock.refreshCount - before).toBe(3);
    Object.assign(mock, {
      refreshExpiresIn: 3600,
      rotateRefreshToken: false,
      refreshDelayMs: 0,
      refreshOutcome: 'ok',
    });

    const api = await call('GET', '/v1.0/me/messages', {
      headers: { authorization: `Bearer ${r1.json.access_token}` },
    });
    expect(api.status).toBe(200);
    expect(mock.apiRequests.at(-1)).toMatchObject({ bearer: r1.json.access_token, tokenState: 'valid' });

    const rev = await call('POST', '/oauth/revoke', {
      form: {
        token: String(r1.json.refresh_token),
        token_type_hint: 'refresh_token',
        client_id: app.clientId,
        client_secret: app.clientSecret,
      },
    });
    expect(rev.status).toBe(200);
    expect(mock.revocations.at(-1)).toMatchObject({ knownAs: 'refresh_token', clientAuthenticated: true });
    await call('GET', '/v1.0/me/messages', { headers: { authorization: `Bearer ${r1.json.access_token}` } });
    expect(mock.apiRequests.at(-1)!.tokenState).toBe('revoked');
  });
});

describe('mock bot and key APIs', () => {
  it('getMe answers for the valid token only and bot methods are recorded', async () => {
    expect((await call('GET', `/bot${mock.botToken}/getMe`)).json).toEqual({
      ok: true,
      result: { id: 123, is_bot: true, first_name: 'Vault Bot', username: 'vault_bot' },
    });
    const bad = await call('POST', `/bot1:${'x'.repeat(30)}/getMe`);
    expect(bad.status).toBe(401);
    expect(bad.json).toEqual({ ok: false, error_code: 401, description: 'Unauthorized' });
    const sent = await call('POST', `/bot${mock.botToken}/sendMessage`, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chat_id: 42, text: 'hi' }),
    });
    expect(sent.status).toBe(200);
    expect(mock.botCalls.at(-1)).toMatchObject({ method: 'sendMessage', valid: true, body: { chat_id: 42 } });
  });

  it('key checks accept x-api-key, Bearer and x-goog-api-key for a known key only', async () => {
    mock.apiKeys.add('k-good');
    expect((await call('GET', '/v1/models', { headers: { 'x-api-key': 'k-good' } })).status).toBe(200);
    expect((await call('GET', '/v1/models', { headers: { authorization: 'Bearer k-good' } })).status).toBe(
      200,
    );
    expect((await call('GET', '/v1beta/models', { headers: { 'x-goog-api-key': 'k-good' } })).status).toBe(
      200,
    );
    expect((await call('GET', '/v1/models', { headers: { 'x-api-key': 'k-bad' } })).status).toBe(401);
    expect((await call('GET', '/v1beta/models', { headers: { 'x-api-key': 'k-good' } })).status).toBe(401);
  });
});

describe('providerEnv', () => {
  it('points every endpoint of the named providers at the mock', () => {
    const env = providerEnv(mock, ['suite_a', 'chatbot_a', 'llm_c', 'issues'], { withoutApp: ['suite_a'] });
    expect(env).toMatchObject({
      VLT_SUITE_A_AUTHORIZE_URL: `${mock.url}/oauth/authorize`,
      VLT_SUITE_A_TOKEN_URL: `${mock.url}/oauth/token`,
      VLT_SUITE_A_REVOKE_URL: `${mock.url}/oauth/revoke`,
      VLT_SUITE_A_API_URL: mock.url,
      VLT_CHATBOT_A_API_URL: mock.url,
      VLT_LLM_C_API_URL: mock.url,
    });
    expect(env.VLT_SUITE_A_CLIENT_ID).toBeUndefined();
    expect(Object.keys(env).filter((k) => k.startsWith('VLT_CHATBOT_A_'))).toEqual(['VLT_CHATBOT_A_API_URL']);
    expect(Object.keys(env).some((k) => k.startsWith('VLT_ISSUES_'))).toBe(false);
    const full = providerEnv(mock, ['code_host'], { withoutRevoke: ['code_host'] });
    expect(full.VLT_CODE_HOST_CLIENT_SECRET).toBe(mock.deploymentApp('code_host').clientSecret);
    expect(full.VLT_CODE_HOST_REVOKE_URL).toBeUndefined();
    expect(() => providerEnv(mock, ['suite_a'], { withoutRevoke: ['suite_a'] })).toThrow(/real revocation/);
  });
});
