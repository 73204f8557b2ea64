/**
 * Reviewers hear about every approval, in the production shape: two control-plane replicas, a
 * data plane, the audit writer and the notifier as processes over the run's PostgreSQL and NATS
 * JetStream, with local HTTPS stand-ins for the bot-chat and push providers.
 *
 * One journey, in order: the bot-chat (`chatbot_a`) and team-chat (`chatbot_b`, connected over
 * OAuth) channels are set up (detect chats, test message → verified); an agent call that needs
 * approval reaches the SSE stream of the *other* replica, both chats (two buttons each) and the
 * push service; the Approve button decides it, both chat messages are edited, the agent's replay
 * runs and no button can be used twice. Then the failure posture: a chat outage is
 * retried without holding back in-app; a disabled channel gets nothing; the notifier killed
 * mid-batch delivers everything exactly once per channel after its restart.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createIssueTrackerConnection,
  createPolicy,
  enrolAgent,
  execute,
  expectStatus,
  http,
  pollAudit,
  putAllowlists,
  signUp,
  type Admin,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { startMockNotify, type MockNotify } from '../support/mock-notify.js';
import {
  connectOAuth,
  providerEnv,
  startMockProviders,
  type MockProviders,
} from '../support/mock-providers.js';
import { ProcessGroup, freePort, type ServiceProcess } from '../support/processes.js';
import { ownDatabase, realServices } from '../support/services.js';

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();
if (unavailable) console.warn(`notifications e2e skipped: ${realServices.missing()}`);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(probe: () => T | undefined | false, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Polls an async check until it stops throwing. */
async function eventually<T>(check: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

interface SseEvent {
  event: string;
  data: string;
  at: number;
}

/** A minimal EventSource over fetch: collects events and comments until closed. */
async function openStream(url: string) {
  const controller = new AbortController();
  const res = await fetch(url, { signal: controller.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const done = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += decoder.decode(chunk as Uint8Array, { stream: true });
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) !== -1) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const e: SseEvent = { event: 'message', data: '', at: Date.now() };
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('event: ')) e.event = line.slice(7);
            else if (line.startsWith('data: ')) e.data += line.slice(6);
          }
          if (e.data || e.event !== 'message') events.push(e);
        }
      }
    } catch {
      // aborted
    }
  })();
  return {
    res,
    events,
    comments,
    notifications: () => events.filter((e) => e.event === 'notification').map((e) => JSON.parse(e.data)),
    close: async () => {
      controller.abort();
      await done;
    },
  };
}

