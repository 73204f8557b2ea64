/**
 * The end-to-end slice, written once and run against both shapes (split processes over NATS and
 * PostgreSQL, and the all-in-one process). It registers its tests in the caller's `describe`;
 * they run in order and share state, like an admin and an agent working through the product.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  SignJWT,
  createLocalJWKSet,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  jwtVerify,
} from 'jose';
import { expect, it } from 'vitest';
import {
  type Admin,
  type AllowlistEntry,
  type AuditEvent,
  type EnrolledAgent,
  type ExecuteRequest,
  type HttpResult,
  apiJwt,
  auditAll,
  auditPage,
  bearerAdmin,
  countByAction,
  bootstrapAgent,
  createAgent,
  createIssueTrackerConnection,
  createPat,
  createPolicy,
  describeResult,
  enrolAgent,
  execute,
  expectStatus,
  http,
  issueTrackerConnectionRequest,
  patAdmin,
  pollAudit,
  putAllowlists,
  READ_WRITE_UNATTENDED,
  signAssertion,
  signIn,
  signUp,
  tokenRequest,
} from '../support/api-client.js';
import { parseCsv } from '../support/csv.js';
import type { MockIssueTracker } from '../support/mock-issue-tracker.js';
import type { E2eFixtures } from '../support/e2e-fixtures.js';
import type { LogLine } from '../support/processes.js';
import { SecretBag } from '../support/secrets.js';
import type { Tripwires } from '../support/tripwire.js';

export interface ScenarioEnv {
  /** Where admins and agent authentication go. */
  controlPlane: string;
  /** Where `/v1/vault/*` goes: every replica (the all-in-one passes its one URL). */
  dataPlanes: string[];
  /** PUBLIC_BASE_URL: API JWT issuer and agent-assertion audience. */
  publicBaseUrl: string;
  mock: MockIssueTracker;
  /** A second site, closed mid-scenario to produce an upstream failure. */
  mockDown: MockIssueTracker;
  mockAccount: { email: string; apiToken: string };
  mockDownAccount: { email: string; apiToken: string };
  tripwires: Tripwires;
  masterKey: string;
  /** Every line every process printed so far. */
  logs(): LogLine[];
}

/** The columns the spec fixes for the CSV export, in order. */
const CSV_COLUMNS = [
  'audit_id',
  'timestamp',
  'actor',
  'agent_id',
  'connection_id',
  'action',
  'decision',
  'metadata',
];

/** Terminal audit action implied by the gateway's answer; other statuses write no execution rows we count. */
function terminalAction(status: number): string | undefined {
  return { 200: 'execution_completed', 403: 'execution_denied', 502: 'execution_error' }[status];
}

interface LedgerEntry {
  label: string;
  connectionId: string;
  status: number;
  auditId?: string;
}

const random = (n = 12) => randomBytes(n).toString('hex');

/**
 * Only called after a check that must hold at once has failed: finds out whether the expected
 * answer comes later (a propagation delay) or never, so the failure report says which.
 */
async function staleness(probe: () => Promise<HttpResult>, want: number, maxMs = 3_000): Promise<string> {
  const t0 = Date.now();
  for (let n = 1; Date.now() - t0 < maxMs; n++) {
    await new Promise((r) => setTimeout(r, 20));
    const r = await probe();
    if (r.status === want)
      return `diagnosis: answered ${want} only ${Date.now() - t0} ms later (attempt ${n + 1}): stale cache`;
  }
  return `diagnosis: still not ${want} after ${maxMs} ms`;
}

/** The scenario's environment from the shared fixtures and where each process listens. */
export function scenarioEnv(
  f: E2eFixtures,
  where: { controlPlane: string; dataPlanes: string[]; publicBaseUrl: string },
  logs: () => LogLine[],
): ScenarioEnv {
  return {
    ...where,
    mock: f.mock,
    mockDown: f.mockDown,
    mockAccount: f.mockAccount,
    mockDownAccount: f.mockDownAccount,
    tripwires: f.tripwires,
    masterKey: f.masterKey,
    logs,
  };
}

