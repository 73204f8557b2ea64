/**
 * Small typed helpers that drive the gateway over HTTP the way an admin and an agent do.
 * Setup helpers throw with the request, the expected and the received status and body, so a
 * failing step reads as a precise report; tests assert on the raw results themselves.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT, exportJWK, generateKeyPair, type JWK } from 'jose';
import { request } from 'undici';

export interface HttpResult<T = unknown> {
  method: string;
  url: string;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** Parsed JSON when the body is JSON, otherwise the text. */
  body: T;
}

export interface HttpOptions {
  headers?: Record<string, string>;
  json?: unknown;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- bodies are checked by the tests
export async function http<T = any>(
  method: string,
  url: string,
  opts: HttpOptions = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  let body: string | undefined;
  if (opts.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(opts.json);
  }
  const res = await request(url, {
    method: method as 'GET',
    headers,
    body,
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
  const text = await res.body.text();
  let parsed: unknown = text;
  if (text && /json/i.test(String(res.headers['content-type'] ?? ''))) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { method, url, status: res.statusCode, headers: res.headers, text, body: parsed as T };
}

/** One line that says which request got what, for assertion messages. */
export function describeResult(r: HttpResult): string {
  const u = new URL(r.url);
  return `${r.method} ${u.pathname}${u.search} -> ${r.status} ${r.text.slice(0, 400)}`;
}

export function expectStatus<T>(r: HttpResult<T>, ...expected: number[]): HttpResult<T> {
  if (!expected.includes(r.status)) {
    throw new Error(`expected HTTP ${expected.join(' or ')} from ${describeResult(r as HttpResult)}`);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Users, sessions, API JWTs, PATs

export interface Session {
  /** `name=value; ...`, ready for a Cookie header. */
  cookie: string;
  /** Raw cookie values (secrets the logs must never show). */
  cookieValues: string[];
}

export function sessionFrom(r: HttpResult): Session {
  const raw = r.headers['set-cookie'];
  const list = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  const pairs = list.map((c) => c.split(';')[0]!.trim()).filter((p) => p.includes('='));
  if (!pairs.length) throw new Error(`no Set-Cookie in ${describeResult(r)}`);
  return {
    cookie: pairs.join('; '),
    cookieValues: pairs.map((p) => p.slice(p.indexOf('=') + 1)),
  };
}

export interface SignedUpUser {
  id: string;
  email: string;
  password: string;
  workspaceId: string;
  session: Session;
  setCookie: string[];
}

/** `headers` lets a test pose as a distinct client behind the trusted proxy (per-IP limits). */
export async function signUp(
  base: string,
  email: string,
  password: string,
  name = 'E2E Admin',
  headers: Record<string, string> = {},
) {
  const r = expectStatus(
    await http<{ user: { id: string; email: string }; workspace: { id: string } }>(
      'POST',
      `${base}/api/auth/sign-up`,
      { headers, json: { email, password, name } },
    ),
    201,
  );
  const raw = r.headers['set-cookie'];
  const user: SignedUpUser = {
    id: r.body.user.id,
    email,
    password,
    workspaceId: r.body.workspace.id,
    session: sessionFrom(r),
    setCookie: raw === undefined ? [] : Array.isArray(raw) ? raw : [raw],
  };
  return { user, result: r };
}

export async function signIn(base: string, email: string, password: string): Promise<Session> {
  const r = expectStatus(await http('POST', `${base}/api/auth/sign-in`, { json: { email, password } }), 200);
  return sessionFrom(r);
}

export async function apiJwt(base: string, session: Session): Promise<{ token: string; expiresAt: string }> {
  const r = expectStatus(
    await http<{ token: string; expiresAt: string }>('POST', `${base}/api/auth/token`, {
      headers: { cookie: session.cookie },
    }),
    200,
  );
  return r.body;
}

/** How an admin authenticates: an API JWT (Bearer) or a PAT (X-API-Key). */
export interface Admin {
  base: string;
  headers: Record<string, string>;
}

export const bearerAdmin = (base: string, jwt: string): Admin => ({
  base,
  headers: { authorization: `Bearer ${jwt}` },
});
export const patAdmin = (base: string, pat: string): Admin => ({ base, headers: { 'x-api-key': pat } });

export async function createPat(admin: Admin, name: string, expiresInDays = 7) {
  const r = expectStatus(
    await http<{ token: { id: string; name: string }; plainToken: string }>(
      'POST',
      `${admin.base}/v1/tokens`,
      {
        headers: admin.headers,
        json: { name, expiresInDays },
      },
    ),
    201,
    200,
  );
  return r.body;
}

// ---------------------------------------------------------------------------------------------
// Agents

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

export interface EnrolledAgent {
  id: string;
  name: string;
  workspaceId: string;
  keys: KeyPair;
  publicJwk: JWK;
}

export async function createAgent(admin: Admin, name: string) {
  const r = expectStatus(
    await http<{ agent: { id: string; status: string; name: string }; bootstrapSecret: string }>(
      'POST',
      `${admin.base}/v1/agents`,
      { headers: admin.headers, json: { name } },
    ),
    201,
  );
  return r.body;
}

export async function newAgentKeys(): Promise<{ keys: KeyPair; publicJwk: JWK }> {
  const keys = await generateKeyPair('ES256', { extractable: true });
  const publicJwk = await exportJWK(keys.publicKey);
  return { keys, publicJwk };
}

/** `headers` lets a test pose as a distinct client behind the trusted proxy (per-IP limits). */
export async function bootstrapAgent(
  base: string,
  bootstrapSecret: string,
  headers: Record<string, string> = {},
): Promise<EnrolledAgent> {
  const { keys, publicJwk } = await newAgentKeys();
  const r = expectStatus(
    await http<{ agentId: string; name: string; status: string; workspaceId: string }>(
      'POST',
      `${base}/v1/agents/bootstrap`,
      { headers, json: { bootstrapSecret, publicKey: publicJwk } },
    ),
    200,
  );
  return { id: r.body.agentId, name: r.body.name, workspaceId: r.body.workspaceId, keys, publicJwk };
}

export interface AssertionOptions {
  audience: string;
  iss?: string;
  sub?: string;
  lifetimeSeconds?: number;
  jti?: string;
  iatOffsetSeconds?: number;
  key?: KeyPair['privateKey'];
}

/** The private-key-JWT client assertion of the spec (ES256, iss = sub = agent id, exp <= iat + 60). */
export async function signAssertion(agent: EnrolledAgent, o: AssertionOptions): Promise<string> {
  const iat = Math.floor(Date.now() / 1000) + (o.iatOffsetSeconds ?? 0);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
    .setIssuer(o.iss ?? agent.id)
    .setSubject(o.sub ?? agent.id)
    .setAudience(o.audience)
    .setIssuedAt(iat)
    .setExpirationTime(iat + (o.lifetimeSeconds ?? 60))
    .setJti(o.jti ?? randomUUID())
    .sign(o.key ?? agent.keys.privateKey);
}

export function tokenRequest(base: string, clientAssertion: string) {
  return http<{ access_token: string; token_type: string; expires_in: number }>(
    'POST',
    `${base}/v1/agents/token`,
    {
      json: {
        grant_type: 'client_assertion',
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: clientAssertion,
      },
    },
  );
}

export async function agentAccessToken(
  base: string,
  agent: EnrolledAgent,
  audience: string,
): Promise<string> {
  const r = expectStatus(await tokenRequest(base, await signAssertion(agent, { audience })), 200);
  return r.body.access_token;
}

/** Create, bootstrap and log in an agent in one go. */
export async function enrolAgent(
  admin: Admin,
  audience: string,
  name: string,
  bootstrapHeaders: Record<string, string> = {},
) {
  const created = await createAgent(admin, name);
  const agent = await bootstrapAgent(admin.base, created.bootstrapSecret, bootstrapHeaders);
  const token = await agentAccessToken(admin.base, agent, audience);
  return { agent, token, bootstrapSecret: created.bootstrapSecret };
}

// ---------------------------------------------------------------------------------------------
// Connections and policies

export interface AllowlistEntry {
  baseUrl: string;
  methods: string[];
  pathPatterns: string[];
}

export function issueTrackerConnectionRequest(
  admin: Admin,
  input: { siteUrl: string; email: string; apiToken: string; label?: string },
) {
  return http<{
    connection: { id: string; provider: string; service: string; label: string; status: string };
    auditId: string;
  }>('POST', `${admin.base}/v1/connections/issue-tracker`, { headers: admin.headers, json: input });
}

export async function createIssueTrackerConnection(
  admin: Admin,
  input: { siteUrl: string; email: string; apiToken: string; label?: string },
) {
  return expectStatus(await issueTrackerConnectionRequest(admin, input), 201).body;
}

export interface PolicySettings {
  allowedModels?: ('A' | 'B')[];
  defaultMode?: 'read_only' | 'read_write' | 'custom';
  stepUpApproval?: 'always' | 'risk_based' | 'never';
}

/** Spec defaults are read-only and risk-based step-up; writes need `read_write` and, to run unattended, `never`. */
export const READ_WRITE_UNATTENDED: PolicySettings = {
  allowedModels: ['B'],
  defaultMode: 'read_write',
  stepUpApproval: 'never',
};

export async function createPolicy(
  admin: Admin,
  agentId: string,
  connectionId: string,
  settings: PolicySettings = { allowedModels: ['B'] },
) {
  const r = expectStatus(
    await http<{ policy: { id: string }; auditId: string }>('POST', `${admin.base}/v1/policies`, {
      headers: admin.headers,
      json: { agentId, connectionId, ...settings },
    }),
    201,
  );
  return r.body;
}

export function putAllowlists(admin: Admin, policyId: string, allowlists: AllowlistEntry[]) {
  return http<{ policy: { id: string }; auditId: string }>(
    'PUT',
    `${admin.base}/v1/policies/${policyId}/allowlists`,
    {
      headers: admin.headers,
      json: { allowlists },
    },
  );
}

/** What a reviewer is shown of an approval request: its `requestDetails`. */
export async function approvalDetails(admin: Admin, approvalId: string): Promise<Record<string, unknown>> {
  const r = await http<{ approval: { requestDetails: Record<string, unknown> } }>(
    'GET',
    `${admin.base}/v1/approvals/${approvalId}`,
    { headers: admin.headers },
  );
  return expectStatus(r, 200).body.approval.requestDetails;
}

// ---------------------------------------------------------------------------------------------
// Execution

export interface ExecuteRequest {
  model?: string;
  connectionId?: string;
  /** A singleton service, addressed by name instead of connectionId. */
  service?: string;
  method?: string;
  url?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: unknown;
  approvalId?: string;
}

export interface ExecuteResponse {
  model: string;
  status: number;
  headers: Record<string, unknown>;
  body: unknown;
  auditId: string;
  error?: string;
}

export function execute(dataPlane: string, agentToken: string | undefined, req: ExecuteRequest) {
  return http<ExecuteResponse>('POST', `${dataPlane}/v1/vault/execute`, {
    headers: agentToken === undefined ? {} : { authorization: `Bearer ${agentToken}` },
    json: { model: 'B', ...req },
  });
}

// ---------------------------------------------------------------------------------------------
// Audit

export interface AuditEvent {
  id: string;
  auditId: string;
  timestamp: string;
  actor: string;
  agentId: string | null;
  connectionId: string | null;
  action: string;
  decision: string;
  metadata: Record<string, unknown>;
}

export type AuditQuery = Partial<
  Record<'agentId' | 'connectionId' | 'action' | 'dateFrom' | 'dateTo', string>
>;

export function auditPage(admin: Admin, q: AuditQuery & { cursor?: string; limit?: number }) {
  const qs = new URLSearchParams(
    Object.entries(q).flatMap(([k, v]): [string, string][] => (v === undefined ? [] : [[k, String(v)]])),
  );
  return http<{ events: AuditEvent[]; nextCursor: string | null }>('GET', `${admin.base}/v1/audit?${qs}`, {
    headers: admin.headers,
  });
}

/** Every event matching the query, following `nextCursor` to the end. */
export async function auditAll(admin: Admin, q: AuditQuery, pageSize = 200): Promise<AuditEvent[]> {
  const out: AuditEvent[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const r = expectStatus(await auditPage(admin, { ...q, cursor, limit: pageSize }), 200);
    out.push(...r.body.events);
    if (!r.body.nextCursor) return out;
    cursor = r.body.nextCursor;
  }
  throw new Error('audit pagination did not end after 1000 pages');
}

/**
 * Audit rows are written asynchronously (JetStream -> audit service), so waiting for them is
 * inherent. Polls until `done(events)` holds or the deadline passes; then returns the last read
 * so the caller's assertions report what was there.
 */
export async function pollAudit(
  admin: Admin,
  q: AuditQuery,
  done: (events: AuditEvent[]) => boolean,
  timeoutMs = 30_000,
): Promise<AuditEvent[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const events = await auditAll(admin, q);
    if (done(events) || Date.now() > deadline) return events;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** `{execution_completed: 3, ...}` for readable count assertions. */
export function countByAction(events: AuditEvent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of events) counts[e.action] = (counts[e.action] ?? 0) + 1;
  return counts;
}

// ---------------------------------------------------------------------------------------------
// Provider connections (ADR 0042)

export interface ConnectionError {
  error: string;
  code?: string;
  auditId?: string;
}

export function botTokenConnectionRequest(
  admin: Admin,
  input: { service?: string; botToken: string; label?: string },
) {
  return http<{
    connection: { id: string; provider: string; label: string; status: string };
    botInfo: { id: number; username: string; firstName: string };
    message: string;
    auditId: string;
  }>('POST', `${admin.base}/v1/connections/bot-token`, {
    headers: admin.headers,
    json: { service: 'chatbot_a', ...input },
  });
}

export function apiKeyConnectionRequest(
  admin: Admin,
  input: { service: string; apiKey: string; label?: string },
) {
  return http<{
    connection: { id: string; provider: string; service: string; label: string; status: string };
    auditId: string;
  }>('POST', `${admin.base}/v1/connections/api-key`, { headers: admin.headers, json: input });
}

export function reauthRequest(admin: Admin, connectionId: string) {
  return http<{ pendingConnectionId: string; authorizationUrl: string }>(
    'POST',
    `${admin.base}/v1/connections/${connectionId}/reauth`,
    { headers: admin.headers, json: {} },
  );
}

export function revokeConnectionRequest(admin: Admin, connectionId: string) {
  return http<{ connection: { id: string; status: string }; auditId: string }>(
    'POST',
    `${admin.base}/v1/connections/${connectionId}/revoke`,
    { headers: admin.headers },
  );
}

export interface WorkspaceOAuthAppView {
  id: string;
  provider: string;
  clientId: string;
  createdAt: string;
}

export function createWorkspaceOAuthApp(
  admin: Admin,
  input: { provider: string; clientId: string; clientSecret: string },
) {
  return http<{ app: WorkspaceOAuthAppView; auditId: string }>(
    'POST',
    `${admin.base}/v1/workspace-oauth-apps`,
    { headers: admin.headers, json: input },
  );
}

export function listWorkspaceOAuthApps(admin: Admin) {
  return http<{ apps: WorkspaceOAuthAppView[] }>('GET', `${admin.base}/v1/workspace-oauth-apps`, {
    headers: admin.headers,
  });
}

export function deleteWorkspaceOAuthApp(admin: Admin, id: string) {
  return http('DELETE', `${admin.base}/v1/workspace-oauth-apps/${id}`, { headers: admin.headers });
}

export function putProviderConstraints(admin: Admin, policyId: string, providerConstraints: unknown) {
  return http<{ policy: { id: string; providerConstraints: unknown }; auditId: string }>(
    'PUT',
    `${admin.base}/v1/policies/${policyId}/provider-constraints`,
    { headers: admin.headers, json: { providerConstraints } },
  );
}

export interface ModelAResponse {
  model: 'A';
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
  auditId: string;
}

/** Model A: the agent asks for a short-lived provider access token. */
export function vendToken(
  dataPlane: string,
  agentToken: string | undefined,
  target: { connectionId?: string; service?: string },
) {
  return http<ModelAResponse & ConnectionError>('POST', `${dataPlane}/v1/vault/execute`, {
    headers: agentToken === undefined ? {} : { authorization: `Bearer ${agentToken}` },
    json: { model: 'A', ...target },
  });
}

export interface ResolvedCredential {
  apiKey: string;
  extra: Record<string, unknown>;
  source: string;
  mode: string;
  cacheTtlMs: number;
}

export function resolveCredential(
  dataPlane: string,
  agentToken: string | undefined,
  body: { kind: 'model_provider' | 'channel' | 'plugin_config'; provider: string; profileId?: string },
) {
  return http<ResolvedCredential & ConnectionError>('POST', `${dataPlane}/v1/credentials/resolve`, {
    headers: agentToken === undefined ? {} : { authorization: `Bearer ${agentToken}` },
    json: body,
  });
}

/** The audit export as text (`json` or `csv`), for secret-leak assertions over every row. */
export async function auditExportText(admin: Admin, format: 'json' | 'csv', q: AuditQuery = {}) {
  const qs = new URLSearchParams({ format, ...(q as Record<string, string>) });
  const r = expectStatus(
    await http<unknown>('GET', `${admin.base}/v1/audit/export?${qs}`, { headers: admin.headers }),
    200,
  );
  return r.text;
}