describe.skipIf(unavailable)('notifications (split shape)', () => {
  const group = new ProcessGroup();
  let fx: E2eFixtures;
  let notify: MockNotify;
  let oauth: MockProviders;
  let cp1: ServiceProcess;
  let cp2: ServiceProcess;
  let dp: ServiceProcess;
  let notifier: ServiceProcess;
  let admin: Admin;
  let jwt: string;
  let workspaceId: string;
  let pool: pg.Pool;
  let ownDb: Awaited<ReturnType<typeof ownDatabase>> | undefined;
  const db = async <T>(text: string, values: unknown[]) => (await pool.query(text, values)).rows as T[];
  let agentToken: string;
  let channelId: string;
  let teamChannelId: string;
  let teamToken: string;
  const teamChannel = 'C0REVIEW';
  const botToken = `4242:${randomBytes(12).toString('hex')}`;
  const chatId = '-1001';
  // A write: with step-up `always`, every write waits for a reviewer.
  let call: { connectionId: string; method: string; url: string; body: unknown };

  beforeAll(async () => {
    [fx, ownDb] = await Promise.all([startE2eFixtures(), ownDatabase('ntf')]);
    notify = await startMockNotify({ key: fx.pki.key, cert: fx.pki.cert });
    // The team chat is connected over OAuth against the mock authorization server; its Web API
    // (where the notifier posts) is the notify mock.
    oauth = await startMockProviders({ pki: fx.pki });
    const [p1, p2] = await Promise.all([freePort(), freePort()]);
    const publicBaseUrl = `http://127.0.0.1:${p1}`;
    const bus = {
      ...fx.commonEnv,
      LOG_LEVEL: 'warn',
      PUBLIC_BASE_URL: publicBaseUrl,
      NATS_URL: realServices.natsUrl(),
      VLT_NATS_PREFIX: `${realServices.busPrefix()}_ntf`,
      VLT_CHATBOT_A_API_URL: notify.baseUrl,
      VLT_CHATBOT_B_API_URL: notify.baseUrl,
    };
    const withDb = { ...bus, DATABASE_URL: ownDb.url };
    const cpEnv = {
      ...withDb,
      ...providerEnv(oauth, ['chatbot_b']),
      VLT_CHATBOT_B_API_URL: notify.baseUrl,
      VLT_MASTER_KEY: fx.masterKey,
    };
    cp1 = await group.start('control-plane', { label: 'control-plane-1', port: p1, env: cpEnv });
    [cp2, dp, , notifier] = await Promise.all([
      group.start('control-plane', { label: 'control-plane-2', port: p2, env: cpEnv }),
      group.start('data-plane', { env: bus }),
      group.start('audit', { env: withDb }),
      // A short ack wait: the event in flight when the notifier is killed comes back in seconds.
      group.start('notifier', {
        env: { ...withDb, VLT_PUSH_API_URL: notify.pushUrl, VLT_NOTIFIER_ACK_WAIT_MS: '3000' },
      }),
    ]);

    const { user } = await signUp(
      cp1.baseUrl,
      `ntf-${randomBytes(4).toString('hex')}@e2e.test`,
      'correct horse battery',
    );
    jwt = (await apiJwt(cp1.baseUrl, user.session)).token;
    workspaceId = user.workspaceId;
    pool = new pg.Pool({ connectionString: ownDb.url, max: 2 });
    admin = bearerAdmin(cp1.baseUrl, jwt);

    const tracker = await createIssueTrackerConnection(admin, {
      siteUrl: fx.mock.baseUrl,
      ...fx.mockAccount,
    });
    const enrolled = await enrolAgent(admin, publicBaseUrl, `reviewed-${randomBytes(3).toString('hex')}`);
    agentToken = enrolled.token;
    const { policy } = await createPolicy(admin, enrolled.agent.id, tracker.connection.id, {
      allowedModels: ['B'],
      defaultMode: 'read_write',
      stepUpApproval: 'always',
    });
    expectStatus(
      await putAllowlists(admin, policy.id, [
        { baseUrl: fx.mock.baseUrl, methods: ['GET', 'POST'], pathPatterns: ['/rest/api/3/*'] },
      ]),
      200,
    );
    call = {
      connectionId: tracker.connection.id,
      method: 'POST',
      url: `${fx.mock.baseUrl}/rest/api/3/issue`,
      body: { fields: { project: { key: 'VLT' }, summary: 'from an agent', issuetype: { name: 'Task' } } },
    };
  }, 120_000);

  afterAll(async () => {
    await group.stopAll();
    await pool?.end();
    await notify?.close();
    await oauth?.close();
    await fx?.dispose();
    await ownDb?.drop();
  }, 60_000);

  /** An agent call that needs approval: its approval id. */
  async function askForApproval(): Promise<string> {
    const r = await execute(dp.baseUrl, agentToken, call);
    expect(r.status, r.text).toBe(202);
    return (r.body as unknown as { approvalRequestId: string }).approvalRequestId;
  }
  const noticesFor = (approvalId: string) =>
    notify.sent('chat_a', 'sendMessage').filter((c) => String(c.body?.text ?? '').includes(approvalId));
  const teamNoticesFor = (approvalId: string) =>
    notify.sent('chat_b', 'chat.postMessage').filter((c) => String(c.body?.text ?? '').includes(approvalId));
  /** The URL buttons of a block-kit message. */
  const teamButtons = (body: {
    blocks: { type: string; elements?: { text: { text: string }; url: string }[] }[];
  }) =>
    body.blocks
      .filter((b) => b.type === 'actions')
      .flatMap((b) => b.elements ?? [])
      .map((e) => ({ text: e.text.text, url: e.url }));

  it('sets up a bot-chat channel: detect chats de-duplicates, the test message verifies it', async () => {
    const bot = expectStatus(
      await http<{ connection: { id: string } }>('POST', `${cp1.baseUrl}/v1/connections/bot-token`, {
        headers: admin.headers,
        json: { service: 'chatbot_a', botToken },
      }),
      201,
    ).body.connection;
    notify.updates = [
      { update_id: 1, message: { chat: { id: -1001, type: 'supergroup', title: 'Reviewers' } } },
      { update_id: 2, message: { chat: { id: -1001, type: 'supergroup', title: 'Reviewers' } } },
      {
        update_id: 3,
        my_chat_member: { chat: { id: 55, type: 'private', first_name: 'Ada', username: 'ada' } },
      },
    ];
    const detected = expectStatus(
      await http<{ chats: unknown[] }>(
        'POST',
        `${cp1.baseUrl}/v1/notification-channels/chatbot_a/detect-chats`,
        {
          headers: admin.headers,
          json: { connectionId: bot.id },
        },
      ),
      200,
    ).body;
    expect(detected.chats).toEqual([
      { chatId: '-1001', name: 'Reviewers', type: 'supergroup', username: null },
      { chatId: '55', name: 'Ada', type: 'private', username: 'ada' },
    ]);

    const created = expectStatus(
      await http<{ channel: { id: string; verificationStatus: string } }>(
        'POST',
        `${cp1.baseUrl}/v1/notification-channels`,
        {
          headers: admin.headers,
          json: { channelType: 'chatbot_a', connectionId: bot.id, config: { chatId } },
        },
      ),
      201,
    ).body.channel;
    expect(created.verificationStatus).toBe('pending');
    channelId = created.id;

    const testAnswer = expectStatus(
      await http<{ channel: { verificationStatus: string }; auditId?: string }>(
        'POST',
        `${cp1.baseUrl}/v1/notification-channels/${channelId}/test`,
        { headers: admin.headers },
      ),
      200,
    ).body;
    expect(testAnswer.channel.verificationStatus).toBe('verified');
    // Its first verification is recorded, and the answer names that entry.
    const verified = await pollAudit(admin, { action: 'notification_channel_verified' }, (e) =>
      e.some((x) => x.auditId === testAnswer.auditId),
    );
    expect(verified.find((x) => x.auditId === testAnswer.auditId)!.metadata.channelId).toBe(channelId);
    const test = notify.sent('chat_a', 'sendMessage');
    expect(test).toHaveLength(1);
    expect(test[0]!.token).toBe(botToken);
    expect(test[0]!.body.chat_id).toBe(chatId);

    // The team chat: an OAuth connection, one channel, verified by its test message.
    const team = await connectOAuth({ admin, mock: oauth }, { service: 'chatbot_b', scopes: [] });
    teamToken = oauth.issued.at(-1)!.accessToken;
    const teamCreated = expectStatus(
      await http<{ channel: { id: string; verificationStatus: string } }>(
        'POST',
        `${cp1.baseUrl}/v1/notification-channels`,
        {
          headers: admin.headers,
          json: {
            channelType: 'chatbot_b',
            connectionId: team.connection.id,
            config: { channelId: teamChannel },
          },
        },
      ),
      201,
    ).body.channel;
    teamChannelId = teamCreated.id;
    expect(
      expectStatus(
        await http<{ channel: { verificationStatus: string } }>(
          'POST',
          `${cp1.baseUrl}/v1/notification-channels/${teamChannelId}/test`,
          { headers: admin.headers },
        ),
        200,
      ).body.channel.verificationStatus,
    ).toBe('verified');
    const teamTest = notify.sent('chat_b', 'chat.postMessage');
    expect(teamTest).toHaveLength(1);
    expect(teamTest[0]!.token).toBe(teamToken);
    expect(teamTest[0]!.body.channel).toBe(teamChannel);

    // Two devices; one the push service no longer knows.
    for (const token of ['ExponentPushToken[phone]', 'ExponentPushToken[gone]']) {
      expectStatus(
        await http('POST', `${cp1.baseUrl}/v1/notifications/push-subscriptions`, {
          headers: admin.headers,
          json: { token, platform: 'ios', deviceName: 'test phone' },
        }),
        201,
      );
    }
    notify.unregistered.add('ExponentPushToken[gone]');

    // The query-string token is for the stream alone (EventSource cannot send headers).
    const viaQuery = await http(
      'GET',
      `${cp1.baseUrl}/v1/notifications?access_token=${encodeURIComponent(jwt)}`,
    );
    expect(viaQuery.status).toBe(401);
    // A made-up button is not found, and says so as a page.
    const forged = await fetch(`${cp1.baseUrl}/api/quick-action/${crypto.randomUUID()}.${'A'.repeat(43)}`, {
      method: 'POST',
    });
    expect(forged.status).toBe(404);
    expect(await forged.text()).toContain('Link not valid');
  });

  it('an approval reaches the other replica’s SSE stream, the chat with two buttons, and push; the button decides it once', async () => {
    const stream = await openStream(
      `${cp2.baseUrl}/v1/notifications/stream?access_token=${encodeURIComponent(jwt)}`,
    );
    try {
      expect(stream.res.status).toBe(200);
      expect(stream.res.headers.get('content-type')).toBe('text/event-stream');
      expect(stream.res.headers.get('cache-control')).toBe('no-cache');
      expect(stream.res.headers.get('x-accel-buffering')).toBe('no');
      await until(() => stream.events.find((e) => e.event === 'connected'), 'event: connected');

      const asked = Date.now();
      const approvalId = await askForApproval();
      const seen = await until(
        () => stream.notifications().find((n) => n.metadata?.approvalRequestId === approvalId),
        'the approval notification on the second replica',
      );
      const latencyMs = stream.events.find((e) => e.data.includes(approvalId))!.at - asked;
      console.log(`approval → SSE on the other replica: ${latencyMs} ms`);
      expect(seen).toMatchObject({ type: 'permission_request', title: 'Approval needed', read: false });
      // Method, canonical URL, agent, connection: never a secret.
      expect(seen.body).toContain('POST');
      expect(seen.body).toContain('/rest/api/3/issue');
      expect(seen.body).not.toContain('from an agent'); // never the request body
      expect(JSON.stringify(seen)).not.toContain(fx.mockAccount.apiToken);

      const [notice] = await until(() => {
        const n = noticesFor(approvalId);
        return n.length ? n : false;
      }, 'the chat notice');
      expect(notice!.body.chat_id).toBe(chatId);
      const buttons = notice!.body.reply_markup.inline_keyboard.flat() as { text: string; url: string }[];
      expect(buttons.map((b) => b.text)).toEqual(['Approve', 'Deny']);
      expect(buttons[0]!.url).toMatch(new RegExp(`^${cp1.baseUrl}/api/quick-action/`));
      expect(notice!.body.text).not.toContain(fx.mockAccount.apiToken);

      // The team chat: a block-kit message with its own pair of buttons.
      const [teamNotice] = await until(() => {
        const n = teamNoticesFor(approvalId);
        return n.length ? n : false;
      }, 'the team-chat notice');
      expect(teamNotice!.body.channel).toBe(teamChannel);
      expect(teamNotice!.token).toBe(teamToken);
      expect(teamNotice!.body.blocks[0]).toMatchObject({ type: 'section', text: { type: 'mrkdwn' } });
      const teamLinks = teamButtons(teamNotice!.body);
      expect(teamLinks.map((b) => b.text)).toEqual(['Approve', 'Deny']);
      expect(teamLinks[0]!.url).toMatch(new RegExp(`^${cp1.baseUrl}/api/quick-action/`));
      expect(teamLinks[0]!.url).not.toBe(buttons[0]!.url);
      expect(JSON.stringify(teamNotice!.body)).not.toContain('from an agent');
      expect(JSON.stringify(teamNotice!.body)).not.toContain(fx.mockAccount.apiToken);

      const [push] = await until(() => {
        const p = notify.sent('push');
        return p.length ? p : false;
      }, 'the push');
      expect(push!.body).toHaveLength(2);
      expect(push!.body.find((m: { to: string }) => m.to === 'ExponentPushToken[phone]')).toMatchObject({
        to: 'ExponentPushToken[phone]',
        priority: 'high',
        channelId: 'approvals',
        sound: 'default',
        data: { type: 'approval_request', url: `${cp1.baseUrl}/approvals/${approvalId}` },
      });
      // DeviceNotRegistered removed that subscription.
      await eventually(async () => {
        const subs = await http<{ subscriptions: { expoPushToken: string }[] }>(
          'GET',
          `${cp1.baseUrl}/v1/notifications/push-subscriptions`,
          { headers: admin.headers },
        );
        expect(subs.body.subscriptions.map((x) => x.expoPushToken)).toEqual(['ExponentPushToken[phone]']);
      });

      // A link preview (GET) only shows the page; nothing is decided.
      const approveUrl = buttons[0]!.url;
      const page = await fetch(approveUrl);
      expect(page.status).toBe(200);
      expect(page.headers.get('referrer-policy')).toBe('no-referrer');
      expect(await page.text()).toContain('Approve this request?');
      const still = await http<{ approval: { status: string } }>(
        'GET',
        `${cp1.baseUrl}/v1/approvals/${approvalId}`,
        {
          headers: admin.headers,
        },
      );
      expect(still.body.approval.status).toBe('pending');

      const decided = await fetch(approveUrl, { method: 'POST' });
      expect(decided.status).toBe(200);
      expect(await decided.text()).toContain('Approved');
      const after = await http<{ approval: { status: string } }>(
        'GET',
        `${cp1.baseUrl}/v1/approvals/${approvalId}`,
        {
          headers: admin.headers,
        },
      );
      expect(after.body.approval.status).toBe('approved');

      // The chat message is edited to show the outcome, and the stream hears of it too.
      const edit = await until(() => notify.sent('chat_a', 'editMessageText')[0], 'the edited chat message');
      expect(edit.body.chat_id).toBe(chatId);
      expect(edit.body.text).toContain('approved');
      expect(edit.body.reply_markup).toEqual({ inline_keyboard: [] });
      // The team-chat message too, although the decision came from the other chat.
      const teamEdit = await until(
        () => notify.sent('chat_b', 'chat.update')[0],
        'the updated team-chat message',
      );
      expect(teamEdit.body).toMatchObject({ channel: teamChannel });
      expect(String(teamEdit.body.ts)).toMatch(/^\d+\.\d+$/);
      expect(teamEdit.body.text).toContain('approved');
      expect(teamButtons(teamEdit.body)).toEqual([]);
      await until(
        () =>
          stream
            .notifications()
            .find((n) => n.type === 'approval_resolved' && n.metadata?.approvalRequestId === approvalId),
        'approval_resolved on the stream',
      );

      // The agent's replay runs once.
      const replay = await execute(dp.baseUrl, agentToken, { ...call, approvalId } as never);
      expect(replay.status, replay.text).toBe(200);
      expect((replay.body as unknown as { status: number }).status).toBe(201);

      // The button is spent: a replay is refused with a clear page, and nothing changes.
      const again = await fetch(approveUrl, { method: 'POST' });
      expect(again.status).toBe(409);
      expect(await again.text()).toContain('already used');
      const deny = await fetch(buttons[1]!.url, { method: 'POST' });
      expect(deny.status).toBe(409);
      // The team chat's buttons were for the same approval: decided is decided.
      const teamDeny = await fetch(teamLinks[1]!.url, { method: 'POST' });
      expect(teamDeny.status).toBe(409);
      expect(
        (
          await http<{ approval: { status: string } }>('GET', `${cp1.baseUrl}/v1/approvals/${approvalId}`, {
            headers: admin.headers,
          })
        ).body.approval.status,
      ).toBe('consumed'); // approved, then used by the replay

      // The audit row names the channel the decision came from.
      const audit = await http<{
        events: { action: string; actor: string; metadata: Record<string, unknown> }[];
      }>('GET', `${cp1.baseUrl}/v1/audit?action=approval_approved`, { headers: admin.headers });
      const row = audit.body.events.find((e) => e.metadata.approvalRequestId === approvalId);
      expect(row).toMatchObject({
        actor: `quick-action:${channelId}`,
        metadata: { via: 'quick_action', channelId },
      });
    } finally {
      await stream.close();
    }
  }, 60_000);

  it('a chat outage is retried until it recovers, without holding back the in-app notification', async () => {
    notify.failWith(500, (c) => c.api === 'chat_a' && c.method === 'sendMessage');
    const approvalId = await askForApproval();
    // In-app and push arrive while the chat provider is down.
    await eventually(async () => {
      const list = await http<{ notifications: { metadata: Record<string, unknown> | null }[] }>(
        'GET',
        `${cp1.baseUrl}/v1/notifications`,
        { headers: admin.headers },
      );
      expect(list.body.notifications.some((n) => n.metadata?.approvalRequestId === approvalId)).toBe(true);
    });
    await until(
      () => notify.sent('push').find((p) => JSON.stringify(p.body).includes(approvalId)),
      'push during the chat outage',
    );
    // The outage shows on the channel.
    await eventually(async () => {
      const ch = await http<{
        channels: { id: string; lastDeliveryStatus: string | null; lastDeliveryError: string | null }[];
      }>('GET', `${cp1.baseUrl}/v1/notification-channels`, { headers: admin.headers });
      const failing = ch.body.channels.find((c) => c.id === channelId)!;
      expect(failing).toMatchObject({ lastDeliveryStatus: 'failing' });
      expect(failing.lastDeliveryError).toContain('500');
      expect(failing.lastDeliveryError).not.toContain(botToken);
      // The other chat is not held back by this one's outage.
      expect(ch.body.channels.find((c) => c.id === teamChannelId)).toMatchObject({
        lastDeliveryStatus: 'delivered',
      });
    });
    expect(noticesFor(approvalId)).toHaveLength(0);
    expect(teamNoticesFor(approvalId)).toHaveLength(1);
    await sleep(1_500);
    notify.failWith(null);
    await until(() => noticesFor(approvalId).length === 1 || false, 'the notice after the outage', 20_000);
    await sleep(500);
    expect(noticesFor(approvalId)).toHaveLength(1);
  }, 60_000);

  it('a disabled channel gets nothing', async () => {
    expectStatus(
      await http('PATCH', `${cp1.baseUrl}/v1/notification-channels/${channelId}/enabled`, {
        headers: admin.headers,
        json: { enabled: false },
      }),
      200,
    );
    const approvalId = await askForApproval();
    await until(() => notify.sent('push').find((p) => JSON.stringify(p.body).includes(approvalId)), 'push');
    await sleep(300);
    expect(noticesFor(approvalId)).toHaveLength(0);
    expectStatus(
      await http('PATCH', `${cp1.baseUrl}/v1/notification-channels/${channelId}/enabled`, {
        headers: admin.headers,
        json: { enabled: true },
      }),
      200,
    );
  }, 30_000);

  it('a disabled agent is a security alert: in-app, chat with a link to the activity log, and push', async () => {
    const spare = await enrolAgent(admin, cp1.baseUrl, `spare-${randomBytes(3).toString('hex')}`);
    expectStatus(
      await http('POST', `${cp1.baseUrl}/v1/agents/${spare.agent.id}/disable`, { headers: admin.headers }),
      200,
    );
    const push = await until(
      () => notify.sent('push').find((p) => p.body[0]?.data?.type === 'security_alert'),
      'the security alert push',
    );
    expect(push.body[0]).toMatchObject({ title: 'Agent disabled', data: { url: `${cp1.baseUrl}/activity` } });
    const chat = await until(
      () =>
        notify.sent('chat_a', 'sendMessage').find((c) => String(c.body.text).startsWith('Agent disabled')),
      'the security alert in the chat',
    );
    expect(chat.body.reply_markup.inline_keyboard.flat()).toEqual([
      { text: 'Open activity log', url: `${cp1.baseUrl}/activity` },
    ]);
    const team = await until(
      () =>
        notify
          .sent('chat_b', 'chat.postMessage')
          .find((c) => String(c.body.text).startsWith('Agent disabled')),
      'the security alert in the team chat',
    );
    expect(teamButtons(team.body)).toEqual([{ text: 'Open activity log', url: `${cp1.baseUrl}/activity` }]);
    await eventually(async () => {
      const list = await http<{ notifications: { type: string; title: string }[] }>(
        'GET',
        `${cp1.baseUrl}/v1/notifications?unread=true`,
        { headers: admin.headers },
      );
      expect(list.body.notifications.map((n) => n.type)).toContain('security_alert');
    });
  }, 30_000);

  it('the notifier killed mid-batch delivers every notification exactly once per channel after its restart', async () => {
    const before = notify.calls.length;
    const since = new Date();
    // After four deliveries the provider stops answering: the rest of the batch is in flight
    // (sent, not yet processed by the provider) when the notifier dies.
    notify.hold(() => notify.calls.length - before >= 4);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await askForApproval());
    await until(() => notify.held > 0 || false, 'deliveries in flight', 15_000);
    // Kill once the delivered ones are on record: what the provider accepted counts as sent.
    // (A crash in the instant between the provider's answer and that record would send twice:
    // these providers take no idempotency key; ADR 0055.)
    await eventually(async () => {
      const [row] = await db<{ n: number }>(
        `SELECT count(*)::int AS n FROM notification_deliveries WHERE workspace_id = $1 AND status = 'sent' AND created_at >= $2`,
        [workspaceId, since],
      );
      expect(row!.n).toBe(notify.calls.length - before);
    });
    await notifier.kill();
    // The provider sees the dead notifier's connections close before it resumes: what was in
    // flight was never processed (answering a dead client would count as delivered, for real).
    await until(() => notify.held === 0 || false, 'the in-flight requests to be dropped', 10_000);
    notify.release();
    await notifier.restart();
    for (const id of ids) {
      await until(() => noticesFor(id).length > 0 || false, `the notice of ${id}`, 30_000);
      await until(() => teamNoticesFor(id).length > 0 || false, `the team notice of ${id}`, 30_000);
      await until(
        () => notify.sent('push').some((p) => JSON.stringify(p.body).includes(id)) || false,
        `the push of ${id}`,
        30_000,
      );
    }
    await sleep(1_000);
    const counts = ids.map((id) => ({
      chat: noticesFor(id).length,
      team: teamNoticesFor(id).length,
      push: notify.sent('push').filter((p) => JSON.stringify(p.body).includes(id)).length,
    }));
    console.log(
      `after the notifier restart: ${JSON.stringify(counts)} (${notify.calls.length - before} provider calls)`,
    );
    expect(counts).toEqual(ids.map(() => ({ chat: 1, team: 1, push: 1 })));
    // In-app: one row per approval for the one member, however often the events came.
    const list = await http<{ notifications: { metadata: Record<string, unknown> | null }[] }>(
      'GET',
      `${cp1.baseUrl}/v1/notifications?limit=200`,
      { headers: admin.headers },
    );
    for (const id of ids) {
      expect(
        list.body.notifications.filter(
          (n) => n.metadata?.approvalRequestId === id && n.metadata && 'agentId' in n.metadata,
        ),
      ).toHaveLength(1);
    }
  }, 90_000);
});
