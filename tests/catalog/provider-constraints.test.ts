/**
 * Provider constraints end to end through real OAuth connections: the team-chat bot
 * (`chatbot_b`: channels, DM channels exempt) and the enterprise suite's team chats (`suite_b`:
 * chat ids from the URL). Each refusal is 403, audited at the provider-constraints step, and the
 * provider sees no request. (`chatbot_a` chat ids: tests/connections/bot-and-api-key.test.ts.)
 * Also the enterprise suite's JSON batches, whose operations are judged one by one (ADR 0101).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  approvalDetails,
  createPolicy,
  execute,
  expectStatus,
  http,
  pollAudit,
  putAllowlists,
  putProviderConstraints,
} from '../support/api-client.js';
import { connectOAuth, startConnectionsGateway, type ConnectionsGateway } from '../support/mock-providers.js';

const SHAPES = ['embedded', 'services'] as const;
const RW = {
  allowedModels: ['B'] as ('A' | 'B')[],
  defaultMode: 'read_write',
  stepUpApproval: 'never',
} as const;

describe.each(SHAPES)('provider constraints through real connections (%s)', (shape) => {
  let fx: ConnectionsGateway;
  let agent: { id: string; token: string };

  beforeAll(async () => {
    fx = await startConnectionsGateway({ shape });
    agent = await fx.newAgent();
  }, 120_000);
  afterAll(async () => {
    await fx?.close();
  });

  async function bind(service: string, constraints: unknown) {
    const { connection } = await connectOAuth(fx, { service, scopes: [] });
    const { policy } = await createPolicy(fx.admin, agent.id, connection.id, RW);
    expectStatus(await putProviderConstraints(fx.admin, policy.id, constraints), 200);
    return connection.id;
  }

  /** Runs `call` and returns how many requests the provider's API saw meanwhile. */
  async function providerCalls<T>(call: () => Promise<T>): Promise<{ result: T; calls: number }> {
    const before = fx.mock.apiRequests.length;
    const result = await call();
    return { result, calls: fx.mock.apiRequests.length - before };
  }

  describe('chatbot_b (team-chat bot)', () => {
    beforeAll(async () => {
      await bind('chatbot_b', {
        provider: 'chatbot_b',
        allowedChannelIds: ['C0ALLOWED'],
        allowedUserIds: [],
      });
    });
    const post = (channel: string) =>
      execute(fx.base, agent.token, {
        service: 'chatbot_b',
        method: 'POST',
        url: `${fx.mock.url}/api/chat.postMessage`,
        body: { channel, text: 'status update' },
      });

    it('posts to an allowed channel (the singleton is addressed by service)', async () => {
      const { result, calls } = await providerCalls(() => post('C0ALLOWED'));
      expect(result.status, result.text).toBe(200);
      expect(calls).toBe(1);
    });

    it('refuses another channel with 403, audited, and the provider sees nothing', async () => {
      const { result, calls } = await providerCalls(() => post('C0OTHER'));
      expect(result.status, result.text).toBe(403);
      expect(calls).toBe(0);
      const auditId = (result.body as { auditId?: string }).auditId;
      const rows = await pollAudit(fx.admin, { action: 'execution_denied', agentId: agent.id }, (e) =>
        e.some((x) => x.auditId === auditId),
      );
      expect(rows.find((x) => x.auditId === auditId)?.metadata).toMatchObject({
        step: 'provider_constraints',
      });
    });

    it('a direct-message channel is exempt from the channel list', async () => {
      const { result, calls } = await providerCalls(() => post('D0DIRECT1'));
      expect(result.status, result.text).toBe(200);
      expect(calls).toBe(1);
    });

    it('a channel hidden in a comma list is still checked', async () => {
      const { result, calls } = await providerCalls(() => post('D0DIRECT1,C0OTHER'));
      expect(result.status, result.text).toBe(403);
      expect(calls).toBe(0);
    });
  });

  describe('suite_b (team chats)', () => {
    let connectionId: string;
    beforeAll(async () => {
      connectionId = await bind('suite_b-teams', {
        provider: 'suite_b',
        allowedTenantIds: [],
        allowedChatIds: ['19:allowed@thread.v2'],
        allowedChannelIds: [],
      });
    });
    const send = (chatId: string) =>
      execute(fx.base, agent.token, {
        connectionId,
        method: 'POST',
        url: `${fx.mock.url}/v1.0/chats/${encodeURIComponent(chatId)}/messages`,
        body: { body: { content: 'hello' } },
      });

    it('sends to an allowed chat', async () => {
      const { result, calls } = await providerCalls(() => send('19:allowed@thread.v2'));
      expect(result.status, result.text).toBe(200);
      expect(calls).toBe(1);
    });

    it('refuses another chat taken from the URL with 403; the provider sees nothing', async () => {
      const { result, calls } = await providerCalls(() => send('19:other@thread.v2'));
      expect(result.status, result.text).toBe(403);
      expect(calls).toBe(0);
    });

    it('refuses a chat id named in the body of an allowed path', async () => {
      const { result, calls } = await providerCalls(() =>
        execute(fx.base, agent.token, {
          connectionId,
          method: 'POST',
          url: `${fx.mock.url}/v1.0/chats/${encodeURIComponent('19:allowed@thread.v2')}/messages`,
          body: { body: { content: 'x' }, chatId: '19:other@thread.v2' },
        }),
      );
      expect(result.status, result.text).toBe(403);
      expect(calls).toBe(0);
    });

    describe('a $batch is judged operation by operation (ADR 0101)', () => {
      let batchConnection: string;
      beforeAll(async () => {
        const { connection } = await connectOAuth(fx, { service: 'suite_b-mail', scopes: [] });
        const { policy } = await createPolicy(fx.admin, agent.id, connection.id, RW);
        expectStatus(
          await putAllowlists(fx.admin, policy.id, [
            { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/v1.0/$batch'] },
            { baseUrl: fx.mock.url, methods: ['GET', 'DELETE'], pathPatterns: ['/v1.0/me/messages/*'] },
            { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/v1.0/me/sendMail'] },
          ]),
          200,
        );
        const rules = {
          request: [
            { label: 'mail is never deleted', match: { methods: ['DELETE'] }, action: 'deny' },
            {
              label: 'sending needs a human',
              match: { methods: ['POST'], urlPattern: '/me/sendMail$' },
              action: 'require_approval',
            },
          ],
          response: [],
        };
        expectStatus(
          await http('PUT', `${fx.base}/v1/policies/${policy.id}/rules`, {
            headers: fx.admin.headers,
            json: { rules },
          }),
          200,
        );
        batchConnection = connection.id;
      });
      const batch = (requests: unknown[]) =>
        execute(fx.base, agent.token, {
          connectionId: batchConnection,
          method: 'POST',
          url: `${fx.mock.url}/v1.0/$batch`,
          body: { requests },
        });

      it('a batch of allowed reads reaches the provider as sent', async () => {
        const requests = [{ id: '1', method: 'GET', url: '/me/messages/m1' }];
        const { result, calls } = await providerCalls(() => batch(requests));
        expect(result.status, result.text).toBe(200);
        expect(calls).toBe(1);
        expect(JSON.parse(fx.mock.apiRequests.at(-1)!.body)).toEqual({ requests });
      });

      it('regression: a denied DELETE inside an allowlisted batch is 403, audited with its operation, and never sent', async () => {
        const { result, calls } = await providerCalls(() =>
          batch([
            { id: '1', method: 'GET', url: '/me/messages/m1' },
            { id: 'del', method: 'DELETE', url: '/me/messages/m1' },
          ]),
        );
        expect(result.status, result.text).toBe(403);
        expect(result.text).toContain('batch request del: denied by a request rule');
        expect(calls).toBe(0);
        const auditId = (result.body as { auditId?: string }).auditId;
        const rows = await pollAudit(fx.admin, { action: 'execution_denied', agentId: agent.id }, (e) =>
          e.some((x) => x.auditId === auditId),
        );
        expect(rows.find((x) => x.auditId === auditId)?.metadata).toMatchObject({
          step: 'request_rules',
          code: 'rule_denied',
          batchOperation: 'del',
          rule: { label: 'mail is never deleted' },
        });
      });

      it('a sendMail inside a batch is held for a reviewer, who sees its recipients; nothing is sent meanwhile', async () => {
        const send = {
          id: 'mail',
          method: 'POST',
          url: '/me/sendMail',
          body: {
            message: { subject: 'Offer', toRecipients: [{ emailAddress: { address: 'x@example.com' } }] },
          },
        };
        const { result, calls } = await providerCalls(() =>
          batch([{ id: '1', method: 'GET', url: '/me/messages/m1' }, send]),
        );
        expect(result.status, result.text).toBe(202);
        expect(calls).toBe(0);
        const id = (result.body as unknown as { approvalRequestId: string }).approvalRequestId;
        const details = await approvalDetails(fx.admin, id);
        expect(details.emailMetadata).toEqual({ to: ['x@example.com'], cc: [], bcc: [], subject: 'Offer' });
      });

      it('regression: an operation outside the allowlist, or an absolute URL to another host, is 403 and never sent', async () => {
        for (const op of [
          { id: '1', method: 'PATCH', url: '/me/mailboxSettings', body: {} },
          { id: '1', method: 'GET', url: 'https://attacker.example/v1.0/me/messages/m1' },
        ]) {
          const { result, calls } = await providerCalls(() => batch([op]));
          expect(result.status, result.text).toBe(403);
          expect(calls).toBe(0);
        }
      });
    });

    it('constraints naming another provider are refused (400)', async () => {
      const { connection } = await connectOAuth(fx, { service: 'suite_b-mail', scopes: [] });
      const { policy } = await createPolicy(fx.admin, agent.id, connection.id, RW);
      const r = await http('PUT', `${fx.base}/v1/policies/${policy.id}/provider-constraints`, {
        headers: fx.admin.headers,
        json: { providerConstraints: { provider: 'chatbot_b', allowedChannelIds: [], allowedUserIds: [] } },
      });
      expect(r.status, r.text).toBe(400);
    });
  });
});