export function gatewayScenario(getEnv: () => ScenarioEnv): void {
  const secrets = new SecretBag();
  // State built up step by step; each step asserts the ones it needs exist.
  const s = {} as {
    admin: Admin;
    admin2: Admin;
    jwt: string;
    session: { cookie: string };
    user: { id: string; workspaceId: string; email: string; password: string };
    pat: string;
    main: EnrolledAgent;
    mainToken: string;
    noPolicy: EnrolledAgent;
    noPolicyToken: string;
    edge: EnrolledAgent;
    edgeToken: string;
    foreign: EnrolledAgent;
    foreignToken: string;
    connId: string;
    connDownId: string;
    policyId: string;
  };
  // Every execution by the `main` agent, for the audit assertions.
  const ledger: LedgerEntry[] = [];
  let xffCounter = 0;
  /** Bootstrap is rate limited per client IP; each enrolment poses as its own client behind the trusted proxy. */
  const nextClientIp = () => `198.51.100.${++xffCounter}`;

  const need = <K extends keyof typeof s>(...keys: K[]) => {
    for (const k of keys) if (s[k] === undefined) throw new Error(`an earlier step did not produce "${k}"`);
  };
  const dps = () => getEnv().dataPlanes;
  const dpAt = (i: number) => dps()[i % dps().length]!;

  async function mainCall(label: string, dp: string, req: ExecuteRequest) {
    const r = await execute(dp, s.mainToken, req);
    ledger.push({ label, connectionId: req.connectionId!, status: r.status, auditId: r.body?.auditId });
    return r;
  }

  async function enrol(admin: Admin, name: string) {
    const env = getEnv();
    const enrolled = await enrolAgent(admin, env.publicBaseUrl, name, { 'x-forwarded-for': nextClientIp() });
    secrets.add(`bootstrap secret (${name})`, enrolled.bootstrapSecret, 'vltb_');
    secrets.add(`access token (${name})`, enrolled.token, 'vltt_');
    return enrolled;
  }

  const phase1Allowlist = (): AllowlistEntry[] => [
    {
      baseUrl: getEnv().mock.baseUrl,
      methods: ['GET', 'POST', 'PUT', 'DELETE'],
      pathPatterns: ['/rest/api/3/myself', '/rest/api/3/search', '/rest/api/3/issue*'],
    },
  ];

  it('signs up, signs in and issues an RS256 API JWT that verifies against the published JWKS', async () => {
    const env = getEnv();
    const cp = env.controlPlane;
    const email = `admin-${random(4)}@e2e.test`;
    const password = `pw-${random(10)}`;
    secrets.add('user password', password);

    const short = await http('POST', `${cp}/api/auth/sign-up`, {
      json: { email: `short-${random(4)}@e2e.test`, password: 'elevenchars' },
    });
    expect(short.status, describeResult(short)).toBe(400);

    const { user, result } = await signUp(cp, email, password);
    expect(result.body.user.email).toBe(email);
    expect(
      user.setCookie.some((c) => /;\s*httponly/i.test(c)),
      `session cookie must be HttpOnly: ${user.setCookie}`,
    ).toBe(true);
    user.session.cookieValues.forEach((v) => secrets.add('session cookie (sign-up)', v));

    const wrong = await http('POST', `${cp}/api/auth/sign-in`, { json: { email, password: `${password}x` } });
    expect(wrong.status, describeResult(wrong)).toBe(401);
    const session = await signIn(cp, email, password);
    session.cookieValues.forEach((v) => secrets.add('session cookie (sign-in)', v));

    const noCookie = await http('POST', `${cp}/api/auth/token`);
    expect(noCookie.status, describeResult(noCookie)).toBe(401);

    const { token, expiresAt } = await apiJwt(cp, session);
    secrets.addJwt('API JWT', token);
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
    secrets.add('PAT', pat.plainToken, 'vltp_');
    const viaPat = await http('GET', `${cp}/v1/connections`, {
      headers: patAdmin(cp, pat.plainToken).headers,
    });
    expect(viaPat.status, describeResult(viaPat)).toBe(200);
    const badPat = await http('GET', `${cp}/v1/connections`, {
      headers: { 'x-api-key': `vltp_${random(20)}` },
    });
    expect(badPat.status, describeResult(badPat)).toBe(401);

    // A second, unrelated workspace for the isolation checks.
    const password2 = `pw-${random(10)}`;
    secrets.add('user 2 password', password2);
    const u2 = await signUp(cp, `other-${random(4)}@e2e.test`, password2);
    u2.user.session.cookieValues.forEach((v) => secrets.add('session cookie (user 2)', v));
    const jwt2 = (await apiJwt(cp, u2.user.session)).token;
    secrets.addJwt('API JWT (user 2)', jwt2);

    Object.assign(s, {
      admin,
      admin2: bearerAdmin(cp, jwt2),
      jwt: token,
      session,
      user,
      pat: pat.plainToken,
    });
  });

  it('enrols agents with ES256 keys and exchanges only valid assertions for vltt_ tokens', async () => {
    need('admin', 'admin2');
    const env = getEnv();
    const cp = env.controlPlane;

    const empty = await http('POST', `${cp}/v1/agents`, { headers: s.admin.headers, json: { name: '' } });
    expect(empty.status, describeResult(empty)).toBe(400);

    const created = await createAgent(s.admin, 'e2e-main');
    expect(created.agent.status).toBe('created');
    expect(created.bootstrapSecret.startsWith('vltb_')).toBe(true);
    secrets.add('bootstrap secret (main)', created.bootstrapSecret, 'vltb_');

    // A P-384 key is not what the spec accepts; the failed attempt must not burn the secret.
    const p384 = await exportJWK((await generateKeyPair('ES384', { extractable: true })).publicKey);
    const badKey = await http('POST', `${cp}/v1/agents/bootstrap`, {
      headers: { 'x-forwarded-for': nextClientIp() },
      json: { bootstrapSecret: created.bootstrapSecret, publicKey: p384 },
    });
    expect(badKey.status, describeResult(badKey)).toBe(400);

    const main = await bootstrapAgent(cp, created.bootstrapSecret, { 'x-forwarded-for': nextClientIp() });
    expect(main.id).toBe(created.agent.id);
    expect(main.workspaceId).toBe(s.user.workspaceId);

    const reused = await http('POST', `${cp}/v1/agents/bootstrap`, {
      headers: { 'x-forwarded-for': nextClientIp() },
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
    secrets.add('access token (main)', ok.body.access_token, 'vltt_');

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

    const noPolicy = await enrol(s.admin, 'e2e-no-policy');
    const edge = await enrol(s.admin, 'e2e-edge-cases');
    const foreign = await enrol(s.admin2, 'e2e-other-workspace');
    Object.assign(s, {
      main,
      mainToken: ok.body.access_token,
      noPolicy: noPolicy.agent,
      noPolicyToken: noPolicy.token,
      edge: edge.agent,
      edgeToken: edge.token,
      foreign: foreign.agent,
      foreignToken: foreign.token,
    });
  });

  it('validates issue-tracker connections upstream and never returns the credential', async () => {
    need('admin', 'admin2');
    const { mock, mockDown, mockAccount, mockDownAccount, tripwires } = getEnv();
    secrets.add('issue-tracker API token', mockAccount.apiToken);
    secrets.add('issue-tracker API token (second site)', mockDownAccount.apiToken);
    secrets.add('injected Basic credentials', mock.expectedAuthorization.slice('Basic '.length));
    secrets.add(
      'injected Basic credentials (second site)',
      mockDown.expectedAuthorization.slice('Basic '.length),
    );

    const wrongToken = `wrong-${random(12)}`;
    secrets.add('rejected issue-tracker API token', wrongToken);
    const before = mock.requests.length;
    const wrong = await issueTrackerConnectionRequest(s.admin, {
      siteUrl: mock.baseUrl,
      email: mockAccount.email,
      apiToken: wrongToken,
    });
    expect(
      wrong.status >= 400 && wrong.status < 500,
      `credentials the site refuses: ${describeResult(wrong)}`,
    ).toBe(true);
    const probe = mock.requests.slice(before);
    expect(probe.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /rest/api/3/myself']);
    expect(probe[0]!.authorized).toBe(false);

    const plain = await issueTrackerConnectionRequest(s.admin, {
      siteUrl: mock.baseUrl.replace('https:', 'http:'),
      email: mockAccount.email,
      apiToken: mockAccount.apiToken,
    });
    expect(plain.status, `http:// site URL: ${describeResult(plain)}`).toBe(400);

    const ssrf = await issueTrackerConnectionRequest(s.admin, {
      siteUrl: tripwires.v4.origin,
      email: mockAccount.email,
      apiToken: mockAccount.apiToken,
    });
    expect(ssrf.status >= 400 && ssrf.status < 600 && ssrf.status !== 201, describeResult(ssrf)).toBe(true);
    expect(tripwires.hits(), 'site URL on a blocked address must not be contacted').toEqual([]);
    expect(mock.requests.length).toBe(before + 1);

    const created = await createIssueTrackerConnection(s.admin, {
      siteUrl: mock.baseUrl,
      email: mockAccount.email,
      apiToken: mockAccount.apiToken,
      label: 'E2E tracker',
    });
    expect(created.connection).toMatchObject({
      provider: 'issues',
      service: 'issues',
      label: 'E2E tracker',
      status: 'healthy',
    });
    expect(typeof created.auditId).toBe('string');
    const validation = mock.requests.at(-1)!;
    expect(`${validation.method} ${validation.path}`).toBe('GET /rest/api/3/myself');
    expect(validation.headers.authorization).toBe(mock.expectedAuthorization);

    const down = await createIssueTrackerConnection(s.admin, {
      siteUrl: mockDown.baseUrl,
      email: mockDownAccount.email,
      apiToken: mockDownAccount.apiToken,
    });

    for (const admin of [s.admin, patAdmin(s.admin.base, s.pat)]) {
      const list = expectStatus(
        await http<{ connections: { id: string }[] }>('GET', `${admin.base}/v1/connections`, {
          headers: admin.headers,
        }),
        200,
      );
      expect(list.body.connections.map((c) => c.id).sort()).toEqual(
        [created.connection.id, down.connection.id].sort(),
      );
      expect(secrets.scanText('GET /v1/connections', list.text)).toEqual([]);
    }
    const other = expectStatus(
      await http<{ connections: { id: string }[] }>('GET', `${s.admin2.base}/v1/connections`, {
        headers: s.admin2.headers,
      }),
      200,
    );
    expect(other.body.connections, 'another workspace must not see these connections').toEqual([]);

    Object.assign(s, { connId: created.connection.id, connDownId: down.connection.id });
  });

  it('binds agents to connections with policies; allowlist base URLs must be HTTPS', async () => {
    need('admin', 'admin2', 'main', 'edge', 'foreign', 'connId', 'connDownId');
    const { mock, mockDown } = getEnv();

    const policy = await createPolicy(s.admin, s.main.id, s.connId, READ_WRITE_UNATTENDED);
    expect(typeof policy.policy.id).toBe('string');
    expect(typeof policy.auditId).toBe('string');

    const insecure = await putAllowlists(s.admin, policy.policy.id, [
      { baseUrl: mock.baseUrl.replace('https:', 'http:'), methods: ['GET'], pathPatterns: ['/rest/api/3/*'] },
    ]);
    expect(insecure.status, `http:// allowlist entry: ${describeResult(insecure)}`).toBe(400);

    const put = expectStatus(await putAllowlists(s.admin, policy.policy.id, phase1Allowlist()), 200);
    expect(put.body.policy.id).toBe(policy.policy.id);
    expect(typeof put.body.auditId).toBe('string');

    const downPolicy = await createPolicy(s.admin, s.main.id, s.connDownId, READ_WRITE_UNATTENDED);
    expectStatus(
      await putAllowlists(s.admin, downPolicy.policy.id, [
        { baseUrl: mockDown.baseUrl, methods: ['GET'], pathPatterns: ['/rest/api/3/*'] },
      ]),
      200,
    );
    // Left at the spec defaults (read-only): the edge-case agent also proves writes are refused.
    const edgePolicy = await createPolicy(s.admin, s.edge.id, s.connId);
    expectStatus(await putAllowlists(s.admin, edgePolicy.policy.id, phase1Allowlist()), 200);

    // Another workspace cannot bind its agent to this workspace's connection.
    const cross = await http('POST', `${s.admin2.base}/v1/policies`, {
      headers: s.admin2.headers,
      json: { agentId: s.foreign.id, connectionId: s.connId, allowedModels: ['B'] },
    });
    expect([400, 403, 404], `cross-workspace policy: ${describeResult(cross)}`).toContain(cross.status);

    s.policyId = policy.policy.id;
  });

  it('brokers calls through every data-plane replica, injecting Basic credentials and stripping the agent’s own', async () => {
    need('mainToken', 'connId');
    const { mock, mockAccount } = getEnv();
    for (const [i, dp] of dps().entries()) {
      const before = mock.requests.length;
      const r = await mainCall(`myself via replica ${i}`, dp, {
        connectionId: s.connId,
        method: 'GET',
        url: `${mock.baseUrl}/rest/api/3/myself`,
        headers: {
          AuThOrIzAtIoN: `Bearer agent-supplied-${random(8)}`,
          Cookie: `session=agent-cookie-${random(8)}`,
          Host: 'evil.example',
          'X-E2E-Marker': `replica-${i}`,
        },
      });
      expect(r.status, `replica ${i} (${dp}), right after setup, no retry: ${describeResult(r)}`).toBe(200);
      expect(r.body.model).toBe('B');
      expect(r.body.status).toBe(200);
      expect((r.body.body as { emailAddress: string }).emailAddress).toBe(mockAccount.email);
      expect(typeof r.body.auditId).toBe('string');
      expect(mock.requests.length, 'exactly one upstream request per call').toBe(before + 1);
      const up = mock.requests.at(-1)!;
      expect(up.headers.authorization, 'gateway must inject the connection’s Basic credentials').toBe(
        mock.expectedAuthorization,
      );
      expect(up.headers.cookie, 'agent Cookie header must be stripped').toBeUndefined();
      expect(up.headers.host, 'agent Host header must be stripped').toBe(`127.0.0.1:${mock.port}`);
      expect(up.headers['x-e2e-marker'], 'other agent headers pass through').toBe(`replica-${i}`);
      expect(secrets.scanText('execute response', r.text), 'the response must not echo credentials').toEqual(
        [],
      );
    }
  });

  it('creates, reads, updates, comments on, transitions, searches and deletes issues across replicas', async () => {
    need('mainToken', 'connId');
    const { mock } = getEnv();
    const a = dpAt(0);
    const b = dpAt(1);
    const base = `${mock.baseUrl}/rest/api/3`;
    const call = (
      label: string,
      dp: string,
      method: string,
      path: string,
      extra: Partial<ExecuteRequest> = {},
    ) => mainCall(label, dp, { connectionId: s.connId, method, url: `${base}${path}`, ...extra });
    const ok = <T>(r: HttpResult<T>) => expectStatus(r, 200);

    const summary = `e2e issue ${random(4)}`;
    const created = ok(
      await call('create issue', a, 'POST', '/issue', {
        body: { fields: { project: { key: 'VLT' }, summary, issuetype: { name: 'Task' } } },
      }),
    );
    expect(created.body.status).toBe(201);
    const key = (created.body.body as { key: string }).key;
    expect(mock.issues.get(key)?.fields.summary).toBe(summary);
    expect(mock.requests.at(-1)!.headers['content-type']).toMatch(/application\/json/);

    const invalid = ok(
      await call('create invalid issue', b, 'POST', '/issue', {
        body: { fields: { project: { key: 'VLT' } } },
      }),
    );
    expect(invalid.body.status, 'an upstream 4xx is relayed in the envelope').toBe(400);

    const got = ok(await call('get issue', b, 'GET', `/issue/${key}`));
    expect((got.body.body as { fields: { summary: string } }).fields.summary).toBe(summary);

    ok(
      await call('update issue', a, 'PUT', `/issue/${key}`, {
        body: { fields: { summary: `${summary} (edited)` } },
      }),
    );
    expect(mock.issues.get(key)?.fields.summary).toBe(`${summary} (edited)`);

    const doc = {
      type: 'doc',
      version: 1,
      content: [{ type: 'paragraph', content: [{ type: 'text', text: 'hello from e2e' }] }],
    };
    const comment = ok(
      await call('add comment', b, 'POST', `/issue/${key}/comment`, { body: { body: doc } }),
    );
    expect(comment.body.status).toBe(201);
    const comments = ok(await call('list comments', a, 'GET', `/issue/${key}/comment`));
    expect((comments.body.body as { comments: { body: unknown }[] }).comments.map((c) => c.body)).toEqual([
      doc,
    ]);

    const transitions = ok(await call('list transitions', b, 'GET', `/issue/${key}/transitions`));
    const done = (transitions.body.body as { transitions: { id: string; name: string }[] }).transitions.find(
      (t) => t.name === 'Done',
    );
    expect(done).toBeDefined();
    const moved = ok(
      await call('transition issue', a, 'POST', `/issue/${key}/transitions`, {
        body: { transition: { id: done!.id } },
      }),
    );
    expect(moved.body.status).toBe(204);
    expect(mock.issues.get(key)?.fields.status.name).toBe('Done');

    const jql = 'project = VLT AND summary ~ "e2e & co/ä"';
    const search = ok(await call('search', a, 'GET', '/search', { query: { jql } }));
    expect(mock.requests.at(-1)!.query.jql, 'JQL must reach the site URL-encoded and intact').toBe(jql);
    expect((search.body.body as { total: number }).total).toBe(1);

    const del = ok(await call('delete issue', b, 'DELETE', `/issue/${key}`));
    expect(del.body.status).toBe(204);
    expect(mock.issues.has(key)).toBe(false);
    const gone = ok(await call('get deleted issue', a, 'GET', `/issue/${key}`));
    expect(gone.body.status).toBe(404);
  });

  it('denies requests outside the allowlist with 403 without contacting any upstream', async () => {
    need('mainToken', 'edgeToken', 'connId');
    const { mock, mockDown } = getEnv();
    const before = { mock: mock.requests.length, down: mockDown.requests.length };
    const cases: [string, string, string][] = [
      ['path outside the patterns', 'GET', `${mock.baseUrl}/rest/api/3/project`],
      ['other API version', 'GET', `${mock.baseUrl}/rest/api/2/myself`],
      [
        'dot segments escaping an allowed prefix',
        'GET',
        `${mock.baseUrl}/rest/api/3/issue/../../2/serverInfo`,
      ],
      ['encoded dot segments', 'GET', `${mock.baseUrl}/rest/api/3/issue/%2e%2e/%2E%2E/2/serverInfo`],
      ['method not allowed', 'PATCH', `${mock.baseUrl}/rest/api/3/issue/VLT-1`],
      ['other host name for the same address', 'GET', `https://localhost:${mock.port}/rest/api/3/myself`],
      // A real site with its own account: the first connection's credentials must never go there.
      ['other port (another live site)', 'GET', `${mockDown.baseUrl}/rest/api/3/myself`],
    ];
    for (const [i, [why, method, url]] of cases.entries()) {
      const r = await mainCall(`denied: ${why}`, dpAt(i), { connectionId: s.connId, method, url });
      expect(r.status, `${why}: ${describeResult(r)}`).toBe(403);
      expect(typeof r.body.error).toBe('string');
    }

    // Refused either at validation (400) or by the allowlist (403); which one is the gateway's choice.
    const either: [string, string][] = [
      ['credentials embedded in the URL', `https://e2e:pw@127.0.0.1:${mock.port}/rest/api/3/myself`],
      ['plain http', `http://127.0.0.1:${mock.port}/rest/api/3/myself`],
    ];
    for (const [i, [why, url]] of either.entries()) {
      const r = await execute(dpAt(i), s.edgeToken, { connectionId: s.connId, method: 'GET', url });
      expect([400, 403], `${why}: ${describeResult(r)}`).toContain(r.status);
    }
    const invalid: [string, ExecuteRequest][] = [
      ['no method', { connectionId: s.connId, url: `${mock.baseUrl}/rest/api/3/myself`, method: undefined }],
      [
        'unknown method',
        { connectionId: s.connId, method: 'TRACE', url: `${mock.baseUrl}/rest/api/3/myself` },
      ],
      ['no url', { connectionId: s.connId, method: 'GET' }],
      ['not a URL', { connectionId: s.connId, method: 'GET', url: 'not a url' }],
      [
        'unknown model',
        { model: 'Z', connectionId: s.connId, method: 'GET', url: `${mock.baseUrl}/rest/api/3/myself` },
      ],
      ['neither connectionId nor service', { method: 'GET', url: `${mock.baseUrl}/rest/api/3/myself` }],
    ];
    for (const [i, [why, req]] of invalid.entries()) {
      const r = await execute(dpAt(i), s.edgeToken, req);
      expect(r.status, `invalid request (${why}): ${describeResult(r)}`).toBe(400);
    }
    // The edge agent's policy is read-only (the spec default): an allowlisted write is still refused.
    const write = await execute(dpAt(0), s.edgeToken, {
      connectionId: s.connId,
      method: 'POST',
      url: `${mock.baseUrl}/rest/api/3/issue`,
      body: { fields: { project: { key: 'VLT' }, summary: 'must not exist', issuetype: { name: 'Task' } } },
    });
    expect(write.status, `write under a read-only policy: ${describeResult(write)}`).toBe(403);
    expect(
      mock.requests.slice(before.mock).map((r) => `${r.method} ${r.rawPath}`),
      'the site must not be contacted',
    ).toEqual([]);
    expect(mockDown.requests.length, 'the other site must not be contacted').toBe(before.down);
  });

  it('refuses loopback aliases outside VLT_SSRF_ALLOW_CIDRS even when the allowlist admits them', async () => {
    need('mainToken', 'connId', 'policyId');
    const { mock, tripwires } = getEnv();
    const t4 = tripwires.v4.port;
    const t6 = tripwires.v6.port;
    const aliases: [string, string][] = [
      ['127.0.0.2', tripwires.v4.origin],
      ['[::1]', tripwires.v6.origin],
      ['IPv4-mapped IPv6', `https://[::ffff:127.0.0.2]:${t4}`],
      ['decimal integer host', `https://2130706434:${t4}`],
      ['hex first octet', `https://0x7f.0.0.2:${t4}`],
      ['octal first octet', `https://0177.0.0.2:${t4}`],
      ['uncompressed ::1', `https://[0:0:0:0:0:0:0:1]:${t6}`],
      ['IPv6 unspecified', `https://[::]:${t6}`],
      // 0.0.0.0 reaches local listeners; on the mock's port it would land on the real site.
      ['0.0.0.0', `https://0.0.0.0:${mock.port}`],
    ];
    const allowlist = [
      ...phase1Allowlist(),
      { baseUrl: mock.baseUrl, methods: ['GET'], pathPatterns: ['/rest/api/3/project'] },
      ...aliases.map(([, origin]) => ({ baseUrl: origin, methods: ['GET'], pathPatterns: ['/*'] })),
    ];
    const put = await putAllowlists(s.admin, s.policyId, allowlist);
    expect(
      put.status,
      `allowlist naming loopback aliases must be storable (SSRF is checked at execution): ${describeResult(put)}`,
    ).toBe(200);

    // The new entry must already be live on every replica: no waiting, no retry.
    for (const [i, dp] of dps().entries()) {
      const probe = () =>
        mainCall(`newly allowed path via replica ${i}`, dp, {
          connectionId: s.connId,
          method: 'GET',
          url: `${mock.baseUrl}/rest/api/3/project`,
        });
      const r = await probe();
      const lag = r.status === 200 ? '' : await staleness(probe, 200);
      expect(r.status, `replica ${i} right after PUT allowlists: ${describeResult(r)}; ${lag}`).toBe(200);
      expect(r.body.status).toBe(200);
    }

    const before = mock.requests.length;
    for (const [i, [why, origin]] of aliases.entries()) {
      const r = await mainCall(`ssrf: ${why}`, dpAt(i), {
        connectionId: s.connId,
        method: 'GET',
        url: `${origin}/rest/api/3/myself`,
      });
      expect(r.status, `SSRF via ${why} (${origin}): ${describeResult(r)}`).toBe(403);
      expect(tripwires.hits(), `SSRF via ${why} reached a tripwire`).toEqual([]);
    }
    expect(mock.requests.length, 'no alias may land on the real site either').toBe(before);

    // A redirect from an allowed site towards a blocked address must not be followed.
    mock.respondOnce({ status: 302, headers: { location: `${tripwires.v4.origin}/rest/api/3/myself` } });
    const redirected = await mainCall('redirect to a blocked address', dpAt(0), {
      connectionId: s.connId,
      method: 'GET',
      url: `${mock.baseUrl}/rest/api/3/myself`,
    });
    expect([200, 403, 502], describeResult(redirected)).toContain(redirected.status);
    if (redirected.status === 200)
      expect(redirected.body.status, 'redirect must be relayed, not followed').toBe(302);
    expect(mock.requests.length).toBe(before + 1);
    expect(tripwires.hits(), 'redirect was followed to a blocked address').toEqual([]);
  });

  it('answers 502 when the site is down, 404 for unknown connections, 401 for bad tokens, and refuses other agents', async () => {
    need('mainToken', 'noPolicy', 'noPolicyToken', 'foreignToken', 'connId', 'connDownId', 'jwt', 'pat');
    const env = getEnv();
    const { mock, mockDown } = env;
    const downUrl = `${mockDown.baseUrl}/rest/api/3/myself`;

    const up = await mainCall('second site while up', dpAt(0), {
      connectionId: s.connDownId,
      method: 'GET',
      url: downUrl,
    });
    expect(up.status, describeResult(up)).toBe(200);
    expect(up.body.status).toBe(200);
    expect(mockDown.requests.at(-1)!.headers.authorization).toBe(mockDown.expectedAuthorization);
    await mockDown.close();
    const down = await mainCall('second site down', dpAt(1), {
      connectionId: s.connDownId,
      method: 'GET',
      url: downUrl,
    });
    expect(down.status, `upstream unreachable: ${describeResult(down)}`).toBe(502);
    expect(typeof down.body.error).toBe('string');

    const before = mock.requests.length;
    const myself = { method: 'GET', url: `${mock.baseUrl}/rest/api/3/myself` };
    const unknown = await execute(dpAt(0), s.mainToken, { connectionId: randomUUID(), ...myself });
    expect(unknown.status, `unknown connection: ${describeResult(unknown)}`).toBe(404);

    const badTokens: [string, string | undefined][] = [
      ['no Authorization header', undefined],
      ['unknown vltt_ token', `vltt_${random(24)}`],
      ['random bearer', random(24)],
    ];
    for (const dp of dps()) {
      for (const [why, token] of badTokens) {
        const r = await execute(dp, token, { connectionId: s.connId, ...myself });
        expect(r.status, `${why} on ${dp}: ${describeResult(r)}`).toBe(401);
      }
      // Admin credentials are not agent credentials.
      const jwt = await execute(dp, s.jwt, { connectionId: s.connId, ...myself });
      expect([401, 403], `API JWT used as agent token: ${describeResult(jwt)}`).toContain(jwt.status);
      const pat = await http('POST', `${dp}/v1/vault/execute`, {
        headers: { 'x-api-key': s.pat },
        json: { model: 'B', connectionId: s.connId, ...myself },
      });
      expect([401, 403], `PAT used on the agent route: ${describeResult(pat)}`).toContain(pat.status);

      const noPolicy = await execute(dp, s.noPolicyToken, { connectionId: s.connId, ...myself });
      expect([403, 404], `agent without a policy: ${describeResult(noPolicy)}`).toContain(noPolicy.status);
      const foreign = await execute(dp, s.foreignToken, { connectionId: s.connId, ...myself });
      expect([403, 404], `agent of another workspace: ${describeResult(foreign)}`).toContain(foreign.status);
    }
    expect(mock.requests.length, 'none of these may reach the site').toBe(before);

    // Disabling an agent revokes its tokens everywhere at once.
    const disabled = expectStatus(
      await http<{ success: boolean; tokensRevoked: number }>(
        'POST',
        `${s.admin.base}/v1/agents/${s.noPolicy.id}/disable`,
        {
          headers: s.admin.headers,
        },
      ),
      200,
    );
    expect(disabled.body.success).toBe(true);
    expect(disabled.body.tokensRevoked).toBeGreaterThanOrEqual(1);
    for (const [i, dp] of dps().entries()) {
      const probe = () => execute(dp, s.noPolicyToken, { connectionId: s.connId, ...myself });
      const r = await probe();
      const lag = r.status === 401 ? '' : await staleness(probe, 401);
      expect(
        r.status,
        `disabled agent's token on replica ${i}, immediately after disable: ${describeResult(r)}; ${lag}`,
      ).toBe(401);
    }
    const relogin = await tokenRequest(
      env.controlPlane,
      await signAssertion(s.noPolicy, { audience: env.publicBaseUrl }),
    );
    expect(relogin.status, `token exchange for a disabled agent: ${describeResult(relogin)}`).toBe(401);
  });

  it('records exactly one execution_requested and one terminal row per call, with the right decision', async () => {
    need('admin', 'admin2', 'main', 'edge', 'noPolicy', 'foreign');
    const counted = ledger.filter((e) => terminalAction(e.status));
    expect(counted.length, 'the earlier steps made calls').toBeGreaterThan(20);
    const expected = new Map<string, Record<string, number>>();
    for (const e of counted) {
      const c = expected.get(e.connectionId) ?? {};
      c.execution_requested = (c.execution_requested ?? 0) + 1;
      const t = terminalAction(e.status)!;
      c[t] = (c[t] ?? 0) + 1;
      expected.set(e.connectionId, c);
    }
    const execRows = (events: AuditEvent[]) => events.filter((e) => e.action.startsWith('execution_'));
    const byConnection = (events: AuditEvent[]) => {
      const m = new Map<string, Record<string, number>>();
      for (const [conn] of expected)
        m.set(conn, countByAction(execRows(events).filter((e) => e.connectionId === conn)));
      return m;
    };
    // Terminal rows are published after their call's execution_requested, so once every terminal
    // row is there, anything still missing is missing for good.
    const enough = (events: AuditEvent[]) =>
      [...byConnection(events)].every(([conn, got]) =>
        Object.entries(expected.get(conn)!).every(
          ([action, n]) => action === 'execution_requested' || (got[action] ?? 0) >= n,
        ),
      );
    const events = await pollAudit(s.admin, { agentId: s.main.id }, enough, 30_000);
    // Late duplicates would arrive after the first complete read; look once more.
    await new Promise((r) => setTimeout(r, 500));
    const final = await auditAll(s.admin, { agentId: s.main.id });
    expect(final.length).toBeGreaterThanOrEqual(events.length);
    // Soft, so the per-row checks below still report when the counts are off.
    expect
      .soft(Object.fromEntries(byConnection(final)), 'execution rows per connection')
      .toEqual(Object.fromEntries(expected));

    for (const e of execRows(final)) {
      expect(e.agentId).toBe(s.main.id);
      expect(expected.has(e.connectionId!), `row for an unexpected connection: ${JSON.stringify(e)}`).toBe(
        true,
      );
      if (e.action === 'execution_completed') expect(e.decision, JSON.stringify(e)).toBe('allowed');
      if (e.action === 'execution_denied') expect(e.decision, JSON.stringify(e)).toBe('denied');
    }
    const ids = final.map((e) => e.auditId);
    expect(new Set(ids).size, 'auditIds are unique').toBe(ids.length);
    for (const call of counted.filter((c) => c.auditId)) {
      const rows = final.filter((e) => e.auditId === call.auditId);
      expect(
        rows.length,
        `response auditId of "${call.label}" (${call.status}) must match exactly one row`,
      ).toBe(1);
      // The response's auditId names the call's terminal row (docs/decisions/0004).
      expect(rows[0]!.action, `row named by the response of "${call.label}"`).toBe(
        terminalAction(call.status),
      );
      expect(rows[0]!.connectionId).toBe(call.connectionId);
    }

    // Pairing: every execution_requested row is closed by exactly one terminal row pointing at it.
    const requested = execRows(final).filter((e) => e.action === 'execution_requested');
    const terminals = execRows(final).filter((e) => e.action !== 'execution_requested');
    for (const r of requested) {
      const closing = terminals.filter((t) => t.metadata.requestAuditId === r.auditId);
      expect(closing.length, `terminal rows for execution_requested ${r.auditId}`).toBe(1);
    }
    // Agents whose calls never executed have no completed rows.
    for (const agent of [s.edge, s.noPolicy]) {
      const rows = await auditAll(s.admin, { agentId: agent.id, action: 'execution_completed' });
      expect(rows, `${agent.name} never executed`).toEqual([]);
    }

    // Pagination walks the same rows, newest first, without overlap.
    const walked: AuditEvent[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 500; page++) {
      const r = expectStatus(await auditPage(s.admin, { agentId: s.main.id, limit: 7, cursor }), 200);
      expect(r.body.events.length).toBeLessThanOrEqual(7);
      walked.push(...r.body.events);
      if (!r.body.nextCursor) break;
      cursor = r.body.nextCursor;
    }
    expect(walked.map((e) => e.id)).toEqual(final.map((e) => e.id));
    const times = walked.map((e) => Date.parse(e.timestamp));
    expect(
      times.every((t, i) => i === 0 || t <= times[i - 1]!),
      'newest first',
    ).toBe(true);

    const denied = await auditAll(s.admin, { agentId: s.main.id, action: 'execution_denied' });
    expect(denied.length).toBe(expected.get(s.connId!)?.execution_denied ?? 0);
    expect(denied.every((e) => e.action === 'execution_denied')).toBe(true);

    const big = await auditPage(s.admin, { limit: 201 });
    expect([200, 400], describeResult(big)).toContain(big.status);
    if (big.status === 200) expect(big.body.events.length).toBeLessThanOrEqual(200);

    const foreignView = expectStatus(await auditPage(s.admin2, { agentId: s.main.id }), 200);
    expect(foreignView.body.events, 'another workspace must not see these events').toEqual([]);
    expect(secrets.scanText('audit events', JSON.stringify(final))).toEqual([]);
  }, 90_000);

  it('exports the audit log as CSV in the spec’s column order and as JSON, with the same rows', async () => {
    need('admin', 'main');
    const admin = s.admin;
    const listed = await auditAll(admin, { agentId: s.main.id });
    const json = expectStatus(
      await http('GET', `${admin.base}/v1/audit/export?format=json&agentId=${s.main.id}`, {
        headers: admin.headers,
      }),
      200,
    );
    const jsonText = json.text;
    const parsed = JSON.parse(jsonText) as AuditEvent[] | { events: AuditEvent[] };
    const jsonEvents = Array.isArray(parsed) ? parsed : parsed.events;
    expect(jsonEvents.map((e) => e.auditId).sort()).toEqual(listed.map((e) => e.auditId).sort());

    const csv = expectStatus(
      await http('GET', `${admin.base}/v1/audit/export?format=csv&agentId=${s.main.id}`, {
        headers: admin.headers,
      }),
      200,
    );
    expect(String(csv.headers['content-type'])).toMatch(/text\/csv/);
    expect(String(csv.headers['content-disposition'] ?? ''), 'a downloadable file').toMatch(/attachment/i);
    const rows = parseCsv(csv.text).filter((r) => r.length > 1 || r[0] !== '');
    expect(rows[0]).toEqual(CSV_COLUMNS);
    const body = rows.slice(1);
    expect(
      body.every((r) => r.length === CSV_COLUMNS.length),
      'every row has 8 fields',
    ).toBe(true);
    expect(body.map((r) => r[0]).sort()).toEqual(listed.map((e) => e.auditId).sort());
    for (const r of body) {
      const e = listed.find((x) => x.auditId === r[0])!;
      expect(r.slice(3, 7)).toEqual([e.agentId ?? '', e.connectionId ?? '', e.action, e.decision]);
      expect(() => JSON.parse(r[7]!), 'metadata column is JSON').not.toThrow();
    }
    expect(secrets.scanText('CSV export', csv.text)).toEqual([]);
    expect(secrets.scanText('JSON export', jsonText)).toEqual([]);
  });

  it('ends the session on sign-out', async () => {
    need('session');
    const cp = getEnv().controlPlane;
    const out = await http('POST', `${cp}/api/auth/sign-out`, { headers: { cookie: s.session.cookie } });
    expect(out.status >= 200 && out.status < 300, describeResult(out)).toBe(true);
    const after = await http('POST', `${cp}/api/auth/token`, { headers: { cookie: s.session.cookie } });
    expect(after.status, `token exchange with a signed-out session: ${describeResult(after)}`).toBe(401);
  });

  it('never prints a secret in any process log', () => {
    const env = getEnv();
    secrets.add('VLT_MASTER_KEY', env.masterKey);
    const lines = env.logs();
    expect(lines.length, 'the processes logged something to search').toBeGreaterThan(0);
    expect(secrets.size).toBeGreaterThan(15);
    const leaks = secrets.scanLines(lines);
    expect(
      leaks,
      `secrets found in logs (labels: ${[...new Set(leaks.map((l) => l.label))].join(', ')})`,
    ).toEqual([]);
  });
}
