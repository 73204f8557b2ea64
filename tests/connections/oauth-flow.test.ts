/**
 * ADR 0042, OAuth 2.0 authorization code + PKCE, through the real HTTP API against the mock
 * authorization server: what `start` sends the browser to, what the callback accepts and
 * refuses (forged, replayed, expired state; provider denial; refused exchange; another user's
 * session), what a successful callback stores, workspace OAuth apps taking precedence over the
 * deployment's, and which connections `reauth` accepts.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultAllowlistFor, serviceSpec } from '@vlt/contracts';
import {
  apiKeyConnectionRequest,
  botTokenConnectionRequest,
  createIssueTrackerConnection,
  createWorkspaceOAuthApp,
  deleteWorkspaceOAuthApp,
  expectStatus,
  http,
  listWorkspaceOAuthApps,
  pollAudit,
  reauthRequest,
} from '../support/api-client.js';
import { createAgentAs, newUser } from '../support/identity-harness.js';
import {
  connectOAuth,
  followCallback,
  listConnectionRows,
  startConnectionRequest,
  startConnectionsGateway,
  type ConnectionsGateway,
} from '../support/mock-providers.js';

const SHAPES = ['embedded', 'services'] as const;

/** A page a browser shows: HTML, short, and never a stack trace or a source path. */
function expectCleanPage(
  r: { status: number; headers: Record<string, unknown>; text: string },
  status: number,
) {
  expect(r.status, r.text.slice(0, 400)).toBe(status);
  expect(String(r.headers['content-type'])).toMatch(/^text\/html/);
  expect(r.text).not.toMatch(
    /\n\s+at \S+|\bat (async )?\S+ \(|node_modules|\.ts:\d+|Error:\s|AppError|prisma/i,
  );
}

describe.each(SHAPES)('OAuth connections (%s)', (shape) => {
  let fx: ConnectionsGateway;
  const mail = serviceSpec('suite_a-mail')!;

  beforeAll(async () => {
    // `notes` has no deployment app: only a workspace app can connect it.
    fx = await startConnectionsGateway({ shape, providerOptions: { withoutApp: ['notes'] } });
  });
  afterAll(async () => {
    await fx?.close();
  });

  const callbackUrl = () => `${fx.base}/v1/connections/callback`;
  const liveCount = async () => (await listConnectionRows(fx.admin)).length;

  it('start sends the browser to the provider with PKCE S256, a fresh state and the exact redirect URI', async () => {
    const r = await startConnectionRequest(fx.admin, {
      service: 'suite_a-mail',
      scopes: [...mail.defaultScopes],
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body.pendingConnectionId).toMatch(/^[0-9a-f-]{36}$/);
    const u = new URL(r.body.authorizationUrl);
    expect(`${u.origin}${u.pathname}`).toBe(`${fx.mock.url}/oauth/authorize`);
    const q = Object.fromEntries(u.searchParams);
    expect(q).toMatchObject({
      response_type: 'code',
      client_id: fx.mock.deploymentApp('suite_a').clientId,
      redirect_uri: callbackUrl(),
      code_challenge_method: 'S256',
      // The catalog's extra parameters that make the provider hand out a refresh token.
      access_type: 'offline',
      prompt: 'consent',
    });
    expect(q.scope!.split(' ')).toEqual(expect.arrayContaining([...mail.defaultScopes]));
    expect(q.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.state!.length).toBeGreaterThanOrEqual(22);
    expect(r.text).not.toContain(fx.mock.deploymentApp('suite_a').clientSecret);

    // A second start gets its own state and challenge.
    const again = await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] });
    const q2 = Object.fromEntries(new URL(again.body.authorizationUrl).searchParams);
    expect(q2.state).not.toBe(q.state);
    expect(q2.code_challenge).not.toBe(q.code_challenge);

    if (fx.sql) {
      // Stored: the SHA-256 of the state (never the state), the redirect URI, 15 minutes.
      const [row] = await fx.sql(
        `SELECT state_hash, redirect_uri, code_verifier::text AS verifier, user_id,
                extract(epoch FROM expires_at - created_at)::int AS ttl
           FROM pending_connections WHERE id = $1`,
        [r.body.pendingConnectionId],
      );
      expect(row).toBeDefined();
      expect(row!.state_hash).toBe(createHash('sha256').update(q.state!).digest('hex'));
      expect(row!.redirect_uri).toBe(callbackUrl());
      expect(row!.user_id).toBe(fx.owner.id);
      expect(Number(row!.ttl)).toBeGreaterThanOrEqual(14 * 60);
      expect(Number(row!.ttl)).toBeLessThanOrEqual(15 * 60 + 5);
      expect(String(row!.verifier)).not.toContain(q.state!);
    }
  });

  it('the callback exchanges the code once (client_secret_post, verifier, same redirect URI) and stores a healthy connection', async () => {
    const before = fx.mock.tokenRequests.length;
    const label = `mail-${randomBytes(3).toString('hex')}`;
    const started = expectStatus(
      await startConnectionRequest(fx.admin, {
        service: 'suite_a-mail',
        scopes: [...mail.defaultScopes],
        label,
      }),
      200,
    );
    const back = await fx.mock.approve(started.body.authorizationUrl);
    expect(back.startsWith(`${callbackUrl()}?`)).toBe(true);
    const page = await followCallback(back);
    expectCleanPage(page, 200);

    const exchanges = fx.mock.tokenRequests.slice(before);
    expect(exchanges).toHaveLength(1);
    const ex = exchanges[0]!;
    expect(ex).toMatchObject({
      grantType: 'authorization_code',
      clientAuth: 'post',
      clientId: fx.mock.deploymentApp('suite_a').clientId,
      outcome: 'ok',
    });
    expect(ex.form.redirect_uri).toBe(callbackUrl());
    expect(ex.form.client_secret).toBe(fx.mock.deploymentApp('suite_a').clientSecret);
    if (fx.sql) {
      const [row] = await fx.sql(
        `SELECT consumed_at, code_verifier::text AS verifier FROM pending_connections WHERE id = $1`,
        [started.body.pendingConnectionId],
      );
      expect(row?.consumed_at).toBeTruthy();
      // The verifier is sealed, never stored in the clear.
      expect(String(row?.verifier)).not.toContain(ex.form.code_verifier!);
    }

    const conn = (await listConnectionRows(fx.admin)).find((c) => c.label === label);
    expect(conn).toMatchObject({
      provider: 'suite_a',
      service: 'suite_a-mail',
      status: 'healthy',
      singleton: false,
      policies: [],
    });
    expect(conn!.grantedScopes).toEqual(expect.arrayContaining([...mail.defaultScopes]));
    expect(conn!.metadata.apiUrl).toBe(fx.mock.url);
    // Neither token is anywhere in what the API shows.
    const issued = fx.mock.lastIssued(fx.mock.deploymentApp('suite_a').clientId)!;
    const listing = (await http('GET', `${fx.base}/v1/connections`, { headers: fx.admin.headers })).text;
    expect(listing).not.toContain(issued.refreshToken!);
    expect(listing).not.toContain(issued.accessToken);
    expect(page.text).not.toContain(issued.refreshToken!);
    expect(page.text).not.toContain(issued.accessToken);

    const audit = await pollAudit(
      fx.admin,
      { connectionId: conn!.id, action: 'connection_created' },
      (e) => e.length > 0,
    );
    expect(audit).toHaveLength(1);
    expect(JSON.stringify(audit)).not.toContain(issued.refreshToken!);
  });

  it('with agentId the callback also creates the agent policy: Model B by default, the catalog allowlist', async () => {
    const agent = await fx.newAgent();
    const { connection } = await connectOAuth(fx, {
      service: 'suite_a-mail',
      scopes: [...mail.defaultScopes],
      agentId: agent.id,
    });
    expect(connection.policies).toHaveLength(1);
    expect(connection.policies[0]).toMatchObject({ agentId: agent.id, allowedModels: ['B'] });
    expect(connection.policies[0]!.allowlists).toEqual(defaultAllowlistFor(mail, fx.mock.url));

    const withA = await connectOAuth(fx, {
      service: 'suite_a-calendar',
      scopes: [...serviceSpec('suite_a-calendar')!.defaultScopes],
      agentId: agent.id,
      allowedModels: ['A', 'B'],
    });
    expect([...withA.connection.policies[0]!.allowedModels].sort()).toEqual(['A', 'B']);
    await pollAudit(
      fx.admin,
      { connectionId: withA.connection.id },
      (e) => e.some((x) => x.action === 'policy_created'),
      10_000,
    ).then((e) =>
      expect(e.map((x) => x.action)).toEqual(
        expect.arrayContaining(['connection_created', 'policy_created']),
      ),
    );
  });

  it('start refuses unknown and non-OAuth services (400), another workspace’s agent (404), no credentials (401)', async () => {
    for (const service of ['nope', 'suite_a', 'chatbot_a', 'llm_a-messages', 'issues']) {
      const r = await startConnectionRequest(fx.admin, { service, scopes: [] });
      expect(r.status, `${service}: ${r.text}`).toBe(400);
      expect(typeof r.body.error).toBe('string');
    }
    const stranger = await newUser(fx.base, 'stranger');
    const theirs = await createAgentAs(stranger.admin);
    const r = await startConnectionRequest(fx.admin, {
      service: 'suite_a-mail',
      scopes: [],
      agentId: theirs.agent.id,
    });
    expect(r.status, r.text).toBe(404);
    const anon = await http('POST', `${fx.base}/v1/connections/start`, {
      json: { service: 'suite_a-mail', scopes: [] },
    });
    expect(anon.status).toBe(401);
  });

  it('refuses a forged or missing state with a 400 page, before the code is looked at', async () => {
    const before = fx.mock.tokenRequests.length;
    const count = await liveCount();
    for (const qs of [
      `code=whatever&state=${randomBytes(16).toString('base64url')}`,
      'code=whatever',
      `state=${randomBytes(16).toString('base64url')}`,
      '',
    ]) {
      expectCleanPage(await followCallback(`${callbackUrl()}?${qs}`), 400);
    }
    expect(fx.mock.tokenRequests.length).toBe(before);
    expect(await liveCount()).toBe(count);
  });

  it('a replayed callback is 400 and the code is exchanged once', async () => {
    const started = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_a-drive', scopes: [] }),
      200,
    );
    const back = await fx.mock.approve(started.body.authorizationUrl);
    expectCleanPage(await followCallback(back), 200);
    const before = fx.mock.tokenRequests.length;
    const count = await liveCount();
    expectCleanPage(await followCallback(back), 400);
    expect(fx.mock.tokenRequests.length).toBe(before);
    expect(await liveCount()).toBe(count);
  });

  it('concurrent deliveries of one callback create one connection', async () => {
    const count = await liveCount();
    const started = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_a-drive', scopes: [] }),
      200,
    );
    const back = await fx.mock.approve(started.body.authorizationUrl);
    const pages = await Promise.all(Array.from({ length: 6 }, () => followCallback(back)));
    expect(pages.map((p) => p.status).sort()).toEqual([200, 400, 400, 400, 400, 400]);
    expect(await liveCount()).toBe(count + 1);
  });

  it('a provider denial (error=access_denied) ends in a 400 page naming the reason; nothing stored', async () => {
    const count = await liveCount();
    const before = fx.mock.tokenRequests.length;
    fx.mock.authorizeOutcome = 'access_denied';
    try {
      const started = expectStatus(
        await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] }),
        200,
      );
      const back = await fx.mock.approve(started.body.authorizationUrl);
      expect(new URL(back).searchParams.get('error')).toBe('access_denied');
      const page = await followCallback(back);
      expectCleanPage(page, 400);
      expect(page.text).toMatch(/access_denied|denied/i);
    } finally {
      fx.mock.authorizeOutcome = 'approve';
    }
    expect(fx.mock.tokenRequests.length).toBe(before);
    expect(await liveCount()).toBe(count);
  });

  it('the page escapes what the provider (or a forged link) puts in error and error_description', async () => {
    const count = await liveCount();
    const started = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] }),
      200,
    );
    const state = new URL(started.body.authorizationUrl).searchParams.get('state')!;
    const evil = '<script>alert(1)</script><img src=x onerror=alert(2)>';
    for (const st of [state, 'forged-state']) {
      const qs = new URLSearchParams({ state: st, error: evil, error_description: evil });
      const page = await followCallback(`${callbackUrl()}?${qs}`);
      expect(page.status).toBe(400);
      expect(page.text).not.toContain('<script>');
      expect(page.text).not.toContain('<img');
    }
    expect(await liveCount()).toBe(count);
  });

  it('a denial consumes the flow: a code for the same state afterwards is refused unexchanged', async () => {
    const started = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] }),
      200,
    );
    fx.mock.authorizeOutcome = 'access_denied';
    try {
      expectCleanPage(await followCallback(await fx.mock.approve(started.body.authorizationUrl)), 400);
    } finally {
      fx.mock.authorizeOutcome = 'approve';
    }
    const count = await liveCount();
    const before = fx.mock.tokenRequests.length;
    expectCleanPage(await followCallback(await fx.mock.approve(started.body.authorizationUrl)), 400);
    expect(fx.mock.tokenRequests.length).toBe(before);
    expect(await liveCount()).toBe(count);
  });

  it('grantedScopes are what the provider granted, not what was asked', async () => {
    fx.mock.grantedScope = 'boards:read';
    try {
      const { connection } = await connectOAuth(fx, {
        service: 'board-boards',
        scopes: ['boards:read', 'boards:write'],
      });
      expect(fx.mock.authorizeRequests.at(-1)!.scope.split(' ')).toEqual(
        expect.arrayContaining(['boards:read', 'boards:write']),
      );
      expect(connection.grantedScopes).toEqual(['boards:read']);
    } finally {
      fx.mock.grantedScope = null;
    }
  });

  it('an OAuth singleton (chatbot_b) stays one per workspace, even with two flows in flight', async () => {
    const first = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'chatbot_b', scopes: [] }),
      200,
    );
    const second = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'chatbot_b', scopes: [] }),
      200,
    );
    expectCleanPage(await followCallback(await fx.mock.approve(first.body.authorizationUrl)), 200);
    const late = await followCallback(await fx.mock.approve(second.body.authorizationUrl));
    expect(late.status, late.text.slice(0, 300)).toBeGreaterThanOrEqual(400);
    expect(late.status).toBeLessThan(500);
    expect(String(late.headers['content-type'])).toMatch(/^text\/html/);
    const rows = (await listConnectionRows(fx.admin)).filter((c) => c.service === 'chatbot_b');
    expect(rows).toHaveLength(1);
    expect(rows[0]!.singleton).toBe(true);
    // With one in place, a new flow is refused at start, or its callback is.
    const third = await startConnectionRequest(fx.admin, { service: 'chatbot_b', scopes: [] });
    if (third.status === 200) {
      const page = await followCallback(await fx.mock.approve(third.body.authorizationUrl));
      expect(page.status).toBeGreaterThanOrEqual(400);
    } else expect(third.status, third.text).toBe(409);
    expect((await listConnectionRows(fx.admin)).filter((c) => c.service === 'chatbot_b')).toHaveLength(1);
  });

  it('a refused exchange (invalid_grant) ends in a 400 page; nothing stored', async () => {
    const count = await liveCount();
    fx.mock.exchangeError = 'invalid_grant';
    try {
      const started = expectStatus(
        await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] }),
        200,
      );
      const page = await followCallback(await fx.mock.approve(started.body.authorizationUrl));
      expectCleanPage(page, 400);
      expect(fx.mock.tokenRequests.at(-1)!.outcome).toBe('invalid_grant');
    } finally {
      fx.mock.exchangeError = null;
    }
    expect(await liveCount()).toBe(count);
  });

  it('an expired flow is 400 before the code is looked at', async (ctx) => {
    if (!fx.sql) return ctx.skip();
    const count = await liveCount();
    const started = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] }),
      200,
    );
    const back = await fx.mock.approve(started.body.authorizationUrl);
    await fx.sql(`UPDATE pending_connections SET expires_at = now() - interval '1 second' WHERE id = $1`, [
      started.body.pendingConnectionId,
    ]);
    const before = fx.mock.tokenRequests.length;
    expectCleanPage(await followCallback(back), 400);
    expect(fx.mock.tokenRequests.length).toBe(before);
    expect(await liveCount()).toBe(count);
  });

  it('the flow is bound to its user: another user’s session is refused, the starter’s own is accepted', async () => {
    const count = await liveCount();
    const other = await newUser(fx.base, 'other');
    const started = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] }),
      200,
    );
    const back = await fx.mock.approve(started.body.authorizationUrl);
    const refused = await followCallback(back, other.session.cookie);
    expect([400, 403], refused.text.slice(0, 300)).toContain(refused.status);
    expect(String(refused.headers['content-type'])).toMatch(/^text\/html/);
    expect(await liveCount()).toBe(count);
    expect((await listConnectionRows(other.admin)).length).toBe(0);

    const mine = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_a-mail', scopes: [] }),
      200,
    );
    expectCleanPage(
      await followCallback(await fx.mock.approve(mine.body.authorizationUrl), fx.owner.session.cookie),
      200,
    );
    expect(await liveCount()).toBe(count + 1);
  });

  it('without any OAuth app start is 400; a workspace app makes it work and is used for the exchange', async () => {
    const none = await startConnectionRequest(fx.admin, { service: 'notes-pages', scopes: [] });
    expect(none.status, none.text).toBe(400);

    const clientId = `ws-notes-${randomBytes(3).toString('hex')}`;
    const clientSecret = `ws-secret-${randomBytes(16).toString('hex')}`;
    fx.mock.registerClient(clientId, clientSecret, 'notes');
    const created = await createWorkspaceOAuthApp(fx.admin, { provider: 'notes', clientId, clientSecret });
    expect(created.status, created.text).toBe(201);
    expect(created.body.app).toMatchObject({ provider: 'notes', clientId });
    expect(created.body.app.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(typeof created.body.auditId).toBe('string');
    expect(created.text).not.toContain(clientSecret);

    const listed = await listWorkspaceOAuthApps(fx.admin);
    expect(listed.status).toBe(200);
    expect(listed.body.apps.map((a) => a.clientId)).toContain(clientId);
    expect(listed.text).not.toContain(clientSecret);
    // A second app for the same provider is a conflict, not a silent replacement.
    expect(
      (await createWorkspaceOAuthApp(fx.admin, { provider: 'notes', clientId: 'x', clientSecret: 'y' }))
        .status,
    ).toBe(409);
    // Another workspace sees nothing of it.
    const stranger = await newUser(fx.base, 'stranger-apps');
    expect((await listWorkspaceOAuthApps(stranger.admin)).body.apps).toEqual([]);
    expect((await deleteWorkspaceOAuthApp(stranger.admin, created.body.app.id)).status).toBe(404);

    const { connection, authorizationUrl } = await connectOAuth(fx, { service: 'notes-pages', scopes: [] });
    expect(new URL(authorizationUrl).searchParams.get('client_id')).toBe(clientId);
    expect(new URL(authorizationUrl).searchParams.get('owner')).toBe('user');
    const exchange = fx.mock.tokenRequests.filter((t) => t.clientId === clientId);
    expect(exchange).toHaveLength(1);
    expect(exchange[0]).toMatchObject({ clientAuth: 'post', outcome: 'ok' });
    expect(exchange[0]!.form.client_secret).toBe(clientSecret);
    expect(connection).toMatchObject({ provider: 'notes', status: 'healthy' });

    const exported = (
      await http('GET', `${fx.base}/v1/audit/export?format=json`, { headers: fx.admin.headers })
    ).text;
    expect(exported).not.toContain(clientSecret);
    expect(fx.gw.logs.join('\n')).not.toContain(clientSecret);

    expect((await deleteWorkspaceOAuthApp(fx.admin, created.body.app.id)).status).toBe(200);
    expect((await listWorkspaceOAuthApps(fx.admin)).body.apps.map((a) => a.clientId)).not.toContain(clientId);
    expect((await startConnectionRequest(fx.admin, { service: 'notes-pages', scopes: [] })).status).toBe(400);
  });

  it('a workspace app is preferred to the deployment’s', async () => {
    const clientId = `ws-suite_b-${randomBytes(3).toString('hex')}`;
    const clientSecret = `ws-secret-${randomBytes(16).toString('hex')}`;
    fx.mock.registerClient(clientId, clientSecret, 'suite_b');
    const app = expectStatus(
      await createWorkspaceOAuthApp(fx.admin, { provider: 'suite_b', clientId, clientSecret }),
      201,
    );
    try {
      const { authorizationUrl } = await connectOAuth(fx, {
        service: 'suite_b-mail',
        scopes: [...serviceSpec('suite_b-mail')!.defaultScopes],
      });
      expect(new URL(authorizationUrl).searchParams.get('client_id')).toBe(clientId);
      const last = fx.mock.tokenRequests.at(-1)!;
      expect(last.clientId).toBe(clientId);
      expect(last.form.client_secret).toBe(clientSecret);
    } finally {
      await deleteWorkspaceOAuthApp(fx.admin, app.body.app.id);
    }
    // Deleted: back to the deployment's app.
    const r = expectStatus(
      await startConnectionRequest(fx.admin, { service: 'suite_b-mail', scopes: [] }),
      200,
    );
    expect(new URL(r.body.authorizationUrl).searchParams.get('client_id')).toBe(
      fx.mock.deploymentApp('suite_b').clientId,
    );
  });

  it('workspace apps: a provider that is not OAuth, or unknown, is 400', async () => {
    for (const provider of ['chatbot_a', 'llm_a', 'issues', 'nope']) {
      const r = await createWorkspaceOAuthApp(fx.admin, { provider, clientId: 'c', clientSecret: 's' });
      expect(r.status, `${provider}: ${r.text}`).toBe(400);
    }
  });

  it('reauth: 409 for a healthy connection, 400 for bot, API-key and issue-tracker connections', async () => {
    const { connection } = await connectOAuth(fx, { service: 'board-boards', scopes: ['boards:read'] });
    const healthy = await reauthRequest(fx.admin, connection.id);
    expect(healthy.status, healthy.text).toBe(409);

    expectStatus(await botTokenConnectionRequest(fx.admin, { botToken: fx.mock.botToken }), 201);
    const key = `sk-${randomBytes(12).toString('hex')}`;
    fx.mock.apiKeys.add(key);
    expectStatus(await apiKeyConnectionRequest(fx.admin, { service: 'llm_b-chat', apiKey: key }), 201);
    await createIssueTrackerConnection(fx.admin, {
      siteUrl: fx.mock.url,
      email: 'a@b.test',
      apiToken: 'itk-x',
    });
    const rows = await listConnectionRows(fx.admin);
    for (const service of ['chatbot_a', 'llm_b-chat', 'issues']) {
      const c = rows.find((x) => x.service === service)!;
      const r = await reauthRequest(fx.admin, c.id);
      expect(r.status, `${service}: ${r.text}`).toBe(400);
    }
    // Another workspace's connection does not exist for this one.
    const stranger = await newUser(fx.base, 'stranger-reauth');
    expect((await reauthRequest(stranger.admin, connection.id)).status).toBe(404);
  });
});
