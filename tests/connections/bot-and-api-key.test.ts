/**
 * ADR 0042, the connections that are not OAuth: the bot token of `chatbot_a` (checked with
 * `getMe`, inserted in the path `/bot<token>/<method>`, chat ids constrained by the policy) and
 * the API keys of the four LLM services (checked with the provider's key check, injected in the
 * provider's own header). Neither is ever vended with Model A, and neither comes back.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultAllowlistFor, serviceSpec } from '@vlt/contracts';
import {
  apiKeyConnectionRequest,
  approvalDetails,
  auditExportText,
  botTokenConnectionRequest,
  createPolicy,
  execute,
  expectStatus,
  http,
  pollAudit,
  putProviderConstraints,
  vendToken,
} from '../support/api-client.js';
import { newUser } from '../support/identity-harness.js';
import {
  listConnectionRows,
  newBotToken,
  startConnectionsGateway,
  type ConnectionsGateway,
} from '../support/mock-providers.js';

const SHAPES = ['embedded', 'services'] as const;
const RW = { defaultMode: 'read_write', stepUpApproval: 'never' } as const;

describe.each(SHAPES)('bot-token and API-key connections (%s)', (shape) => {
  let fx: ConnectionsGateway;
  let botConnectionId: string;
  let agent: { id: string; token: string };
  let botPolicyId: string;

  beforeAll(async () => {
    fx = await startConnectionsGateway({ shape });
    agent = await fx.newAgent();
  });
  afterAll(async () => {
    await fx?.close();
  });

  describe('chatbot_a', () => {
    const sendMessage = (token: string, body: { chat_id: number; text: string }) =>
      execute(fx.base, token, {
        connectionId: botConnectionId,
        method: 'POST',
        url: `${fx.mock.url}/sendMessage`,
        body,
      });

    it('a wrong token is 400 after the provider refused it; nothing is stored, the token not echoed', async () => {
      const wrong = newBotToken();
      const before = fx.mock.botCalls.length;
      const r = await botTokenConnectionRequest(fx.admin, { botToken: wrong });
      expect(r.status, r.text).toBe(400);
      expect(typeof (r.body as unknown as { error: string }).error).toBe('string');
      expect(r.text).not.toContain(wrong);
      expect(fx.mock.botCalls.slice(before).map((c) => [c.method, c.valid])).toEqual([['getMe', false]]);
      expect((await listConnectionRows(fx.admin)).filter((c) => c.service === 'chatbot_a')).toEqual([]);
    });

    it.each([
      ['no colon', `123456${'a'.repeat(30)}`],
      ['a path in it', `123456:${'a'.repeat(25)}/../../x`],
      ['too short', '123456:abc'],
      ['a query in it', `123456:${'a'.repeat(25)}?x=1`],
    ])('a token of the wrong shape (%s) is 400 without asking the provider', async (_name, botToken) => {
      const before = fx.mock.botCalls.length;
      const r = await botTokenConnectionRequest(fx.admin, { botToken });
      expect(r.status, r.text).toBe(400);
      expect(fx.mock.botCalls.length).toBe(before);
    });

    it('the valid token: 201 with the bot, a singleton healthy connection on the configured API URL', async () => {
      const r = await botTokenConnectionRequest(fx.admin, {
        botToken: fx.mock.botToken,
        label: 'Support bot',
      });
      expect(r.status, r.text).toBe(201);
      expect(r.body.connection).toMatchObject({
        provider: 'chatbot_a',
        label: 'Support bot',
        status: 'healthy',
      });
      expect(r.body.botInfo).toEqual({ id: 123, username: 'vault_bot', firstName: 'Vault Bot' });
      expect(typeof r.body.message).toBe('string');
      expect(r.text).not.toContain(fx.mock.botToken);
      expect(fx.mock.botCalls.at(-1)).toMatchObject({ method: 'getMe', valid: true });
      botConnectionId = r.body.connection.id;

      const row = (await listConnectionRows(fx.admin)).find((c) => c.id === botConnectionId)!;
      expect(row).toMatchObject({ service: 'chatbot_a', singleton: true, status: 'healthy' });
      expect(row.metadata.apiUrl).toBe(fx.mock.url);
      const audit = await pollAudit(
        fx.admin,
        { connectionId: botConnectionId, action: 'connection_created' },
        (e) => e.length > 0,
      );
      expect(audit).toHaveLength(1);
    });

    it('a second chatbot_a connection in the workspace is 409; another workspace may have its own', async () => {
      const r = await botTokenConnectionRequest(fx.admin, { botToken: fx.mock.botToken });
      expect(r.status, r.text).toBe(409);
      expect((await listConnectionRows(fx.admin)).filter((c) => c.service === 'chatbot_a')).toHaveLength(1);
      const other = await newUser(fx.base, 'bot-other');
      expect((await botTokenConnectionRequest(other.admin, { botToken: fx.mock.botToken })).status).toBe(201);
    });

    it('a policy on it starts with the catalog allowlist on the API URL', async () => {
      const { policy } = await createPolicy(fx.admin, agent.id, botConnectionId, {
        allowedModels: ['A', 'B'],
        ...RW,
      });
      botPolicyId = policy.id;
      const got = await http<{ policy: { allowlists: unknown } }>(
        'GET',
        `${fx.base}/v1/policies/${policy.id}`,
        {
          headers: fx.admin.headers,
        },
      );
      expect(got.body.policy.allowlists).toEqual(defaultAllowlistFor(serviceSpec('chatbot_a')!, fx.mock.url));
    });

    it('Model B: the agent calls <API URL>/sendMessage, the provider sees /bot<token>/sendMessage', async () => {
      const before = fx.mock.botCalls.length;
      const r = await execute(fx.base, agent.token, {
        model: 'B',
        connectionId: botConnectionId,
        method: 'POST',
        url: `${fx.mock.url}/sendMessage`,
        body: { chat_id: 42, text: 'hello' },
      });
      expect(r.status, r.text).toBe(200);
      expect(r.body.status).toBe(200);
      expect(r.text).not.toContain(fx.mock.botToken);
      const calls = fx.mock.botCalls.slice(before);
      expect(calls).toHaveLength(1);
      expect(calls[0]).toMatchObject({
        token: fx.mock.botToken,
        method: 'sendMessage',
        valid: true,
        httpMethod: 'POST',
      });
      expect(calls[0]!.body).toMatchObject({ chat_id: 42, text: 'hello' });

      // By service name: the singleton is found without its id.
      const bySvc = await execute(fx.base, agent.token, {
        service: 'chatbot_a',
        method: 'POST',
        url: `${fx.mock.url}/getMe`,
      } as never);
      expect(bySvc.status, bySvc.text).toBe(200);
      expect(JSON.stringify(bySvc.body.body)).toContain('vault_bot');
    });

    it('Model B: paths outside the catalog allowlist, or naming a token themselves, are refused unsent', async () => {
      const before = fx.mock.botCalls.length + fx.mock.apiRequests.length;
      for (const url of [
        `${fx.mock.url}/bot123:${'a'.repeat(30)}/sendMessage`,
        `${fx.mock.url}/deleteWebhook`,
      ]) {
        const r = await execute(fx.base, agent.token, {
          connectionId: botConnectionId,
          method: 'POST',
          url,
          body: {},
        });
        expect(r.status, `${url}: ${r.text}`).toBe(403);
      }
      expect(fx.mock.botCalls.length + fx.mock.apiRequests.length).toBe(before);
    });

    it('provider constraints: sendMessage to a chat outside allowedChatIds is 403, to an allowed one 200', async () => {
      const put = await putProviderConstraints(fx.admin, botPolicyId, {
        provider: 'chatbot_a',
        allowedChatIds: ['42'],
      });
      expect(put.status, put.text).toBe(200);
      // A constraint for another provider is refused.
      const wrong = await putProviderConstraints(fx.admin, botPolicyId, {
        provider: 'chatbot_b',
        allowedChannelIds: ['C1'],
        allowedUserIds: [],
      });
      expect(wrong.status, wrong.text).toBe(400);

      const before = fx.mock.botCalls.length;
      const denied = await sendMessage(agent.token, { chat_id: 99, text: 'elsewhere' });
      expect(denied.status, denied.text).toBe(403);
      expect(fx.mock.botCalls.length).toBe(before);

      const allowed = await sendMessage(agent.token, { chat_id: 42, text: 'here' });
      expect(allowed.status, allowed.text).toBe(200);
      expect(fx.mock.botCalls.slice(before).map((c) => c.body)).toEqual([{ chat_id: 42, text: 'here' }]);
      const rows = await pollAudit(
        fx.admin,
        { agentId: agent.id, action: 'execution_denied' },
        (e) => e.some((x) => x.auditId === (denied.body as unknown as { auditId: string }).auditId),
        10_000,
      );
      expect(rows.map((x) => x.auditId)).toContain((denied.body as unknown as { auditId: string }).auditId);
    });

    it('a message held for a reviewer shows its chat and text as chatBotMetadata, never the bot token', async () => {
      const held = await fx.newAgent();
      await createPolicy(fx.admin, held.id, botConnectionId, {
        allowedModels: ['B'],
        defaultMode: 'read_write',
        stepUpApproval: 'always',
      });
      const before = fx.mock.botCalls.length;
      const r = await sendMessage(held.token, { chat_id: 42, text: 'the release is out' });
      expect(r.status, r.text).toBe(202);
      expect(fx.mock.botCalls.length).toBe(before);
      const id = (r.body as unknown as { approvalRequestId: string }).approvalRequestId;
      const shown = await approvalDetails(fx.admin, id);
      expect(shown.chatBotMetadata).toEqual({ chatId: '42', text: 'the release is out' });
      expect(JSON.stringify(shown)).not.toContain(fx.mock.botToken);
    });

    it('Model A on a bot connection is 400, even where the policy allows A', async () => {
      const r = await vendToken(fx.base, agent.token, { connectionId: botConnectionId });
      expect(r.status, r.text).toBe(400);
      expect(r.text).not.toContain(fx.mock.botToken);
    });
  });

  describe('LLM API keys', () => {
    const CASES = [
      {
        service: 'llm_a-messages',
        provider: 'llm_a',
        check: '/v1/models',
        header: 'x-api-key',
        call: '/v1/messages',
      },
      {
        service: 'llm_b-chat',
        provider: 'llm_b',
        check: '/v1/models',
        header: 'authorization',
        call: '/v1/chat/completions',
      },
      {
        service: 'llm_c-generate',
        provider: 'llm_c',
        check: '/v1beta/models',
        header: 'x-goog-api-key',
        call: '/v1beta/models/mock-1:generateContent',
      },
      {
        service: 'llm_d-chat',
        provider: 'llm_d',
        check: '/v1/models',
        header: 'authorization',
        call: '/v1/chat/completions',
      },
    ] as const;
    const keys = new Map<string, { key: string; connectionId: string }>();

    it.each(CASES)('$service: a rejected key is 400 and nothing is stored', async ({ service, check }) => {
      const bad = `sk-bad-${randomBytes(12).toString('hex')}`;
      const before = fx.mock.keyChecks.length;
      const r = await apiKeyConnectionRequest(fx.admin, { service, apiKey: bad });
      expect(r.status, r.text).toBe(400);
      expect(r.text).not.toContain(bad);
      expect(fx.mock.keyChecks.slice(before).map((k) => [k.path, k.ok])).toEqual([[check, false]]);
      expect((await listConnectionRows(fx.admin)).filter((c) => c.service === service)).toEqual([]);
    });

    it.each(CASES)(
      '$service: a good key is checked in $header and stored (201)',
      async ({ service, provider, check, header }) => {
        const key = `sk-${provider}-${randomBytes(16).toString('hex')}`;
        fx.mock.apiKeys.add(key);
        const before = fx.mock.keyChecks.length;
        const r = await apiKeyConnectionRequest(fx.admin, { service, apiKey: key, label: `${provider} key` });
        expect(r.status, r.text).toBe(201);
        expect(r.body.connection).toMatchObject({
          provider,
          service,
          label: `${provider} key`,
          status: 'healthy',
        });
        expect(typeof r.body.auditId).toBe('string');
        expect(r.text).not.toContain(key);
        expect(fx.mock.keyChecks.slice(before)).toEqual([
          expect.objectContaining({ path: check, header, key, ok: true }),
        ]);
        keys.set(service, { key, connectionId: r.body.connection.id });
        const row = (await listConnectionRows(fx.admin)).find((c) => c.id === r.body.connection.id)!;
        expect(row).toMatchObject({ singleton: true, status: 'healthy' });
        expect(row.metadata.apiUrl).toBe(fx.mock.url);
      },
    );

    it.each(CASES)('$service: a second connection is 409', async ({ service }) => {
      const r = await apiKeyConnectionRequest(fx.admin, { service, apiKey: keys.get(service)!.key });
      expect(r.status, r.text).toBe(409);
    });

    it('an API key does not connect a service that is not an API-key service (400)', async () => {
      for (const service of ['suite_a-mail', 'chatbot_a', 'issues', 'nope']) {
        const r = await apiKeyConnectionRequest(fx.admin, { service, apiKey: 'sk-x' });
        expect(r.status, `${service}: ${r.text}`).toBe(400);
      }
    });

    it.each(CASES)(
      '$service Model B: the key goes in $header only, an agent-supplied key header is dropped',
      async ({ service, header, call }) => {
        const { key, connectionId } = keys.get(service)!;
        const me = await fx.newAgent();
        await createPolicy(fx.admin, me.id, connectionId, { allowedModels: ['A', 'B'], ...RW });
        const before = fx.mock.apiRequests.length;
        const r = await execute(fx.base, me.token, {
          connectionId,
          method: 'POST',
          url: `${fx.mock.url}${call}`,
          headers: { 'x-api-key': 'agent-own-key', 'x-goog-api-key': 'agent-own-key' },
          body: { model: 'mock-1', messages: [] },
        });
        expect(r.status, r.text).toBe(200);
        const sent = fx.mock.apiRequests.slice(before);
        expect(sent).toHaveLength(1);
        const h = sent[0]!.headers;
        expect(JSON.stringify(h)).not.toContain('agent-own-key');
        if (header === 'authorization') {
          expect(h.authorization).toBe(`Bearer ${key}`);
          expect(h['x-api-key']).toBeUndefined();
          expect(h['x-goog-api-key']).toBeUndefined();
        } else {
          expect(h[header]).toBe(key);
          expect(h.authorization).toBeUndefined();
        }
        expect(r.text).not.toContain(key);

        // Model A never hands out an API key.
        const a = await vendToken(fx.base, me.token, { connectionId });
        expect(a.status, a.text).toBe(400);
        expect(a.text).not.toContain(key);
      },
    );

    it('no key and no bot token in the logs or the audit export', async () => {
      const secrets = [...[...keys.values()].map((k) => k.key), fx.mock.botToken];
      const logs = fx.gw.logs.join('\n');
      const json = await auditExportText(fx.admin, 'json');
      const csv = await auditExportText(fx.admin, 'csv');
      for (const s of secrets) {
        expect(logs).not.toContain(s);
        expect(json).not.toContain(s);
        expect(csv).not.toContain(s);
      }
    });
  });

  it('unauthenticated creation is 401', async () => {
    const r = await http('POST', `${fx.base}/v1/connections/bot-token`, {
      json: { service: 'chatbot_a', botToken: fx.mock.botToken },
    });
    expect(r.status).toBe(401);
    expect(
      (
        await http('POST', `${fx.base}/v1/connections/api-key`, {
          json: { service: 'llm_a-messages', apiKey: 'k' },
        })
      ).status,
    ).toBe(401);
    expectStatus(r, 401);
  });
});
