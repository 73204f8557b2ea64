/**
 * ADR 0042, Model A and `/v1/credentials/resolve`: Model A vends OAuth access tokens only, to
 * agents whose policy allows it, never longer than an hour nor than the provider's lifetime,
 * audited `token_vended` before the token is returned; resolve answers only a connection bound
 * to the calling agent by a policy allowing Model A, and everything else is one
 * indistinguishable 404, audited `credential_resolved` when it answers.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceSpec } from '@vlt/contracts';
import {
  apiKeyConnectionRequest,
  auditExportText,
  botTokenConnectionRequest,
  createIssueTrackerConnection,
  createPolicy,
  execute,
  expectStatus,
  http,
  pollAudit,
  resolveCredential,
  vendToken,
} from '../support/api-client.js';
import { agentToken, enrolledAgent, newUser } from '../support/identity-harness.js';
import { connectOAuth, startConnectionsGateway, type ConnectionsGateway } from '../support/mock-providers.js';

const SHAPES = ['embedded', 'services'] as const;
const scopesOf = (service: string) => [...serviceSpec(service)!.defaultScopes];

describe.each(SHAPES)('Model A and credential resolution (%s)', (shape) => {
  let fx: ConnectionsGateway;
  /** Policy A+B on a suite_a-mail connection, created by the OAuth callback. */
  let vendor: { id: string; token: string };
  let mailId: string;

  beforeAll(async () => {
    fx = await startConnectionsGateway({ shape });
    vendor = await fx.newAgent();
    mailId = (
      await connectOAuth(fx, {
        service: 'suite_a-mail',
        scopes: scopesOf('suite_a-mail'),
        agentId: vendor.id,
        allowedModels: ['A', 'B'],
      })
    ).connection.id;
  });
  afterAll(async () => {
    await fx?.close();
  });

  describe('Model A', () => {
    it('vends the provider access token (≤ 3600 s), audited token_vended with the same auditId', async () => {
      const issued = fx.mock.lastIssued(fx.mock.deploymentApp('suite_a').clientId)!;
      const r = await vendToken(fx.base, vendor.token, { connectionId: mailId });
      expect(r.status, r.text).toBe(200);
      expect(r.body).toMatchObject({ model: 'A', accessToken: issued.accessToken, tokenType: 'Bearer' });
      expect(r.body.expiresIn).toBeGreaterThan(3500);
      expect(r.body.expiresIn).toBeLessThanOrEqual(3600);
      expect(r.text).not.toContain(issued.refreshToken!);
      // Nothing to refresh: the token had an hour left.
      expect(fx.mock.tokenRequests.filter((t) => t.grantType === 'refresh_token')).toHaveLength(0);

      const rows = await pollAudit(
        fx.admin,
        { agentId: vendor.id, action: 'token_vended' },
        (e) => e.some((x) => x.auditId === r.body.auditId),
        10_000,
      );
      const row = rows.find((x) => x.auditId === r.body.auditId);
      expect(row).toMatchObject({ connectionId: mailId, agentId: vendor.id });
      expect(JSON.stringify(rows)).not.toContain(issued.accessToken);
      expect(JSON.stringify(rows)).not.toContain(issued.refreshToken!);
    });

    it('expiresIn is the provider’s remaining lifetime when shorter than an hour', async () => {
      fx.mock.accessTokenExpiresIn = 600;
      let id: string;
      try {
        id = (
          await connectOAuth(fx, {
            service: 'suite_a-drive',
            scopes: scopesOf('suite_a-drive'),
            agentId: vendor.id,
            allowedModels: ['A'],
          })
        ).connection.id;
      } finally {
        fx.mock.accessTokenExpiresIn = 3600;
      }
      const r = await vendToken(fx.base, vendor.token, { connectionId: id });
      expect(r.status, r.text).toBe(200);
      expect(r.body.expiresIn).toBeLessThanOrEqual(600);
      expect(r.body.expiresIn).toBeGreaterThan(500);
    });

    it('never more than an hour, even when the provider’s token lives longer', async () => {
      fx.mock.accessTokenExpiresIn = 7200;
      let id: string;
      try {
        id = (
          await connectOAuth(fx, {
            service: 'suite_b-mail',
            scopes: scopesOf('suite_b-mail'),
            agentId: vendor.id,
            allowedModels: ['A'],
          })
        ).connection.id;
      } finally {
        fx.mock.accessTokenExpiresIn = 3600;
      }
      const r = await vendToken(fx.base, vendor.token, { connectionId: id });
      expect(r.status, r.text).toBe(200);
      expect(r.body.expiresIn).toBeLessThanOrEqual(3600);
      expect(r.body.expiresIn).toBeGreaterThan(3500);
    });

    it('a token without refresh token or lifetime (code host) is vended for at most an hour, never refreshed', async () => {
      Object.assign(fx.mock, { issueRefreshToken: false, omitExpiresIn: true });
      let id: string;
      try {
        id = (
          await connectOAuth(fx, {
            service: 'code_host-repos',
            scopes: scopesOf('code_host-repos'),
            agentId: vendor.id,
            allowedModels: ['A', 'B'],
          })
        ).connection.id;
      } finally {
        Object.assign(fx.mock, { issueRefreshToken: true, omitExpiresIn: false });
      }
      const issued = fx.mock.lastIssued(fx.mock.deploymentApp('code_host').clientId)!;
      expect(issued.refreshToken).toBeNull();
      const mark = fx.mock.refreshCount;
      for (let i = 0; i < 2; i++) {
        const r = await vendToken(fx.base, vendor.token, { connectionId: id });
        expect(r.status, r.text).toBe(200);
        expect(r.body.accessToken).toBe(issued.accessToken);
        expect(r.body.expiresIn).toBeGreaterThan(0);
        expect(r.body.expiresIn).toBeLessThanOrEqual(3600);
      }
      expect(fx.mock.refreshCount).toBe(mark);
      const b = await execute(fx.base, vendor.token, {
        connectionId: id,
        method: 'GET',
        url: `${fx.mock.url}/user`,
      });
      expect(b.status, b.text).toBe(200);
      expect(fx.mock.apiRequests.at(-1)!.bearer).toBe(issued.accessToken);
    });

    it('the rate limit applies: past it 429 with Retry-After, audited token_vend_denied', async () => {
      const limited = await fx.newAgent();
      const { connection } = await connectOAuth(fx, {
        service: 'board-boards',
        scopes: scopesOf('board-boards'),
        agentId: limited.id,
        allowedModels: ['A'],
      });
      const put = await http('PUT', `${fx.base}/v1/policies/${connection.policies[0]!.id}/rate-limits`, {
        headers: fx.admin.headers,
        json: { rateLimits: { maxRequestsPerHour: 2 } },
      });
      expect(put.status, put.text).toBe(200);
      await new Promise((r) => setTimeout(r, 300));
      const statuses: number[] = [];
      let last: Awaited<ReturnType<typeof vendToken>> | undefined;
      for (let i = 0; i < 4; i++) {
        last = await vendToken(fx.base, limited.token, { connectionId: connection.id });
        statuses.push(last.status);
      }
      expect(statuses).toEqual([200, 200, 429, 429]);
      expect(Number(last!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(last!.text).not.toContain('at_board_');
      const rows = await pollAudit(
        fx.admin,
        { agentId: limited.id, action: 'token_vend_denied' },
        (e) => e.length >= 2,
        10_000,
      );
      expect(rows).toHaveLength(2);
    });

    it('an OAuth singleton is addressed by service name', async () => {
      const bot = await fx.newAgent();
      await connectOAuth(fx, {
        service: 'chatbot_b',
        scopes: scopesOf('chatbot_b'),
        agentId: bot.id,
        allowedModels: ['A', 'B'],
      });
      const r = await vendToken(fx.base, bot.token, { service: 'chatbot_b' });
      expect(r.status, r.text).toBe(200);
      expect(r.body.accessToken).toBe(
        fx.mock.lastIssued(fx.mock.deploymentApp('chatbot_b').clientId)!.accessToken,
      );
    });

    it('a policy without A is 403, audited token_vend_denied; no token in the answer', async () => {
      const bOnly = await fx.newAgent();
      const { connection } = await connectOAuth(fx, {
        service: 'suite_a-calendar',
        scopes: scopesOf('suite_a-calendar'),
        agentId: bOnly.id,
      });
      const r = await vendToken(fx.base, bOnly.token, { connectionId: connection.id });
      expect(r.status, r.text).toBe(403);
      expect(r.text).not.toContain(fx.mock.lastIssued()!.accessToken);
      const rows = await pollAudit(
        fx.admin,
        { agentId: bOnly.id, action: 'token_vend_denied' },
        (e) => e.length > 0,
        10_000,
      );
      expect(rows.length).toBeGreaterThanOrEqual(1);
      expect(rows[0]!.connectionId).toBe(connection.id);
    });

    it('no policy (as Model B: 403), another workspace’s agent (404), no token (401)', async () => {
      const unbound = await fx.newAgent();
      expect((await vendToken(fx.base, unbound.token, { connectionId: mailId })).status).toBe(403);
      const stranger = await newUser(fx.base, 'stranger-a');
      const theirs = await enrolledAgent(stranger.admin);
      const theirToken = await agentToken(fx.base, theirs);
      const r = await vendToken(fx.base, theirToken, { connectionId: mailId });
      expect(r.status, r.text).toBe(404);
      expect((await vendToken(fx.base, undefined, { connectionId: mailId })).status).toBe(401);
    });

    it('the issue tracker is never vended (400), even with a policy allowing A', async () => {
      const agent = await fx.newAgent();
      const { connection } = await createIssueTrackerConnection(fx.admin, {
        siteUrl: fx.mock.url,
        email: 'bot@tracker.test',
        apiToken: `itk-${randomBytes(8).toString('hex')}`,
      });
      const p = await http('POST', `${fx.base}/v1/policies`, {
        headers: fx.admin.headers,
        json: { agentId: agent.id, connectionId: connection.id, allowedModels: ['A', 'B'] },
      });
      if (p.status !== 201) await createPolicy(fx.admin, agent.id, connection.id, { allowedModels: ['B'] });
      const r = await vendToken(fx.base, agent.token, { connectionId: connection.id });
      expect(r.status, r.text).toBe(400);
    });
  });

  describe('Model B on OAuth connections', () => {
    it('injects the access token as Bearer, replacing whatever Authorization the agent sent', async () => {
      const issued = fx.mock.lastIssued(fx.mock.deploymentApp('suite_a').clientId)!;
      const before = fx.mock.apiRequests.length;
      const r = await execute(fx.base, vendor.token, {
        connectionId: mailId,
        method: 'GET',
        url: `${fx.mock.url}/gmail/v1/users/me/messages`,
        headers: { authorization: 'Bearer agent-own-token' },
      });
      expect(r.status, r.text).toBe(200);
      const sent = fx.mock.apiRequests.slice(before);
      expect(sent).toHaveLength(1);
      expect(sent[0]!.headers.authorization).toMatch(/^Bearer at_suite_a_/);
      expect(JSON.stringify(sent[0]!.headers)).not.toContain('agent-own-token');
      // The token is the connection's current one (it may have been refreshed since).
      const current = fx.mock.issued.filter((t) => t.clientId === issued.clientId).map((t) => t.accessToken);
      expect(current).toContain(sent[0]!.bearer);
      expect(sent[0]!.tokenState).toBe('valid');
    });
  });

  describe('POST /v1/credentials/resolve', () => {
    let llmKey: string;
    let llmId: string;
    let resolver: { id: string; token: string };

    beforeAll(async () => {
      llmKey = `sk-ant-${randomBytes(16).toString('hex')}`;
      fx.mock.apiKeys.add(llmKey);
      llmId = expectStatus(
        await apiKeyConnectionRequest(fx.admin, { service: 'llm_a-messages', apiKey: llmKey }),
        201,
      ).body.connection.id;
      resolver = await fx.newAgent();
      await createPolicy(fx.admin, resolver.id, llmId, { allowedModels: ['A', 'B'] });
    });

    it('answers the bound API key with its source, and audits credential_resolved', async () => {
      const r = await resolveCredential(fx.base, resolver.token, {
        kind: 'model_provider',
        provider: 'llm_a',
      });
      expect(r.status, r.text).toBe(200);
      expect(r.body).toMatchObject({ apiKey: llmKey, source: `vault:llm_a:${llmId}`, mode: 'api-key' });
      expect(typeof r.body.extra).toBe('object');
      expect(Number.isInteger(r.body.cacheTtlMs)).toBe(true);
      expect(r.body.cacheTtlMs).toBeGreaterThanOrEqual(0);

      const rows = await pollAudit(
        fx.admin,
        { agentId: resolver.id, action: 'credential_resolved' },
        (e) => e.length > 0,
        10_000,
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ agentId: resolver.id, connectionId: llmId });
      expect(JSON.stringify(rows)).not.toContain(llmKey);
    });

    it('resolves a bot token (channel) and an OAuth access token (plugin_config) where A is allowed', async () => {
      const agent = await fx.newAgent();
      const bot = expectStatus(
        await botTokenConnectionRequest(fx.admin, { botToken: fx.mock.botToken }),
        201,
      ).body;
      await createPolicy(fx.admin, agent.id, bot.connection.id, { allowedModels: ['A', 'B'] });
      const ch = await resolveCredential(fx.base, agent.token, { kind: 'channel', provider: 'chatbot_a' });
      expect(ch.status, ch.text).toBe(200);
      expect(ch.body).toMatchObject({
        apiKey: fx.mock.botToken,
        source: `vault:chatbot_a:${bot.connection.id}`,
      });

      const oauthAgent = await fx.newAgent();
      const { connection } = await connectOAuth(fx, {
        service: 'suite_b-drive',
        scopes: scopesOf('suite_b-drive'),
        agentId: oauthAgent.id,
        allowedModels: ['A'],
      });
      const issued = fx.mock.lastIssued(fx.mock.deploymentApp('suite_b').clientId)!;
      const oauth = await resolveCredential(fx.base, oauthAgent.token, {
        kind: 'plugin_config',
        provider: 'suite_b',
      });
      expect(oauth.status, oauth.text).toBe(200);
      expect(oauth.body).toMatchObject({
        apiKey: issued.accessToken,
        mode: 'oauth',
        source: `vault:suite_b:${connection.id}`,
      });
      expect(oauth.text).not.toContain(issued.refreshToken!);
    });

    it('unbound, Model-B-only and not connected are one indistinguishable 404', async () => {
      const unbound = await fx.newAgent();
      const bOnly = await fx.newAgent();
      await createPolicy(fx.admin, bOnly.id, llmId, { allowedModels: ['B'] });
      const results = [
        await resolveCredential(fx.base, unbound.token, { kind: 'model_provider', provider: 'llm_a' }),
        await resolveCredential(fx.base, bOnly.token, { kind: 'model_provider', provider: 'llm_a' }),
        await resolveCredential(fx.base, resolver.token, { kind: 'model_provider', provider: 'llm_d' }),
        await resolveCredential(fx.base, resolver.token, { kind: 'model_provider', provider: 'nope' }),
      ];
      for (const r of results) {
        expect(r.status, r.text).toBe(404);
        expect(r.text).not.toContain(llmKey);
        expect(r.text).not.toContain(llmId);
      }
      expect(new Set(results.map((r) => r.body.error)).size).toBe(1);
      const rows = await pollAudit(
        fx.admin,
        { agentId: bOnly.id, action: 'credential_resolved' },
        () => false,
        1_000,
      );
      expect(rows).toEqual([]);
    });

    it('no agent token is 401; an admin JWT is not an agent token', async () => {
      expect(
        (await resolveCredential(fx.base, undefined, { kind: 'model_provider', provider: 'llm_a' })).status,
      ).toBe(401);
      const jwt = fx.owner.jwt;
      expect(
        (await resolveCredential(fx.base, jwt, { kind: 'model_provider', provider: 'llm_a' })).status,
      ).toBe(401);
    });

    it('no vended or resolved secret in the gateway logs or the audit export', async () => {
      const logs = fx.gw.logs.join('\n');
      const exported = (await auditExportText(fx.admin, 'json')) + (await auditExportText(fx.admin, 'csv'));
      const secrets = [
        llmKey,
        fx.mock.botToken,
        ...fx.mock.issued.flatMap((t) => [t.accessToken, ...(t.refreshToken ? [t.refreshToken] : [])]),
      ];
      for (const s of secrets) {
        expect(logs).not.toContain(s);
        expect(exported).not.toContain(s);
      }
    });
  });
});
