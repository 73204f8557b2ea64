/**
 * ADR 0042, refresh and revoke, in one process (both shapes): a token with less than 30 s left
 * is refreshed by the control plane before it is used (Model A, Model B, resolve), exactly once
 * however many calls race for it; `invalid_grant` turns the connection into `needs_reauth`
 * (409 everywhere, audited) until a reauth round trip brings the same row back to `healthy`;
 * other refresh failures are 503 and change nothing; revoke revokes at the provider first and
 * then nothing reaches the provider any more. The refresh token never leaves the vault.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceSpec } from '@vlt/contracts';
import {
  auditExportText,
  createPolicy,
  execute,
  expectStatus,
  http,
  pollAudit,
  reauthRequest,
  resolveCredential,
  revokeConnectionRequest,
  vendToken,
  type HttpResult,
} from '../support/api-client.js';
import {
  connectOAuth,
  listConnectionRows,
  reauthOAuth,
  startConnectionsGateway,
  type ConnectionsGateway,
  type StartBody,
} from '../support/mock-providers.js';

const SHAPES = ['embedded', 'services'] as const;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(SHAPES)('refresh, reauth and revoke (%s)', (shape) => {
  let fx: ConnectionsGateway;
  /** Every answer an agent or admin got in this file (the refresh token must be in none). */
  const answers: string[] = [];
  const seen = <T>(r: HttpResult<T>) => {
    answers.push(r.text);
    return r;
  };

  beforeAll(async () => {
    fx = await startConnectionsGateway({ shape, providerOptions: { withoutRevoke: ['code_host'] } });
  });
  afterAll(async () => {
    await fx?.close();
  });

  /** An OAuth connection whose first access token has `expiresIn` seconds (default: already in the refresh window). */
  async function connection(body: Omit<StartBody, 'scopes'>, expiresIn = 10) {
    fx.mock.accessTokenExpiresIn = expiresIn;
    try {
      const { connection } = await connectOAuth(fx, {
        ...body,
        scopes: [...serviceSpec(body.service)!.defaultScopes],
      });
      const issued = fx.mock.lastIssued()!;
      return { connection, issued };
    } finally {
      fx.mock.accessTokenExpiresIn = 3600;
    }
  }

  const mailUrl = () => `${fx.mock.url}/gmail/v1/users/me/messages`;
  const refreshesSince = (n: number) =>
    fx.mock.tokenRequests.slice(n).filter((t) => t.grantType === 'refresh_token');

  it('Model A on a token with < 30 s left: refreshed once (client_secret_post, the stored refresh token), new token vended', async () => {
    const agent = await fx.newAgent();
    const { connection: c, issued } = await connection({
      service: 'suite_a-mail',
      agentId: agent.id,
      allowedModels: ['A', 'B'],
    });
    const mark = fx.mock.tokenRequests.length;
    const r = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(r.status, r.text).toBe(200);
    const refreshes = refreshesSince(mark);
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]).toMatchObject({
      clientAuth: 'post',
      outcome: 'ok',
      clientId: fx.mock.deploymentApp('suite_a').clientId,
    });
    expect(refreshes[0]!.form.refresh_token).toBe(issued.refreshToken);
    const fresh = fx.mock.lastIssued()!;
    expect(fresh.grant).toBe('refresh_token');
    expect(r.body.accessToken).toBe(fresh.accessToken);
    expect(r.body.expiresIn).toBeGreaterThan(3500);

    // Fresh now: the next call refreshes nothing and vends the same token.
    const again = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(again.body.accessToken).toBe(fresh.accessToken);
    expect(refreshesSince(mark)).toHaveLength(1);
  });

  it('Model B on a token with < 30 s left: the provider receives the refreshed token, and none comes back', async () => {
    const agent = await fx.newAgent();
    const { connection: c } = await connection({ service: 'suite_a-mail', agentId: agent.id });
    const mark = fx.mock.tokenRequests.length;
    const calls = fx.mock.apiRequests.length;
    const r = seen(
      await execute(fx.base, agent.token, { connectionId: c.id, method: 'GET', url: mailUrl() }),
    );
    expect(r.status, r.text).toBe(200);
    expect(refreshesSince(mark)).toHaveLength(1);
    const fresh = fx.mock.lastIssued()!;
    expect(fx.mock.apiRequests.slice(calls)).toEqual([
      expect.objectContaining({
        path: '/gmail/v1/users/me/messages',
        bearer: fresh.accessToken,
        tokenState: 'valid',
      }),
    ]);
    // A provider reflecting the request headers: the injected token is scrubbed.
    const echo = seen(
      await execute(fx.base, agent.token, {
        connectionId: c.id,
        method: 'GET',
        url: `${fx.mock.url}/gmail/v1/users/me/echo`,
      }),
    );
    expect(echo.status, echo.text).toBe(200);
    expect(echo.text).not.toContain(fresh.accessToken);
    expect(fx.mock.apiRequests.at(-1)!.bearer).toBe(fresh.accessToken);
  });

  it('a rotated refresh token is stored: the next refresh presents the new one', async () => {
    const agent = await fx.newAgent();
    const { connection: c, issued } = await connection({
      service: 'suite_a-calendar',
      agentId: agent.id,
      allowedModels: ['A'],
    });
    Object.assign(fx.mock, { rotateRefreshToken: true, refreshExpiresIn: 10 });
    try {
      const mark = fx.mock.tokenRequests.length;
      expect(seen(await vendToken(fx.base, agent.token, { connectionId: c.id })).status).toBe(200);
      const rotated = fx.mock.lastIssued()!.refreshToken!;
      expect(rotated).not.toBe(issued.refreshToken);
      // 10 s lifetime: the next call refreshes again, with the rotated token.
      const second = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
      expect(second.status, second.text).toBe(200);
      const refreshes = refreshesSince(mark);
      expect(refreshes.map((t) => t.form.refresh_token)).toEqual([issued.refreshToken, rotated]);
      expect(refreshes.map((t) => t.outcome)).toEqual(['ok', 'ok']);
    } finally {
      Object.assign(fx.mock, { rotateRefreshToken: false, refreshExpiresIn: 3600 });
    }
  });

  it('another refresh failure is 503 and leaves the connection healthy; it refreshes once the provider is back', async () => {
    const agent = await fx.newAgent();
    const { connection: c } = await connection({
      service: 'suite_a-drive',
      agentId: agent.id,
      allowedModels: ['A', 'B'],
    });
    fx.mock.refreshOutcome = 'server_error';
    try {
      const r = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
      expect(r.status, r.text).toBe(503);
      const b = seen(
        await execute(fx.base, agent.token, {
          connectionId: c.id,
          method: 'GET',
          url: `${fx.mock.url}/drive/v3/files`,
        }),
      );
      expect(b.status, b.text).toBe(503);
    } finally {
      fx.mock.refreshOutcome = 'ok';
    }
    expect((await listConnectionRows(fx.admin)).find((x) => x.id === c.id)!.status).toBe('healthy');
    const ok = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.accessToken).toBe(fx.mock.lastIssued()!.accessToken);
  });

  it('invalid_grant: needs_reauth, audited, 409 on Model A, Model B and resolve; reauth brings the same row back', async () => {
    const agent = await fx.newAgent();
    const { connection: c } = await connection({
      service: 'suite_b-mail',
      agentId: agent.id,
      allowedModels: ['A', 'B'],
      label: 'needs-reauth-mail',
    });
    const policyIds = c.policies.map((p) => p.id);
    expect(policyIds).toHaveLength(1);
    const mark = fx.mock.tokenRequests.length;
    const calls = fx.mock.apiRequests.length;
    fx.mock.refreshOutcome = 'invalid_grant';
    try {
      const a = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
      expect(a.status, a.text).toBe(409);
      expect(a.body.code).toBe('CONNECTION_NEEDS_REAUTH');
    } finally {
      fx.mock.refreshOutcome = 'ok';
    }
    const listed = (await listConnectionRows(fx.admin)).find((x) => x.id === c.id)!;
    expect(listed.status).toBe('needs_reauth');
    const audit = await pollAudit(
      fx.admin,
      { connectionId: c.id, action: 'connection_needs_reauth' },
      (e) => e.length > 0,
    );
    expect(audit).toHaveLength(1);

    // Everything is 409 now, and nothing more is asked of the provider, even though it would answer.
    const again = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe('CONNECTION_NEEDS_REAUTH');
    const b = seen(
      await execute(fx.base, agent.token, {
        connectionId: c.id,
        method: 'GET',
        url: `${fx.mock.url}/v1.0/me/messages/x`,
      }),
    );
    expect(b.status, b.text).toBe(409);
    expect((b.body as unknown as { code: string }).code).toBe('CONNECTION_NEEDS_REAUTH');
    const res = seen(
      await resolveCredential(fx.base, agent.token, { kind: 'plugin_config', provider: 'suite_b' }),
    );
    expect(res.status, res.text).toBe(409);
    expect(refreshesSince(mark)).toHaveLength(1);
    expect(fx.mock.apiRequests.length).toBe(calls);

    // Reauth: a new authorization, the same row, its policy kept, healthy.
    const { authorizationUrl } = await reauthOAuth(fx, c.id);
    expect(new URL(authorizationUrl).searchParams.get('client_id')).toBe(
      fx.mock.deploymentApp('suite_b').clientId,
    );
    const rows = (await listConnectionRows(fx.admin)).filter((x) => x.service === 'suite_b-mail');
    const same = rows.filter((x) => x.label === 'needs-reauth-mail');
    expect(same).toHaveLength(1);
    expect(same[0]).toMatchObject({ id: c.id, status: 'healthy' });
    expect(same[0]!.policies.map((p) => p.id)).toEqual(policyIds);
    expect([...same[0]!.policies[0]!.allowedModels].sort()).toEqual(['A', 'B']);
    expect(same[0]!.metadata.apiUrl).toBe(fx.mock.url);

    const fresh = fx.mock.lastIssued(fx.mock.deploymentApp('suite_b').clientId)!;
    expect(fresh.grant).toBe('authorization_code');
    const vended = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(vended.status, vended.text).toBe(200);
    expect(vended.body.accessToken).toBe(fresh.accessToken);
    const brokered = seen(
      await execute(fx.base, agent.token, {
        connectionId: c.id,
        method: 'GET',
        url: `${fx.mock.url}/v1.0/me/messages/x`,
      }),
    );
    expect(brokered.status, brokered.text).toBe(200);
    expect(fx.mock.apiRequests.at(-1)!.bearer).toBe(fresh.accessToken);
    // Healthy again: reauth is refused now.
    expect((await reauthRequest(fx.admin, c.id)).status).toBe(409);
  });

  it('20 concurrent Model A calls on a token due for refresh: exactly one refresh, one token for all (3 rounds)', async () => {
    const first = await fx.newAgent();
    const { connection: c } = await connection(
      { service: 'board-boards', agentId: first.id, allowedModels: ['A'] },
      1,
    );
    // Five agents, four calls each: the data plane shares concurrent misses per agent only, so
    // the control plane sees five credential requests racing for one refresh.
    const agents = [first];
    for (let i = 0; i < 4; i++) {
      const a = await fx.newAgent();
      await createPolicy(fx.admin, a.id, c.id, { allowedModels: ['A'] });
      agents.push(a);
    }
    // Each refreshed token is good for 35 s: 5 s later it is due again.
    Object.assign(fx.mock, { refreshExpiresIn: 35, refreshDelayMs: 300 });
    try {
      for (let round = 1; round <= 3; round++) {
        const mark = fx.mock.tokenRequests.length;
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            vendToken(fx.base, agents[i % 5]!.token, { connectionId: c.id }),
          ),
        );
        results.forEach(seen);
        const statuses = results.map((r) => r.status);
        expect(statuses, `round ${round}: ${results.find((r) => r.status !== 200)?.text}`).toEqual(
          Array(20).fill(200),
        );
        expect(refreshesSince(mark), `round ${round}`).toHaveLength(1);
        const fresh = fx.mock.lastIssued()!;
        expect(fresh.grant).toBe('refresh_token');
        expect(new Set(results.map((r) => r.body.accessToken)), `round ${round}`).toEqual(
          new Set([fresh.accessToken]),
        );
        for (const r of results) expect(r.body.expiresIn).toBeLessThanOrEqual(35);
        if (fx.sql) {
          const [row] = await fx.sql(
            'SELECT credentials_version AS v, refresh_lease_until FROM connections WHERE id = $1',
            [c.id],
          );
          expect(row!.refresh_lease_until, 'the lease is released after the refresh').toBeNull();
        }
        if (round < 3) await sleep(Math.max(0, fresh.expiresAt - 30_000 - Date.now()) + 700);
      }
    } finally {
      Object.assign(fx.mock, { refreshExpiresIn: 3600, refreshDelayMs: 0 });
    }
  }, 60_000);

  it('a slow provider (refresh answered after 4 s) still gets the caller a token, with one refresh', async () => {
    const agent = await fx.newAgent();
    const { connection: c } = await connection({
      service: 'suite_a-calendar',
      agentId: agent.id,
      allowedModels: ['A'],
    });
    fx.mock.refreshDelayMs = 4_000;
    const mark = fx.mock.tokenRequests.length;
    let r: HttpResult;
    try {
      r = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    } finally {
      fx.mock.refreshDelayMs = 0;
    }
    expect(r.status, r.text).toBe(200);
    expect(refreshesSince(mark)).toHaveLength(1);
    const again = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(again.status, again.text).toBe(200);
    expect(again.body.accessToken).toBe(fx.mock.lastIssued()!.accessToken);
    expect(refreshesSince(mark)).toHaveLength(1);
  }, 30_000);

  it('a lease held by another replica is honoured: no refresh while it holds, 503, still healthy', async (ctx) => {
    if (!fx.sql) return ctx.skip();
    const agent = await fx.newAgent();
    const { connection: c } = await connection(
      { service: 'suite_b-drive', agentId: agent.id, allowedModels: ['A'] },
      1,
    );
    // Another replica took the lease (the compare-and-set of the ADR) and never writes back.
    await fx.sql(`UPDATE connections SET refresh_lease_until = now() + interval '30 seconds' WHERE id = $1`, [
      c.id,
    ]);
    const mark = fx.mock.tokenRequests.length;
    const r = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(r.status, r.text).toBe(503);
    expect(refreshesSince(mark)).toHaveLength(0);
    expect((await listConnectionRows(fx.admin)).find((x) => x.id === c.id)!.status).toBe('healthy');
    // The lease ends without new credentials: the next caller refreshes, exactly once in all.
    await fx.sql('UPDATE connections SET refresh_lease_until = NULL WHERE id = $1', [c.id]);
    await sleep(300);
    const after = seen(await vendToken(fx.base, agent.token, { connectionId: c.id }));
    expect(after.status, after.text).toBe(200);
    expect(refreshesSince(mark)).toHaveLength(1);
    expect(after.body.accessToken).toBe(fx.mock.lastIssued()!.accessToken);
  }, 40_000);

  it('a caller waits for another replica’s lease (up to 10 s): the lease ending after 4 s still gets it a token', async (ctx) => {
    if (!fx.sql) return ctx.skip();
    const agent = await fx.newAgent();
    const { connection: c } = await connection(
      { service: 'suite_b-teams', agentId: agent.id, allowedModels: ['A'] },
      1,
    );
    await fx.sql(`UPDATE connections SET refresh_lease_until = now() + interval '30 seconds' WHERE id = $1`, [
      c.id,
    ]);
    const mark = fx.mock.tokenRequests.length;
    const t0 = Date.now();
    const pending = vendToken(fx.base, agent.token, { connectionId: c.id }).then((r) => ({
      r,
      at: Date.now() - t0,
    }));
    await sleep(4_000);
    await fx.sql('UPDATE connections SET refresh_lease_until = NULL WHERE id = $1', [c.id]);
    const { r, at } = await pending;
    expect(r.status, `after ${at} ms: ${r.text}`).toBe(200);
    expect(at).toBeGreaterThanOrEqual(4_000);
    expect(refreshesSince(mark)).toHaveLength(1);
    expect(r.body.accessToken).toBe(fx.mock.lastIssued()!.accessToken);
  }, 30_000);

  it('revoke: the provider revokes first, then 5 parallel Model B calls are 409 and none reaches it', async () => {
    const agent = await fx.newAgent();
    const { connection: c, issued } = await connection(
      { service: 'suite_a-contacts', agentId: agent.id },
      3600,
    );
    const before = fx.mock.revocations.length;
    const r = seen(await revokeConnectionRequest(fx.admin, c.id));
    expect(r.status, r.text).toBe(200);
    expect(r.body.connection).toMatchObject({ id: c.id, status: 'revoked' });
    const revocations = fx.mock.revocations.slice(before);
    expect(revocations).toHaveLength(1);
    expect(revocations[0]).toMatchObject({
      clientId: fx.mock.deploymentApp('suite_a').clientId,
      clientAuthenticated: true,
    });
    expect([issued.refreshToken, issued.accessToken]).toContain(revocations[0]!.token);

    const audit = await pollAudit(
      fx.admin,
      { connectionId: c.id, action: 'connection_revoked' },
      (e) => e.length > 0,
    );
    expect(audit).toHaveLength(1);
    // The outcome of the provider revocation is in the metadata (beyond provider and service).
    expect(
      Object.keys(audit[0]!.metadata).filter((k) => k !== 'provider' && k !== 'service').length,
    ).toBeGreaterThan(0);
    expect(JSON.stringify(audit[0])).not.toContain(issued.refreshToken!);

    const calls = fx.mock.apiRequests.length;
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        execute(fx.base, agent.token, {
          connectionId: c.id,
          method: 'GET',
          url: `${fx.mock.url}/v1/people/me`,
        }),
      ),
    );
    results.forEach(seen);
    expect(results.map((x) => x.status)).toEqual([409, 409, 409, 409, 409]);
    for (const x of results) expect((x.body as unknown as { code: string }).code).toBe('CONNECTION_REVOKED');
    expect(fx.mock.apiRequests.length).toBe(calls);
    expect(fx.mock.tokenRequests.filter((t) => t.form.refresh_token === issued.refreshToken)).toHaveLength(0);
    expect((await listConnectionRows(fx.admin)).some((x) => x.id === c.id)).toBe(false);
    if (fx.sql) {
      const [row] = await fx.sql('SELECT status, credentials FROM connections WHERE id = $1', [c.id]);
      expect(row).toMatchObject({ status: 'revoked', credentials: null });
    }
  });

  it('revoke on a provider without a revocation endpoint: revoked here, nothing sent there', async () => {
    const agent = await fx.newAgent();
    const { connection: c } = await connection({ service: 'code_host-repos', agentId: agent.id }, 3600);
    const before = fx.mock.revocations.length;
    const r = seen(await revokeConnectionRequest(fx.admin, c.id));
    expect(r.status, r.text).toBe(200);
    expect(fx.mock.revocations.length).toBe(before);
    const b = seen(
      await execute(fx.base, agent.token, { connectionId: c.id, method: 'GET', url: `${fx.mock.url}/user` }),
    );
    expect(b.status, b.text).toBe(409);
  });

  it('a revoke racing an in-flight refresh stays a revoke: no credentials come back', async () => {
    const agent = await fx.newAgent();
    const { connection: c } = await connection(
      { service: 'suite_a-drive', agentId: agent.id, allowedModels: ['A', 'B'] },
      1,
    );
    fx.mock.refreshDelayMs = 1_500;
    let vend: HttpResult;
    try {
      const pending = vendToken(fx.base, agent.token, { connectionId: c.id });
      await sleep(300);
      const revoked = seen(await revokeConnectionRequest(fx.admin, c.id));
      expect(revoked.status, revoked.text).toBe(200);
      vend = seen(await pending);
    } finally {
      fx.mock.refreshDelayMs = 0;
    }
    expect([200, 409, 503], vend.text).toContain(vend.status);
    await sleep(300);
    expect((await listConnectionRows(fx.admin)).some((x) => x.id === c.id)).toBe(false);
    const calls = fx.mock.apiRequests.length;
    const b = seen(
      await execute(fx.base, agent.token, {
        connectionId: c.id,
        method: 'GET',
        url: `${fx.mock.url}/drive/v3/files`,
      }),
    );
    expect(b.status, b.text).toBe(409);
    expect((await vendToken(fx.base, agent.token, { connectionId: c.id })).status).toBe(409);
    expect(fx.mock.apiRequests.length).toBe(calls);
    if (fx.sql) {
      const [row] = await fx.sql('SELECT status, credentials FROM connections WHERE id = $1', [c.id]);
      expect(row).toMatchObject({ status: 'revoked', credentials: null });
    }
  });

  it('a reauth completed after the connection was revoked does not bring it back', async () => {
    const agent = await fx.newAgent();
    const { connection: c } = await connection({
      service: 'suite_b-mail',
      agentId: agent.id,
      allowedModels: ['A', 'B'],
    });
    fx.mock.refreshOutcome = 'invalid_grant';
    try {
      expect(seen(await vendToken(fx.base, agent.token, { connectionId: c.id })).status).toBe(409);
    } finally {
      fx.mock.refreshOutcome = 'ok';
    }
    const started = seen(await reauthRequest(fx.admin, c.id));
    expect(started.status, started.text).toBe(200);
    expect(seen(await revokeConnectionRequest(fx.admin, c.id)).status).toBe(200);
    const page = await http('GET', await fx.mock.approve(started.body.authorizationUrl));
    expect(page.status, page.text.slice(0, 300)).toBeGreaterThanOrEqual(400);
    expect(page.status).toBeLessThan(500);
    expect(String(page.headers['content-type'])).toMatch(/^text\/html/);
    expect((await listConnectionRows(fx.admin)).some((x) => x.id === c.id)).toBe(false);
    const b = seen(
      await execute(fx.base, agent.token, {
        connectionId: c.id,
        method: 'GET',
        url: `${fx.mock.url}/v1.0/me/messages/x`,
      }),
    );
    expect(b.status, b.text).toBe(409);
    expect((b.body as unknown as { code: string }).code).toBe('CONNECTION_REVOKED');
    if (fx.sql) {
      const [row] = await fx.sql('SELECT status, credentials FROM connections WHERE id = $1', [c.id]);
      expect(row).toMatchObject({ status: 'revoked', credentials: null });
    }
  });

  it('the refresh tokens appear in no answer, no log line and no audit row', async () => {
    const refreshTokens = fx.mock.refreshTokens();
    expect(refreshTokens.length).toBeGreaterThan(5);
    const listing = [
      (await http('GET', `${fx.base}/v1/connections`, { headers: fx.admin.headers })).text,
      (await http('GET', `${fx.base}/v1/policies`, { headers: fx.admin.headers })).text,
      await auditExportText(fx.admin, 'json'),
      await auditExportText(fx.admin, 'csv'),
    ].join('\n');
    const everything = { answers: answers.join('\n'), logs: fx.gw.logs.join('\n'), listing };
    for (const t of refreshTokens) {
      for (const [where, text] of Object.entries(everything))
        expect(text.includes(t), `${where} holds ${t}`).toBe(false);
    }
    expectStatus(await http('GET', `${fx.base}/v1/connections`, { headers: fx.admin.headers }), 200);
  });
});
