/**
 * Shared set-up for tests/identity: a gateway on its own fresh database (so rate-limit counters,
 * signing keys and first-user rules never leak between files), distinct client addresses through
 * a trusted X-Forwarded-For, and low-level builders for hostile assertions and JWTs.
 */
import { randomBytes, randomUUID, type webcrypto } from 'node:crypto';
import { SignJWT, exportJWK, generateKeyPair, importJWK, type JWK, type JWTPayload } from 'jose';
import pg from 'pg';
import { openJson, parseMasterKeys } from '@vlt/crypto';
import { http, expectStatus, sessionFrom, type Admin, type HttpResult, type Session } from './api-client.js';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.js';
import { ownDatabase, realServices } from './services.js';

export type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
type CryptoKey = webcrypto.CryptoKey;

// ---------------------------------------------------------------------------------------------
// Client addresses

let ipCounter = 0;
const ipBase = randomBytes(1)[0]! % 200;

/**
 * A fresh address per logical client. The per-IP limits (bootstrap 5/min, token 30/min,
 * sign-in, sign-up) are real, so every client of a test gets its own.
 */
export function nextIp(): string {
  ipCounter += 1;
  const n = ipCounter;
  return `10.${ipBase}.${(n >> 8) & 255}.${n & 255}`;
}

export const fromIp = (ip: string): Record<string, string> => ({ 'x-forwarded-for': ip });

// ---------------------------------------------------------------------------------------------
// Databases and gateways

export const missingServices = (): string | null =>
  realServices.hasPostgres() ? null : realServices.missing();

/** An empty, migrated database of its own, next to the run's database. */
export const freshDatabase = ownDatabase;

export interface IdentityGateway {
  baseUrl: string;
  databaseUrl: string;
  masterKey: string;
  gw: InProcessGateway;
  /** Runs SQL against this gateway's own database (white-box setup and checks). */
  sql<R extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}

