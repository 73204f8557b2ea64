/**
 * One local HTTPS server that plays every provider of the catalog (ADR 0042) at once:
 *  - an OAuth 2.0 authorization server (authorization code + PKCE S256, refresh, RFC 7009
 *    revocation, `client_secret_post` only) and the resource API its access tokens open;
 *  - the bot-chat API (`/bot<token>/<method>`);
 *  - the LLM key checks (`GET /v1/models`, `GET /v1beta/models`).
 * Every request is recorded, so tests assert on what the vault really sent (which bearer token,
 * how many refreshes, which revocations), and the behaviour is switched per test (deny at
 * authorize, refuse an exchange, `invalid_grant` on refresh, a slow refresh, short lifetimes).
 *
 * `providerEnv` points `VLT_<PROVIDER>_*` at it; `startConnectionsGateway` runs an in-process
 * gateway in front of it with a signed-up workspace owner.
 */
import https from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { Agent, request } from 'undici';
import pg from 'pg';
import { PROVIDERS, type ProviderId } from '@vlt/contracts';
import { expectStatus, http, type Admin, type HttpResult } from './api-client.js';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.js';
import { agentToken, enrolledAgent, newUser, type TestAgent, type TestUser } from './identity-harness.js';
import { readBody } from './read-body.js';
import { createTestPki, type TestPki } from './test-pki.js';
import { realServices } from './services.js';

// ---------------------------------------------------------------------------------------------
// Records

export interface AuthorizeRecord {
  /** Every query parameter of the authorization request, as received. */
  params: Record<string, string>;
  clientId: string;
  redirectUri: string;
  scope: string;
  state: string;
  codeChallenge: string;
  codeChallengeMethod: string;
  /** The code handed out, or null when the request was refused or denied. */
  code: string | null;
  outcome: 'code' | 'access_denied' | 'invalid_request';
}

export interface TokenRecord {
  grantType: string;
  /** How the client authenticated: `post` (client_secret_post), `basic`, or `none`. */
  clientAuth: 'post' | 'basic' | 'none';
  clientId: string | undefined;
  /** The form body as received (secrets included: tests assert what was sent). */
  form: Record<string, string>;
  /** `ok` or the OAuth error code answered. */
  outcome: string;
  at: number;
}

export interface IssuedToken {
  accessToken: string;
  refreshToken: string | null;
  clientId: string;
  provider: string | undefined;
  scope: string;
  /** Epoch ms. */
  expiresAt: number;
  grant: 'authorization_code' | 'refresh_token';
}

export interface RevocationRecord {
  token: string;
  tokenTypeHint: string | undefined;
  clientId: string | undefined;
  clientAuthenticated: boolean;
  /** What the mock knew the token as. */
  knownAs: 'access_token' | 'refresh_token' | 'unknown';
  at: number;
}

export interface ApiRecord {
  method: string;
  /** Path exactly as received (with the query). */
  rawPath: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: string;
  /** The bearer token of the Authorization header, if any. */
  bearer: string | null;
  /** Where the mock's records put that bearer token. */
  tokenState: 'valid' | 'expired' | 'revoked' | 'unknown' | 'none';
  at: number;
}

export interface BotCall {
  token: string;
  /** The bot method (`sendMessage`). */
  method: string;
  httpMethod: string;
  query: Record<string, string>;
  /** Parsed JSON or form body; the raw text when neither. */
  body: unknown;
  valid: boolean;
  at: number;
}

export interface KeyCheck {
  path: string;
  header: 'x-api-key' | 'authorization' | 'x-goog-api-key' | null;
  key: string | null;
  ok: boolean;
  at: number;
}

interface PendingCode {
  clientId: string;
  redirectUri: string;
  scope: string;
  codeChallenge: string;
  codeChallengeMethod: string;
  used: boolean;
  issuedAt: number;
}

// ---------------------------------------------------------------------------------------------
// The mock

