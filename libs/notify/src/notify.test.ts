import { describe, expect, it } from 'vitest';
import { chatA, chatB, DeliveryError, sendPush, type Transport } from './index.js';

/** A provider that answers from a script and records what it was sent. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON as the provider or client sent it
function scripted(answer: (url: string, body: any) => { status: number; json?: unknown; text?: string }) {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON as the provider or client sent it
  const seen: { url: string; body: any; headers: Record<string, string> }[] = [];
  const transport: Transport = async (req) => {
    const body = JSON.parse(req.body);
    seen.push({ url: req.url, body, headers: req.headers });
    const a = answer(req.url, body);
    return { status: a.status, text: a.text ?? JSON.stringify(a.json) };
  };
  return { seen, transport };
}

const token = '123456:SECRET-bot-token';

describe('bot chat (chatbot_a)', () => {
  it('sends URL buttons with link previews off and returns the message reference', async () => {
    const p = scripted(() => ({ status: 200, json: { ok: true, result: { message_id: 42 } } }));
    const ref = await chatA.sendMessage(
      { apiUrl: 'https://chat.test', token, transport: p.transport },
      {
        chatId: '-1',
        text: 'hi',
        buttons: [
          { text: 'Approve', url: 'https://v/a' },
          { text: 'Deny', url: 'https://v/d' },
        ],
      },
    );
    expect(ref).toEqual({ chatId: '-1', messageId: 42 });
    expect(p.seen[0]!.url).toBe(`https://chat.test/bot${token}/sendMessage`);
    expect(p.seen[0]!.body).toMatchObject({
      chat_id: '-1',
      link_preview_options: { is_disabled: true },
      reply_markup: {
        inline_keyboard: [
          [
            { text: 'Approve', url: 'https://v/a' },
            { text: 'Deny', url: 'https://v/d' },
          ],
        ],
      },
    });
  });

  it('errors say what failed and whether to retry, never the token', async () => {
    const cases: [number, unknown, boolean][] = [
      [500, { ok: false }, true],
      [429, { ok: false }, true],
      [400, { ok: false, description: 'Bad Request: chat not found' }, false],
      [401, { ok: false, description: `Unauthorized ${token}` }, false],
    ];
    for (const [status, json, retryable] of cases) {
      const p = scripted(() => ({ status, json }));
      const err = await chatA
        .sendMessage(
          { apiUrl: 'https://chat.test', token, transport: p.transport },
          { chatId: '1', text: 'x' },
        )
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DeliveryError);
      expect((err as DeliveryError).retryable).toBe(retryable);
      expect((err as Error).message).not.toContain('SECRET');
    }
    const down: Transport = async (req) => {
      throw new Error(`connect ECONNREFUSED ${req.url}`);
    };
    const err = (await chatA
      .sendMessage({ apiUrl: 'https://chat.test', token, transport: down }, { chatId: '1', text: 'x' })
      .catch((e: unknown) => e)) as DeliveryError;
    expect(err.retryable).toBe(true);
    expect(err.message).not.toContain('SECRET');
  });

  it('detectChats returns each chat once, with a readable name, whatever the update kind', async () => {
    const chat = { id: -100, type: 'supergroup', title: 'Ops' };
    const p = scripted(() => ({
      status: 200,
      json: {
        ok: true,
        result: [
          { update_id: 1, message: { chat } },
          { update_id: 2, edited_message: { chat } },
          { update_id: 3, channel_post: { chat: { id: -5, type: 'channel', title: 'News' } } },
          {
            update_id: 4,
            my_chat_member: { chat: { id: 9, type: 'private', first_name: 'Ada', last_name: 'L' } },
          },
          { update_id: 5, message: { chat: { id: 'not-valid', type: 7 } } },
        ],
      },
    }));
    const chats = await chatA.detectChats({ apiUrl: 'https://chat.test', token, transport: p.transport });
    expect(chats).toEqual([
      { chatId: '-100', name: 'Ops', type: 'supergroup', username: null },
      { chatId: '-5', name: 'News', type: 'channel', username: null },
      { chatId: '9', name: 'Ada L', type: 'private', username: null },
    ]);
  });
});

describe('team chat (chatbot_b)', () => {
  it('posts block-kit buttons with the token in Authorization, and updates in place', async () => {
    const p = scripted((url) => ({
      status: 200,
      json: url.endsWith('chat.postMessage') ? { ok: true, channel: 'C1', ts: '1.2' } : { ok: true },
    }));
    const ctx = { apiUrl: 'https://team.test', token: 'xoxb-secret', transport: p.transport };
    const ref = await chatB.postMessage(ctx, {
      channel: 'C1',
      text: 'hi',
      buttons: [
        { text: 'Approve', url: 'https://v/a' },
        { text: 'Deny', url: 'https://v/d' },
      ],
    });
    expect(ref).toEqual({ channel: 'C1', ts: '1.2' });
    expect(p.seen[0]!.headers.authorization).toBe('Bearer xoxb-secret');
    const actions = p.seen[0]!.body.blocks[1];
    expect(actions.elements.map((e: { url: string; style?: string }) => [e.url, e.style])).toEqual([
      ['https://v/a', 'primary'],
      ['https://v/d', 'danger'],
    ]);
    await chatB.updateMessage(ctx, { channel: 'C1', ts: '1.2', text: 'Approved' });
    expect(p.seen[1]!.url).toBe('https://team.test/api/chat.update');
    expect(p.seen[1]!.body.blocks).toHaveLength(1);
  });

  it('ok:false is a refusal, except the provider’s own rate limit', async () => {
    for (const [error, retryable] of [
      ['channel_not_found', false],
      ['ratelimited', true],
    ] as const) {
      const p = scripted(() => ({ status: 200, json: { ok: false, error } }));
      const err = (await chatB
        .postMessage(
          { apiUrl: 'https://team.test', token: 't', transport: p.transport },
          { channel: 'C', text: 'x' },
        )
        .catch((e: unknown) => e)) as DeliveryError;
      expect(err.retryable).toBe(retryable);
    }
  });
});

describe('push', () => {
  it('sends the spec payload in batches of 100 and reports unregistered devices', async () => {
    const p = scripted((_url, body: { to: string }[]) => ({
      status: 200,
      json: {
        data: body.map((m) =>
          m.to.endsWith('7]')
            ? { status: 'error', details: { error: 'DeviceNotRegistered' } }
            : { status: 'ok' },
        ),
      },
    }));
    const messages = Array.from({ length: 150 }, (_, i) => ({
      to: `ExponentPushToken[${i}]`,
      title: 'Approval needed',
      body: 'b',
      data: { type: 'approval_request' as const, url: 'https://v/approvals/1' },
    }));
    const { unregistered } = await sendPush('https://push.test/send', messages, { transport: p.transport });
    expect(p.seen.map((s) => s.body.length)).toEqual([100, 50]);
    expect(p.seen[0]!.body[0]).toEqual({
      to: 'ExponentPushToken[0]',
      title: 'Approval needed',
      body: 'b',
      priority: 'high',
      channelId: 'approvals',
      sound: 'default',
      data: { type: 'approval_request', url: 'https://v/approvals/1' },
    });
    expect(unregistered).toEqual([
      'ExponentPushToken[7]',
      'ExponentPushToken[17]',
      'ExponentPushToken[27]',
      'ExponentPushToken[37]',
      'ExponentPushToken[47]',
      'ExponentPushToken[57]',
      'ExponentPushToken[67]',
      'ExponentPushToken[77]',
      'ExponentPushToken[87]',
      'ExponentPushToken[97]',
      'ExponentPushToken[107]',
      'ExponentPushToken[117]',
      'ExponentPushToken[127]',
      'ExponentPushToken[137]',
      'ExponentPushToken[147]',
    ]);
  });
});