/** The in-process gateway on a fresh database, trusting the test process as its edge proxy. */
export async function startIdentityGateway(
  label: string,
  env: Record<string, string> = {},
): Promise<IdentityGateway> {
  const db = await freshDatabase(label);
  const masterKey = randomBytes(32).toString('base64');
  const gw = await startInProcessGateway({
    DATABASE_URL: db.url,
    VLT_MASTER_KEY: masterKey,
    VLT_TRUST_PROXY: '127.0.0.1/32',
    LOG_LEVEL: 'warn',
    ...env,
  });
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  // Dropping the database at the end terminates idle clients; that must not be an uncaught error.
  pool.on('error', () => undefined);
  return {
    baseUrl: gw.baseUrl,
    databaseUrl: db.url,
    masterKey,
    gw,
    async sql(text, values) {
      return (await pool.query(text, values)).rows;
    },
    async close() {
      await gw.close();
      await pool.end();
      await db.drop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Users

export interface TestUser {
  id: string;
  email: string;
  password: string;
  workspaceId: string;
  ip: string;
  session: Session;
  jwt: string;
  admin: Admin;
}

export async function apiJwtFor(base: string, session: Session, ip: string): Promise<string> {
  const r = expectStatus(
    await http<{ token: string }>('POST', `${base}/api/auth/token`, {
      headers: { cookie: session.cookie, ...fromIp(ip) },
    }),
    200,
  );
  return r.body.token;
}

/** Signs up a new account (its own workspace, as owner) and gets its API JWT. */
export async function newUser(base: string, tag = 'user'): Promise<TestUser> {
  const ip = nextIp();
  const email = `${tag}-${randomBytes(4).toString('hex')}@identity.test`;
  const password = `pw-${randomBytes(12).toString('hex')}`;
  const r = expectStatus(
    await http<{ user: { id: string }; workspace: { id: string } }>('POST', `${base}/api/auth/sign-up`, {
      headers: fromIp(ip),
      json: { email, password, name: tag },
    }),
    201,
  );
  const session = sessionFrom(r);
  const jwt = await apiJwtFor(base, session, ip);
  return {
    id: r.body.user.id,
    email,
    password,
    workspaceId: r.body.workspace.id,
    ip,
    session,
    jwt,
    admin: { base, headers: { authorization: `Bearer ${jwt}`, ...fromIp(ip) } },
  };
}

export function signInRequest(base: string, email: string, password: string, ip: string) {
  return http<{ user: { id: string } }>('POST', `${base}/api/auth/sign-in`, {
    headers: fromIp(ip),
    json: { email, password },
  });
}

export const bearer = (base: string, token: string, ip = nextIp()): Admin => ({
  base,
  headers: { authorization: `Bearer ${token}`, ...fromIp(ip) },
});

/** Exchanges a session-bound JWT for one in another workspace (spec: token exchange). */
export function exchange(admin: Admin, workspaceId: string, requestedScopes?: string[]) {
  return http<{ accessToken: string; tokenType: string; expiresIn: number }>(
    'POST',
    `${admin.base}/api/internal/token/exchange`,
    {
      headers: admin.headers,
      json: requestedScopes === undefined ? { workspaceId } : { workspaceId, requestedScopes },
    },
  );
}

/**
 * Makes `member` a `role` in `owner`'s workspace and returns an API JWT acting there: sign-in
 * lands in the member's own (first) workspace, so the JWT comes from the token exchange.
 */
export async function joinAs(
  owner: TestUser,
  member: TestUser,
  role: 'viewer' | 'member' | 'admin' | 'owner',
) {
  expectStatus(
    await http('POST', `${owner.admin.base}/v1/workspaces/${owner.workspaceId}/members`, {
      headers: owner.admin.headers,
      json: { email: member.email, role },
    }),
    201,
  );
  const r = expectStatus(await exchange(member.admin, owner.workspaceId), 200);
  return bearer(owner.admin.base, r.body.accessToken, member.ip);
}

export function decodeJwtParts(token: string): {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
} {
  const [h, p] = token.split('.');
  return {
    header: JSON.parse(Buffer.from(h!, 'base64url').toString('utf8')) as Record<string, unknown>,
    payload: JSON.parse(Buffer.from(p!, 'base64url').toString('utf8')) as Record<string, unknown>,
  };
}

// ---------------------------------------------------------------------------------------------
// Agents

export interface TestAgent {
  id: string;
  workspaceId: string;
  keys: KeyPair;
  publicJwk: JWK;
  /** The address this agent's machine calls from. */
  ip: string;
}

export async function newAgentKeys(): Promise<{ keys: KeyPair; publicJwk: JWK }> {
  const keys = await generateKeyPair('ES256', { extractable: true });
  return { keys, publicJwk: await exportJWK(keys.publicKey) };
}

export async function createAgentAs(admin: Admin, name = `agent-${randomBytes(3).toString('hex')}`) {
  const r = expectStatus(
    await http<{ agent: { id: string; status: string }; bootstrapSecret: string }>(
      'POST',
      `${admin.base}/v1/agents`,
      {
        headers: admin.headers,
        json: { name },
      },
    ),
    201,
  );
  return r.body;
}

export function bootstrapRequest(base: string, bootstrapSecret: string, publicKey: unknown, ip: string) {
  return http<{ agentId: string; name: string; status: string; workspaceId: string }>(
    'POST',
    `${base}/v1/agents/bootstrap`,
    {
      headers: fromIp(ip),
      json: { bootstrapSecret, publicKey },
    },
  );
}

/** Create + bootstrap: an `active` agent with its key pair. */
export async function enrolledAgent(admin: Admin): Promise<TestAgent & { bootstrapSecret: string }> {
  const created = await createAgentAs(admin);
  const { keys, publicJwk } = await newAgentKeys();
  const ip = nextIp();
  const r = expectStatus(await bootstrapRequest(admin.base, created.bootstrapSecret, publicJwk, ip), 200);
  return {
    id: r.body.agentId,
    workspaceId: r.body.workspaceId,
    keys,
    publicJwk,
    ip,
    bootstrapSecret: created.bootstrapSecret,
  };
}

export interface AssertionSpec {
  header?: Record<string, unknown>;
  /** Claims that replace the defaults; `undefined` removes one. */
  claims?: Record<string, unknown>;
  key?: KeyPair['privateKey'];
  audience: string;
}

/** An ES256 client assertion with every field under the test's control. */
export async function assertionFor(agent: TestAgent, spec: AssertionSpec): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iss: agent.id,
    sub: agent.id,
    aud: spec.audience,
    iat: now,
    exp: now + 60,
    jti: randomUUID(),
    ...spec.claims,
  };
  for (const k of Object.keys(claims)) if (claims[k] === undefined) delete claims[k];
  return new SignJWT(claims as JWTPayload)
    .setProtectedHeader({ alg: 'ES256', typ: 'JWT', ...spec.header })
    .sign(spec.key ?? agent.keys.privateKey);
}

export function tokenRequestFrom(base: string, clientAssertion: string, ip: string) {
  return http<{ access_token: string; token_type: string; expires_in: number; error?: string }>(
    'POST',
    `${base}/v1/agents/token`,
    {
      headers: fromIp(ip),
      json: {
        grant_type: 'client_assertion',
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: clientAssertion,
      },
    },
  );
}

export async function agentToken(base: string, agent: TestAgent, audience = base): Promise<string> {
  const r = expectStatus(
    await tokenRequestFrom(base, await assertionFor(agent, { audience }), agent.ip),
    200,
  );
  return r.body.access_token;
}

/**
 * Is this agent token accepted by the data plane at `dataPlane`? A deliberately incomplete
 * execute body: authentication runs first (onRequest), so an accepted token gets the body's
 * 400 and a refused one 401, without any upstream call or control-plane round trip.
 */
export async function dataPlaneStatus(dataPlane: string, token: string): Promise<number> {
  const r = await http('POST', `${dataPlane}/v1/vault/execute`, {
    headers: { authorization: `Bearer ${token}` },
    json: { model: 'B' },
  });
  return r.status;
}

// ---------------------------------------------------------------------------------------------
// API JWT forgery (white-box: the test holds the gateway's master key and database)

/** The gateway's real RS256 signing key `kid`, unsealed with its master key from its own database. */
export async function realSigningKey(
  g: IdentityGateway,
  kid: string,
): Promise<{ kid: string; privateKey: CryptoKey; publicJwk: JWK }> {
  const rows = await g.sql<{ kid: string; private_key: unknown; public_jwk: JWK }>(
    'SELECT kid, private_key, public_jwk FROM signing_keys WHERE kid = $1',
    [kid],
  );
  const row = rows[0];
  if (!row) throw new Error(`the gateway has no signing key ${kid}`);
  const jwk = openJson<JWK>(parseMasterKeys(g.masterKey), row.private_key, `signing-key:${row.kid}`);
  return {
    kid: row.kid,
    privateKey: (await importJWK(jwk, 'RS256')) as CryptoKey,
    publicJwk: row.public_jwk,
  };
}

export async function signApiJwt(
  key: { kid: string; privateKey: CryptoKey | Uint8Array },
  claims: Record<string, unknown>,
  alg = 'RS256',
): Promise<string> {
  return new SignJWT(claims as JWTPayload)
    .setProtectedHeader({ alg, kid: key.kid, typ: 'JWT' })
    .sign(key.privateKey);
}

export const unsignedJwt = (
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  signature = '',
): string =>
  `${Buffer.from(JSON.stringify(header)).toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${signature}`;

/** One HTTP call, returned for assertions with a readable description. */
export type Res = HttpResult;

/**
 * Polls a data plane until it refuses `token` (401) or `boundMs` passes (the spec's 1 s
 * revocation bound); returns the last status and how long refusal took from `since`.
 */
export async function refusalAfter(
  dataPlane: string,
  token: string,
  since: number,
  boundMs = 1000,
): Promise<{ status: number; elapsedMs: number }> {
  for (;;) {
    const status = await dataPlaneStatus(dataPlane, token);
    const elapsedMs = performance.now() - since;
    if (status === 401 || elapsedMs > boundMs) return { status, elapsedMs };
    await new Promise((r) => setTimeout(r, 5));
  }
}

// ---------------------------------------------------------------------------------------------
// Route matrices

export interface RouteCase {
  method: string;
  /** Path with `:name` placeholders filled from an id map. */
  path: string;
  body?: unknown;
}

export const fillPath = (path: string, ids: Record<string, string>): string =>
  path.replace(/:(\w+)/g, (_m, k: string) => {
    const v = ids[k];
    if (v === undefined) throw new Error(`no id for :${k} in ${path}`);
    return v;
  });

export function callRoute(
  base: string,
  route: RouteCase,
  ids: Record<string, string>,
  headers: Record<string, string>,
) {
  return http<{ error?: string }>(route.method, `${base}${fillPath(route.path, ids)}`, {
    headers,
    ...(route.body === undefined ? {} : { json: route.body }),
  });
}

/** A 404 from the router ("no such route") is not a 404 from workspace scoping. */
export const isNoRoute = (r: HttpResult<{ error?: string }>): boolean =>
  r.status === 404 && typeof r.body === 'object' && /^no route for /.test(String(r.body?.error));

/**
 * Seeds rows the in-process gateway cannot create over HTTP here: connections are validated
 * against an HTTPS upstream whose test CA this process cannot trust (NODE_EXTRA_CA_CERTS is
 * read at process start), and approvals need a full brokered request. The routes under test
 * only read these rows.
 */
export async function seedConnection(
  g: IdentityGateway,
  workspaceId: string,
  kind: { provider: string; service: string; singleton: boolean } = {
    provider: 'issues',
    service: 'issues',
    singleton: false,
  },
): Promise<string> {
  const id = randomUUID();
  await g.sql(
    `INSERT INTO connections (id, workspace_id, provider, service, label, status, singleton, granted_scopes, metadata)
     VALUES ($1, $2, $3, $4, $5, 'healthy', $6, '{}', $7)`,
    [
      id,
      workspaceId,
      kind.provider,
      kind.service,
      `seeded ${kind.service}`,
      kind.singleton,
      JSON.stringify({ siteUrl: 'https://tracker.invalid' }),
    ],
  );
  return id;
}

export async function seedApproval(
  g: IdentityGateway,
  p: { workspaceId: string; policyId: string; agentId: string; connectionId: string; actor: string },
): Promise<string> {
  const id = randomUUID();
  await g.sql(
    `INSERT INTO approval_requests (id, workspace_id, policy_id, agent_id, connection_id, actor, status, request_details, fingerprint, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, now() + interval '5 minutes')`,
    [
      id,
      p.workspaceId,
      p.policyId,
      p.agentId,
      p.connectionId,
      p.actor,
      JSON.stringify({ method: 'POST', url: 'https://tracker.invalid/rest/api/3/issue' }),
      'seeded',
    ],
  );
  return id;
}

export async function seedNotificationChannel(
  g: IdentityGateway,
  workspaceId: string,
  connectionId: string,
): Promise<string> {
  const id = randomUUID();
  await g.sql(
    `INSERT INTO notification_channels (id, workspace_id, channel_type, connection_id, config) VALUES ($1, $2, 'chatbot_a', $3, $4)`,
    [id, workspaceId, connectionId, JSON.stringify({ chatId: '42' })],
  );
  return id;
}