export interface MockProviders {
  /** `https://127.0.0.1:<port>`: every provider's endpoints live here. */
  readonly url: string;
  readonly port: number;
  /** The CA that signed the server certificate (pass it as `upstreamCa` / NODE_EXTRA_CA_CERTS). */
  readonly pki: TestPki;

  // Behaviour, switched by the tests.
  /** `access_denied`: the authorize endpoint redirects back with `error=access_denied&state=`. */
  authorizeOutcome: 'approve' | 'access_denied';
  /** Set: every authorization-code exchange is refused with this OAuth error (400). */
  exchangeError: string | null;
  /** `expires_in` of tokens from an authorization-code exchange. */
  accessTokenExpiresIn: number;
  /** Overrides the `scope` answered by the token endpoint (default: the scope asked for). */
  grantedScope: string | null;
  /** false: the exchange answers no refresh token (a provider whose tokens do not expire). */
  issueRefreshToken: boolean;
  /** true: the exchange answers no `expires_in` (a token without a known lifetime). */
  omitExpiresIn: boolean;
  /** `invalid_grant`: refresh answers 400 invalid_grant; `server_error`: 503. */
  refreshOutcome: 'ok' | 'invalid_grant' | 'server_error';
  /** `expires_in` of tokens from a refresh. */
  refreshExpiresIn: number;
  /** Refresh also hands out a new refresh token (the old one stops working). */
  rotateRefreshToken: boolean;
  /** Delay before the token endpoint answers a refresh (widens races). */
  refreshDelayMs: number;
  /** The one bot token `getMe` and the bot methods accept. */
  botToken: string;
  /** API keys the LLM key checks accept. */
  readonly apiKeys: Set<string>;

  // Records.
  readonly authorizeRequests: AuthorizeRecord[];
  readonly tokenRequests: TokenRecord[];
  readonly issued: IssuedToken[];
  readonly revocations: RevocationRecord[];
  readonly apiRequests: ApiRecord[];
  readonly botCalls: BotCall[];
  readonly keyChecks: KeyCheck[];
  /** Refresh requests received (whatever their outcome). */
  readonly refreshCount: number;
  readonly revocationCount: number;

  /** Registers an OAuth client (a deployment's or a workspace's app). */
  registerClient(clientId: string, clientSecret: string, provider?: ProviderId): void;
  /** The deployment OAuth app `providerEnv` configures for `provider` (registered on first use). */
  deploymentApp(provider: ProviderId): { clientId: string; clientSecret: string };
  /** Every refresh token handed out so far (the secrets that must never leave the vault). */
  refreshTokens(): string[];
  /** The newest token issued to `clientId` (or to any client). */
  lastIssued(clientId?: string): IssuedToken | undefined;
  /** Plays the browser at the authorize endpoint: the mock's answer, not followed. */
  authorize(authorizationUrl: string): Promise<{ status: number; location: string | null; text: string }>;
  /** `authorize`, asserting a redirect, returning where it points (the vault's callback). */
  approve(authorizationUrl: string): Promise<string>;
  /** Forgets every record (behaviour switches stay as they are). */
  clearRecords(): void;
  close(): Promise<void>;
}

const BOT_INFO = { id: 123, is_bot: true, first_name: 'Vault Bot', username: 'vault_bot' };
const MAX_BODY = 1024 * 1024;

/** base64url(SHA-256(verifier)): the S256 code challenge of RFC 7636. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** A bot token of the shape the vault accepts (`^[0-9]{1,20}:[A-Za-z0-9_-]{20,200}$`). */
export function newBotToken(): string {
  return `${100000 + Math.floor(Math.random() * 899999)}:${randomBytes(26).toString('base64url')}`;
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

function sendText(res: ServerResponse, status: number, text: string) {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(text);
}

const formOf = (text: string) => Object.fromEntries(new URLSearchParams(text));
const queryOf = (u: URL) => Object.fromEntries(u.searchParams);

function parseBody(text: string, contentType: string | undefined): unknown {
  if (!text) return undefined;
  if (/json/i.test(contentType ?? '')) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  if (/x-www-form-urlencoded/i.test(contentType ?? '')) return formOf(text);
  return text;
}

export async function startMockProviders(opts: { pki?: TestPki } = {}): Promise<MockProviders> {
  const ownPki = !opts.pki;
  const pki = opts.pki ?? (await createTestPki());
  const clients = new Map<string, { secret: string; provider: ProviderId | undefined }>();
  const deployment = new Map<ProviderId, { clientId: string; clientSecret: string }>();
  const codes = new Map<string, PendingCode>();
  const byAccess = new Map<string, IssuedToken>();
  const liveRefresh = new Map<string, IssuedToken>();
  const revoked = new Set<string>();
  const tag = randomBytes(3).toString('hex');

  const authorizeRequests: AuthorizeRecord[] = [];
  const tokenRequests: TokenRecord[] = [];
  const issued: IssuedToken[] = [];
  const revocations: RevocationRecord[] = [];
  const apiRequests: ApiRecord[] = [];
  const botCalls: BotCall[] = [];
  const keyChecks: KeyCheck[] = [];

  const tlsAgent = new Agent({ connect: { ca: pki.caPem } });

  const mock = {
    url: '',
    port: 0,
    pki,
    authorizeOutcome: 'approve' as MockProviders['authorizeOutcome'],
    exchangeError: null as string | null,
    accessTokenExpiresIn: 3600,
    grantedScope: null as string | null,
    issueRefreshToken: true,
    omitExpiresIn: false,
    refreshOutcome: 'ok' as MockProviders['refreshOutcome'],
    refreshExpiresIn: 3600,
    rotateRefreshToken: false,
    refreshDelayMs: 0,
    botToken: newBotToken(),
    apiKeys: new Set<string>(),
    authorizeRequests,
    tokenRequests,
    issued,
    revocations,
    apiRequests,
    botCalls,
    keyChecks,
    get refreshCount() {
      return tokenRequests.filter((t) => t.grantType === 'refresh_token').length;
    },
    get revocationCount() {
      return revocations.length;
    },
    registerClient(clientId: string, clientSecret: string, provider?: ProviderId) {
      clients.set(clientId, { secret: clientSecret, provider });
    },
    deploymentApp(provider: ProviderId) {
      let app = deployment.get(provider);
      if (!app) {
        app = {
          clientId: `deploy-${provider}-${tag}`,
          clientSecret: `dsecret-${provider}-${randomBytes(12).toString('hex')}`,
        };
        deployment.set(provider, app);
        clients.set(app.clientId, { secret: app.clientSecret, provider });
      }
      return app;
    },
    refreshTokens() {
      return issued.flatMap((t) => (t.refreshToken ? [t.refreshToken] : []));
    },
    lastIssued(clientId?: string) {
      return [...issued].reverse().find((t) => clientId === undefined || t.clientId === clientId);
    },
    async authorize(authorizationUrl: string) {
      const res = await request(authorizationUrl, { method: 'GET', dispatcher: tlsAgent });
      const text = await res.body.text();
      const loc = res.headers.location;
      return { status: res.statusCode, location: typeof loc === 'string' ? loc : null, text };
    },
    async approve(authorizationUrl: string) {
      const r = await mock.authorize(authorizationUrl);
      if (r.status !== 302 || !r.location) {
        throw new Error(`the mock authorize endpoint answered ${r.status} ${r.text.slice(0, 200)}`);
      }
      return r.location;
    },
    clearRecords() {
      for (const list of [
        authorizeRequests,
        tokenRequests,
        issued,
        revocations,
        apiRequests,
        botCalls,
        keyChecks,
      ] as unknown[][])
        list.length = 0;
    },
    close: async () => undefined,
  };

  function issue(
    clientId: string,
    scope: string,
    expiresIn: number,
    grant: IssuedToken['grant'],
    refreshToken: string | null,
  ): IssuedToken {
    const provider = clients.get(clientId)?.provider;
    const p = provider ?? 'x';
    const t: IssuedToken = {
      accessToken: `at_${p}_${randomBytes(18).toString('hex')}`,
      refreshToken: refreshToken ?? `rt_${p}_${randomBytes(18).toString('hex')}`,
      clientId,
      provider,
      scope,
      expiresAt: Date.now() + expiresIn * 1000,
      grant,
    };
    issued.push(t);
    byAccess.set(t.accessToken, t);
    liveRefresh.set(t.refreshToken!, t);
    return t;
  }

  /** client_secret_post only: credentials in the form body; Basic is refused as the ADR fixes. */
  function clientOf(
    req: IncomingMessage,
    form: Record<string, string>,
  ): { auth: TokenRecord['clientAuth']; clientId: string | undefined; ok: boolean } {
    const basic = /^basic /i.test(req.headers.authorization ?? '');
    if (basic) return { auth: 'basic', clientId: form.client_id, ok: false };
    const id = form.client_id;
    if (id === undefined || form.client_secret === undefined)
      return { auth: 'none', clientId: id, ok: false };
    const known = clients.get(id);
    return { auth: 'post', clientId: id, ok: known !== undefined && known.secret === form.client_secret };
  }

  async function onAuthorize(u: URL, res: ServerResponse) {
    const params = queryOf(u);
    const rec: AuthorizeRecord = {
      params,
      clientId: params.client_id ?? '',
      redirectUri: params.redirect_uri ?? '',
      scope: params.scope ?? '',
      state: params.state ?? '',
      codeChallenge: params.code_challenge ?? '',
      codeChallengeMethod: params.code_challenge_method ?? '',
      code: null,
      outcome: 'invalid_request',
    };
    authorizeRequests.push(rec);
    let redirect: URL;
    try {
      redirect = new URL(rec.redirectUri);
    } catch {
      return sendText(res, 400, 'invalid redirect_uri');
    }
    if (
      params.response_type !== 'code' ||
      !clients.has(rec.clientId) ||
      !rec.state ||
      !rec.codeChallenge ||
      rec.codeChallengeMethod !== 'S256'
    ) {
      return sendText(res, 400, 'invalid authorization request');
    }
    if (mock.authorizeOutcome === 'access_denied') {
      rec.outcome = 'access_denied';
      redirect.searchParams.set('error', 'access_denied');
      redirect.searchParams.set('error_description', 'The user denied access');
      redirect.searchParams.set('state', rec.state);
    } else {
      const code = `code_${randomBytes(16).toString('hex')}`;
      codes.set(code, {
        clientId: rec.clientId,
        redirectUri: rec.redirectUri,
        scope: rec.scope,
        codeChallenge: rec.codeChallenge,
        codeChallengeMethod: rec.codeChallengeMethod,
        used: false,
        issuedAt: Date.now(),
      });
      rec.code = code;
      rec.outcome = 'code';
      redirect.searchParams.set('code', code);
      redirect.searchParams.set('state', rec.state);
    }
    res.writeHead(302, { location: redirect.toString() });
    res.end();
  }

  async function onToken(req: IncomingMessage, res: ServerResponse) {
    const text = await readBody(req, MAX_BODY);
    const form = /^application\/x-www-form-urlencoded/i.test(req.headers['content-type'] ?? '')
      ? formOf(text)
      : {};
    const client = clientOf(req, form);
    const rec: TokenRecord = {
      grantType: form.grant_type ?? '',
      clientAuth: client.auth,
      clientId: client.clientId,
      form,
      outcome: 'ok',
      at: Date.now(),
    };
    tokenRequests.push(rec);
    const fail = (status: number, error: string) => {
      rec.outcome = error;
      sendJson(res, status, { error });
    };
    if (!form.grant_type) return fail(400, 'invalid_request');
    if (!client.ok) return fail(401, 'invalid_client');

    if (form.grant_type === 'authorization_code') {
      const pending = form.code ? codes.get(form.code) : undefined;
      if (!pending || pending.used) return fail(400, 'invalid_grant');
      pending.used = true;
      if (pending.clientId !== client.clientId) return fail(400, 'invalid_grant');
      if (form.redirect_uri !== pending.redirectUri) return fail(400, 'invalid_grant');
      if (!form.code_verifier || s256(form.code_verifier) !== pending.codeChallenge)
        return fail(400, 'invalid_grant');
      if (mock.exchangeError) return fail(400, mock.exchangeError);
      const scope = mock.grantedScope ?? pending.scope;
      const lifetime = mock.omitExpiresIn ? 10 * 365 * 86400 : mock.accessTokenExpiresIn;
      const t = issue(client.clientId!, scope, lifetime, 'authorization_code', null);
      const body: Record<string, unknown> = { access_token: t.accessToken, token_type: 'Bearer', scope };
      if (!mock.omitExpiresIn) body.expires_in = mock.accessTokenExpiresIn;
      if (mock.issueRefreshToken) body.refresh_token = t.refreshToken;
      else {
        liveRefresh.delete(t.refreshToken!);
        t.refreshToken = null;
      }
      return sendJson(res, 200, body);
    }

    if (form.grant_type === 'refresh_token') {
      if (mock.refreshDelayMs > 0) await new Promise((r) => setTimeout(r, mock.refreshDelayMs));
      if (mock.refreshOutcome === 'server_error') return fail(503, 'temporarily_unavailable');
      const previous = form.refresh_token ? liveRefresh.get(form.refresh_token) : undefined;
      if (mock.refreshOutcome === 'invalid_grant' || !previous || previous.clientId !== client.clientId)
        return fail(400, 'invalid_grant');
      if (mock.rotateRefreshToken) liveRefresh.delete(previous.refreshToken!);
      const t = issue(
        client.clientId!,
        previous.scope,
        mock.refreshExpiresIn,
        'refresh_token',
        mock.rotateRefreshToken ? null : previous.refreshToken,
      );
      const body: Record<string, unknown> = {
        access_token: t.accessToken,
        token_type: 'Bearer',
        expires_in: mock.refreshExpiresIn,
        scope: t.scope,
      };
      if (mock.rotateRefreshToken) body.refresh_token = t.refreshToken;
      return sendJson(res, 200, body);
    }
    return fail(400, 'unsupported_grant_type');
  }

  async function onRevoke(req: IncomingMessage, res: ServerResponse) {
    const form = formOf(await readBody(req, MAX_BODY));
    const client = clientOf(req, form);
    const token = form.token ?? '';
    const knownAs: RevocationRecord['knownAs'] = byAccess.has(token)
      ? 'access_token'
      : liveRefresh.has(token) || issued.some((t) => t.refreshToken === token)
        ? 'refresh_token'
        : 'unknown';
    revocations.push({
      token,
      tokenTypeHint: form.token_type_hint,
      clientId: client.clientId,
      clientAuthenticated: client.ok,
      knownAs,
      at: Date.now(),
    });
    if (!client.ok) return sendJson(res, 401, { error: 'invalid_client' });
    revoked.add(token);
    // RFC 7009 §2.2: revoking a refresh token also ends the access tokens it produced.
    if (knownAs === 'refresh_token') {
      liveRefresh.delete(token);
      for (const t of issued) if (t.refreshToken === token) revoked.add(t.accessToken);
    }
    res.writeHead(200);
    res.end();
  }

  function tokenState(bearer: string | null): ApiRecord['tokenState'] {
    if (bearer === null) return 'none';
    if (revoked.has(bearer)) return 'revoked';
    const t = byAccess.get(bearer);
    if (!t) return 'unknown';
    return t.expiresAt > Date.now() ? 'valid' : 'expired';
  }

  async function onBot(req: IncomingMessage, u: URL, res: ServerResponse, m: RegExpMatchArray) {
    const token = decodeURIComponent(m[1]!);
    const method = m[2]!;
    const text = await readBody(req, MAX_BODY);
    const valid = token === mock.botToken;
    const body = parseBody(text, req.headers['content-type']);
    botCalls.push({
      token,
      method,
      httpMethod: req.method ?? 'GET',
      query: queryOf(u),
      body,
      valid,
      at: Date.now(),
    });
    if (!valid) return sendJson(res, 401, { ok: false, error_code: 401, description: 'Unauthorized' });
    if (method === 'getMe') return sendJson(res, 200, { ok: true, result: BOT_INFO });
    const fields = { ...queryOf(u), ...(typeof body === 'object' && body ? body : {}) } as Record<
      string,
      unknown
    >;
    return sendJson(res, 200, {
      ok: true,
      result: {
        message_id: botCalls.length,
        chat: { id: fields.chat_id ?? null },
        text: fields.text ?? null,
        method,
      },
    });
  }

  function onKeyCheck(req: IncomingMessage, u: URL, res: ServerResponse) {
    const google = u.pathname === '/v1beta/models';
    const h = req.headers;
    let header: KeyCheck['header'] = null;
    let key: string | null = null;
    if (google && typeof h['x-goog-api-key'] === 'string') {
      header = 'x-goog-api-key';
      key = h['x-goog-api-key'];
    } else if (!google && typeof h['x-api-key'] === 'string') {
      header = 'x-api-key';
      key = h['x-api-key'];
    } else if (!google && /^bearer /i.test(h.authorization ?? '')) {
      header = 'authorization';
      key = h.authorization!.slice(7);
    }
    const ok = key !== null && mock.apiKeys.has(key);
    keyChecks.push({ path: u.pathname, header, key, ok, at: Date.now() });
    if (!ok)
      return sendJson(res, 401, { error: { type: 'authentication_error', message: 'invalid api key' } });
    return sendJson(
      res,
      200,
      google ? { models: [{ name: 'models/mock-1' }] } : { data: [{ id: 'mock-1', object: 'model' }] },
    );
  }

  async function onApi(req: IncomingMessage, u: URL, res: ServerResponse) {
    const text = await readBody(req, MAX_BODY);
    const auth = req.headers.authorization ?? '';
    const bearer = /^bearer /i.test(auth) ? auth.slice(7).trim() : null;
    const rec: ApiRecord = {
      method: req.method ?? 'GET',
      rawPath: req.url ?? '',
      path: u.pathname,
      query: queryOf(u),
      headers: req.headers,
      body: text,
      bearer,
      tokenState: tokenState(bearer),
      at: Date.now(),
    };
    apiRequests.push(rec);
    // `…/echo` reflects the request headers (a careless provider: the vault must scrub them).
    if (u.pathname.endsWith('/echo')) return sendJson(res, 200, { ok: true, headers: req.headers });
    return sendJson(res, 200, { ok: true, method: rec.method, path: rec.path, tokenState: rec.tokenState });
  }

  const BOT_PATH = /^\/bot([^/]+)\/([A-Za-z0-9_]+)$/;
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const u = new URL(req.url ?? '/', 'https://mock.invalid');
    const bot = u.pathname.match(BOT_PATH);
    const route = async () => {
      if (u.pathname === '/oauth/authorize' && req.method === 'GET') return onAuthorize(u, res);
      if (u.pathname === '/oauth/token' && req.method === 'POST') return onToken(req, res);
      if (u.pathname === '/oauth/revoke' && req.method === 'POST') return onRevoke(req, res);
      if (bot && (req.method === 'GET' || req.method === 'POST')) return onBot(req, u, res, bot);
      if ((u.pathname === '/v1/models' || u.pathname === '/v1beta/models') && req.method === 'GET')
        return onKeyCheck(req, u, res);
      return onApi(req, u, res);
    };
    route().catch((err: Error) => {
      if (!res.headersSent) sendJson(res, 500, { error: 'mock_failure', message: err.message });
      else res.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  mock.port = port;
  mock.url = `https://127.0.0.1:${port}`;
  mock.close = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await tlsAgent.close();
    if (ownPki) await pki.dispose();
  };
  return mock;
}

// ---------------------------------------------------------------------------------------------
// Environment

export interface ProviderEnvOptions {
  /** OAuth providers that get no deployment app (`start` must then need a workspace app). */
  withoutApp?: ProviderId[];
  /**
   * OAuth providers that get no revocation endpoint. Only providers without a real default one
   * (suite_b, code_host, notes, chatbot_b): the others would fall back to the real provider.
   */
  withoutRevoke?: ProviderId[];
}

/**
 * `VLT_<P>_AUTHORIZE_URL`, `_TOKEN_URL`, `_REVOKE_URL`, `_API_URL`, `_CLIENT_ID`,
 * `_CLIENT_SECRET` for OAuth providers, `_API_URL` for bot and API-key providers, all pointing
 * at the mock. The issue tracker has no variables (each connection names its own site).
 */
export function providerEnv(
  mock: MockProviders,
  providers: readonly ProviderId[],
  opts: ProviderEnvOptions = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const id of providers) {
    const spec = PROVIDERS[id];
    if (spec.defaults === null) continue;
    const p = spec.envPrefix;
    env[`${p}_API_URL`] = mock.url;
    if (spec.authKind !== 'oauth') continue;
    env[`${p}_AUTHORIZE_URL`] = `${mock.url}/oauth/authorize`;
    env[`${p}_TOKEN_URL`] = `${mock.url}/oauth/token`;
    if (opts.withoutRevoke?.includes(id)) {
      if (spec.defaults.revokeUrl)
        throw new Error(`${id} has a real revocation endpoint; omitting it would send tokens there`);
    } else env[`${p}_REVOKE_URL`] = `${mock.url}/oauth/revoke`;
    if (!opts.withoutApp?.includes(id)) {
      const app = mock.deploymentApp(id);
      env[`${p}_CLIENT_ID`] = app.clientId;
      env[`${p}_CLIENT_SECRET`] = app.clientSecret;
    }
  }
  return env;
}

// ---------------------------------------------------------------------------------------------
// A gateway in front of the mock

export interface ConnectionsGateway {
  mock: MockProviders;
  gw: InProcessGateway;
  base: string;
  /** The workspace owner (signed up, API JWT, its own client address). */
  owner: TestUser;
  admin: Admin;
  /** An enrolled, active agent of the owner's workspace and its access token. */
  newAgent(): Promise<TestAgent & { token: string }>;
  /** SQL on the gateway's database; undefined on embedded PGlite. */
  sql: ((text: string, values?: unknown[]) => Promise<Record<string, unknown>[]>) | undefined;
  close(): Promise<void>;
}

export const ALL_MOCKED: readonly ProviderId[] = [
  'suite_a',
  'suite_b',
  'code_host',
  'notes',
  'board',
  'chatbot_a',
  'chatbot_b',
  'llm_a',
  'llm_b',
  'llm_c',
  'llm_d',
];

/**
 * The in-process gateway with every provider pointed at one mock, trusting the test process
 * as its edge proxy (each client gets its own address: the per-IP limits are real).
 * `embedded`: PGlite and the in-process bus; `services`: the run's PostgreSQL and NATS.
 */
export async function startConnectionsGateway(
  opts: {
    shape?: 'embedded' | 'services';
    providers?: readonly ProviderId[];
    providerOptions?: ProviderEnvOptions;
    env?: Record<string, string>;
  } = {},
): Promise<ConnectionsGateway> {
  const shape = opts.shape ?? 'services';
  const mock = await startMockProviders();
  const bus: Record<string, string> =
    shape === 'services' && realServices.hasNats() ? { NATS_URL: realServices.natsUrl() } : {};
  let gw: InProcessGateway;
  try {
    gw = await startInProcessGateway(
      {
        VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32',
        VLT_TRUST_PROXY: '127.0.0.1/32',
        LOG_LEVEL: 'debug',
        ...bus,
        ...providerEnv(mock, opts.providers ?? ALL_MOCKED, opts.providerOptions),
        ...opts.env,
      },
      { upstreamCa: [mock.pki.caPem] },
      { embeddedDatabase: shape === 'embedded' },
    );
  } catch (err) {
    await mock.close();
    throw err;
  }
  const owner = await newUser(gw.baseUrl, 'conn-owner');
  const pool = gw.databaseUrl ? new pg.Pool({ connectionString: gw.databaseUrl, max: 2 }) : undefined;
  pool?.on('error', () => undefined);
  return {
    mock,
    gw,
    base: gw.baseUrl,
    owner,
    admin: owner.admin,
    async newAgent() {
      const agent = await enrolledAgent(owner.admin);
      return { ...agent, token: await agentToken(gw.baseUrl, agent) };
    },
    sql: pool ? async (text, values) => (await pool.query(text, values)).rows : undefined,
    async close() {
      await pool?.end();
      await gw.close();
      await mock.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The OAuth round trip, as a browser would do it

export interface StartBody {
  service: string;
  scopes: string[];
  label?: string;
  agentId?: string;
  allowedModels?: ('A' | 'B')[];
}

export function startConnectionRequest(admin: Admin, body: StartBody) {
  return http<{ pendingConnectionId: string; authorizationUrl: string; error?: string }>(
    'POST',
    `${admin.base}/v1/connections/start`,
    { headers: admin.headers, json: body },
  );
}

export interface ConnectionRow {
  id: string;
  provider: string;
  service: string;
  label: string;
  status: 'healthy' | 'needs_reauth' | 'revoked';
  singleton: boolean;
  grantedScopes: string[];
  metadata: Record<string, unknown>;
  createdAt: string;
  policies: {
    id: string;
    agentId: string;
    allowedModels: ('A' | 'B')[];
    allowlists: { baseUrl: string; methods: string[]; pathPatterns: string[] }[];
    defaultMode: string;
    stepUpApproval: string;
  }[];
}

export async function listConnectionRows(admin: Admin): Promise<ConnectionRow[]> {
  const r = expectStatus(
    await http<{ connections: ConnectionRow[] }>('GET', `${admin.base}/v1/connections`, {
      headers: admin.headers,
    }),
    200,
  );
  return r.body.connections;
}

/** GET the vault's callback URL the mock redirected to (optionally with a browser session). */
export function followCallback(callbackUrl: string, cookie?: string): Promise<HttpResult<string>> {
  return http<string>('GET', callbackUrl, { headers: cookie ? { cookie } : {} });
}

/**
 * start → the mock's authorize endpoint → the vault's callback, asserting each step; returns
 * the connection the callback created (or re-authorised), found by the pending flow's label.
 */
export async function connectOAuth(
  fx: { admin: Admin; mock: MockProviders },
  body: StartBody,
): Promise<{ connection: ConnectionRow; authorizationUrl: string; callback: HttpResult<string> }> {
  const label = body.label ?? `${body.service}-${randomBytes(3).toString('hex')}`;
  const started = expectStatus(await startConnectionRequest(fx.admin, { ...body, label }), 200);
  const callbackUrl = await fx.mock.approve(started.body.authorizationUrl);
  const callback = await followCallback(callbackUrl);
  if (callback.status !== 200) {
    throw new Error(`the callback answered ${callback.status}: ${callback.text.slice(0, 400)}`);
  }
  const rows = await listConnectionRows(fx.admin);
  const connection = rows.find((c) => c.label === label && c.service === body.service);
  if (!connection) throw new Error(`no connection labelled ${label} after the callback`);
  return { connection, authorizationUrl: started.body.authorizationUrl, callback };
}

/** reauth → the mock → the callback, asserting each step. */
export async function reauthOAuth(
  fx: { admin: Admin; mock: MockProviders },
  connectionId: string,
): Promise<{ authorizationUrl: string; callback: HttpResult<string> }> {
  const started = expectStatus(
    await http<{ pendingConnectionId: string; authorizationUrl: string }>(
      'POST',
      `${fx.admin.base}/v1/connections/${connectionId}/reauth`,
      { headers: fx.admin.headers, json: {} },
    ),
    200,
  );
  const callback = await followCallback(await fx.mock.approve(started.body.authorizationUrl));
  if (callback.status !== 200) {
    throw new Error(`the reauth callback answered ${callback.status}: ${callback.text.slice(0, 400)}`);
  }
  return { authorizationUrl: started.body.authorizationUrl, callback };
}
