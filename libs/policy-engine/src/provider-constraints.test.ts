import type { ProviderConstraints } from '@vlt/contracts';
import { describe, expect, it } from 'vitest';
import { chatIdOfUpdate, checkProviderConstraints, inboundFilterFor } from './provider-constraints.js';
import { prepareRequestBody } from './request-body.js';
import { canonicalizeTarget } from './url-canonicalizer.js';

function check(pc: ProviderConstraints | null, url: string, body?: unknown, contentType?: string) {
  const t = canonicalizeTarget(url);
  if (!t.ok) throw new Error(t.reason);
  const b = prepareRequestBody(body, contentType);
  if (!b.ok) throw new Error(b.reason);
  return checkProviderConstraints(pc, t, b.inspected).ok;
}

const botA: ProviderConstraints = {
  provider: 'chatbot_a',
  allowedChatIds: ['123', '-100200', '@team_channel'],
};
const BOT = 'https://api.bot.example/bot/sendMessage';

describe('chatbot_a outbound', () => {
  it.each([
    [{ chat_id: 123, text: 'hi' }, true],
    [{ chat_id: '123', text: 'hi' }, true],
    [{ chat_id: -100200 }, true],
    [{ chat_id: '@team_channel' }, true],
    [{ chat_id: 999, text: 'hi' }, false],
    [{ chat_id: '123 ' }, false],
    [{ chat_id: 123, reply_parameters: { message_id: 1, chat_id: 999 } }, false],
    [{ chat_id: 123, from_chat_id: 999, message_id: 5 }, false],
    [{ chat_id: [123] }, false],
    [{ chat_id: 123.5 }, false],
    [{ text: 'no chat' }, true],
    ['{"chat_id":999,"text":"escaped"}', false],
    ['{"\\u0063hat_id":999}', false],
  ])('body %j → %s', (body, ok) => {
    expect(check(botA, BOT, body)).toBe(ok);
  });

  it('checks query parameters, form bodies and refuses bodies it cannot read', () => {
    expect(check(botA, `${BOT}?chat_id=123`)).toBe(true);
    expect(check(botA, `${BOT}?chat_id=999`)).toBe(false);
    expect(check(botA, `${BOT}?CHAT_ID=999`)).toBe(false);
    expect(check(botA, BOT, 'chat_id=999&text=x', 'application/x-www-form-urlencoded')).toBe(false);
    expect(check(botA, BOT, 'chat_id=123&text=x', 'application/x-www-form-urlencoded')).toBe(true);
    expect(check(botA, BOT, 'chat_id=123', 'text/plain')).toBe(false);
  });

  it('does not restrict with an empty list', () => {
    expect(check({ provider: 'chatbot_a', allowedChatIds: [] }, BOT, { chat_id: 999 })).toBe(true);
    expect(check(null, BOT, 'opaque')).toBe(true);
  });
});

describe('chatbot_a inbound', () => {
  const updates = {
    ok: true,
    result: [
      { update_id: 1, message: { chat: { id: 123 }, text: 'allowed' } },
      { update_id: 2, message: { chat: { id: 999 }, text: 'other chat' } },
      { update_id: 3, edited_message: { chat: { id: -100200 } } },
      { update_id: 4, callback_query: { from: { id: 999 }, message: { chat: { id: 123 } } } },
      { update_id: 5, inline_query: { from: { id: 999 } } },
      { update_id: 6, poll: { id: 'p' } },
      { update_id: 7, my_chat_member: { chat: { id: '@team_channel' } } },
    ],
  };

  it('keeps only updates from allowed chats, dropping those it cannot attribute', () => {
    const f = inboundFilterFor(botA, '/bot/getUpdates')!;
    const out = f(updates) as typeof updates;
    expect(out.result.map((u) => u.update_id)).toEqual([1, 3, 4, 7]);
    expect(updates.result).toHaveLength(7);
  });

  it('applies to getUpdates only and not at all with an empty list', () => {
    expect(inboundFilterFor(botA, '/bot/sendMessage')).toBeNull();
    expect(inboundFilterFor({ provider: 'chatbot_a', allowedChatIds: [] }, '/bot/getUpdates')).toBeNull();
  });

  it('reads the chat of an update', () => {
    expect(chatIdOfUpdate({ update_id: 1, channel_post: { chat: { id: 5 } } })).toBe('5');
    expect(chatIdOfUpdate({ update_id: 1 })).toBeNull();
  });
});

const botB: ProviderConstraints = {
  provider: 'chatbot_b',
  allowedChannelIds: ['C1', 'C2'],
  allowedUserIds: ['U1'],
};
const SLACK = 'https://slack.example/api';

describe('chatbot_b', () => {
  it.each([
    [`${SLACK}/chat.postMessage`, { channel: 'C1', text: 'hi' }, true],
    [`${SLACK}/chat.postMessage`, { channel: 'C9', text: 'hi' }, false],
    [`${SLACK}/chat.postMessage`, { channel: 'U1', text: 'dm' }, false],
    [`${SLACK}/files.upload`, { channels: 'C1,C2' }, true],
    [`${SLACK}/files.upload`, { channels: 'C1,C9' }, false],
    [`${SLACK}/files.upload`, { channels: ['C1', 'C9'] }, false],
    [`${SLACK}/conversations.history?channel=C2`, undefined, true],
    [`${SLACK}/conversations.history?channel=C9`, undefined, false],
    [`${SLACK}/conversations.list`, undefined, true],
    // Direct-message channels are exempt from the channel list (the user list still filters what it hears).
    [`${SLACK}/chat.postMessage`, { channel: 'D0123ABC', text: 'dm' }, true],
    [`${SLACK}/conversations.history?channel=D0123ABC`, undefined, true],
    [`${SLACK}/files.upload`, { channels: 'C1,D0123ABC' }, true],
    // Only the real shape counts as a DM: lower case, a bare "D" or a prefix trick is a channel.
    [`${SLACK}/chat.postMessage`, { channel: 'd0123abc', text: 'x' }, false],
    [`${SLACK}/chat.postMessage`, { channel: 'D', text: 'x' }, false],
    [`${SLACK}/chat.postMessage`, { channel: 'D01,C9', text: 'x' }, false],
  ])('%s %j → %s', (url, body, ok) => {
    expect(check(botB, url, body)).toBe(ok);
  });

  it('filters inbound messages by user and channel lists by id', () => {
    const f = inboundFilterFor(botB, '/api/conversations.history')!;
    expect(
      f({
        ok: true,
        messages: [
          { user: 'U1', text: 'a' },
          { user: 'U2', text: 'b' },
          { bot_id: 'B1', text: 'c' },
        ],
      }),
    ).toEqual({
      ok: true,
      messages: [{ user: 'U1', text: 'a' }],
    });
    expect(f({ channels: [{ id: 'C1' }, { id: 'C3' }, { id: 'D0123ABC' }] })).toEqual({
      channels: [{ id: 'C1' }, { id: 'D0123ABC' }],
    });
    expect(
      f({
        messages: {
          matches: [
            { user: 'U1', channel: { id: 'C1' } },
            { user: 'U1', channel: { id: 'C3' } },
            { user: 'U2', channel: { id: 'C1' } },
          ],
        },
      }),
    ).toEqual({ messages: { matches: [{ user: 'U1', channel: { id: 'C1' } }] } });
  });

  it('leaves dimensions with empty lists unrestricted', () => {
    const usersOnly: ProviderConstraints = {
      provider: 'chatbot_b',
      allowedChannelIds: [],
      allowedUserIds: ['U1'],
    };
    expect(check(usersOnly, `${SLACK}/chat.postMessage`, { channel: 'C9' })).toBe(true);
    const f = inboundFilterFor(usersOnly, '/api/conversations.list')!;
    expect(f({ channels: [{ id: 'C9' }] })).toEqual({ channels: [{ id: 'C9' }] });
    expect(
      inboundFilterFor({ provider: 'chatbot_b', allowedChannelIds: [], allowedUserIds: [] }, '/api/x'),
    ).toBeNull();
  });
});

const suiteB: ProviderConstraints = {
  provider: 'suite_b',
  allowedTenantIds: ['t-1'],
  allowedChatIds: ['19:chat-ok@thread.v2'],
  allowedChannelIds: ['19:chan-ok@thread.tacv2'],
};
const GRAPH = 'https://graph.example/v1.0';

describe('suite_b', () => {
  it.each([
    [`${GRAPH}/chats/19:chat-ok@thread.v2/messages`, 'POST', { body: { content: 'hi' } }, true],
    [`${GRAPH}/chats/19%3Achat-ok%40thread.v2/messages`, 'POST', undefined, true],
    [`${GRAPH}/chats/19:chat-bad@thread.v2/messages`, 'POST', undefined, false],
    [`${GRAPH}/Chats('19:chat-bad@thread.v2')/messages`, 'GET', undefined, false],
    [`${GRAPH}/teams/T/channels/19:chan-ok@thread.tacv2/messages`, 'POST', undefined, true],
    [`${GRAPH}/teams/T/channels/19:chan-bad@thread.tacv2/messages`, 'POST', undefined, false],
    [`${GRAPH}/teams/T/primaryChannel/messages`, 'POST', undefined, false],
    [`${GRAPH}/me/chats`, 'GET', undefined, true],
    [`${GRAPH}/me/chats/getAllMessages`, 'GET', undefined, false],
    [`${GRAPH}/tenantRelationships/multiTenantOrganization/tenants/t-2`, 'GET', undefined, false],
    [`${GRAPH}/me/messages`, 'POST', { channelIdentity: { channelId: '19:chan-bad@thread.tacv2' } }, false],
    [`${GRAPH}/me/messages`, 'POST', { tenantId: 't-1', chatId: '19:chat-ok@thread.v2' }, true],
    [`${GRAPH}/me/messages`, 'POST', { nested: { TenantId: 't-9' } }, false],
    [
      `${GRAPH}/$batch`,
      'POST',
      { requests: [{ id: '1', method: 'GET', url: '/chats/19:chat-ok@thread.v2/messages' }] },
      true,
    ],
    [
      `${GRAPH}/$batch`,
      'POST',
      { requests: [{ id: '1', method: 'POST', url: '/chats/19:chat-bad@thread.v2/messages', body: {} }] },
      false,
    ],
    [
      `${GRAPH}/$batch`,
      'POST',
      {
        requests: [
          { id: '1', method: 'POST', url: 'https://graph.example/v1.0/teams/T/channels/19:x/messages' },
        ],
      },
      false,
    ],
    [`${GRAPH}/$batch`, 'POST', { requests: [{ id: '1', method: 'POST' }] }, false],
    [`${GRAPH}/$batch`, 'POST', { notRequests: [] }, false],
  ])('%s %s %j → %s', (url, _method, body, ok) => {
    expect(check(suiteB, url, body)).toBe(ok);
  });

  it('is opt-in: nothing configured means everything passes', () => {
    const open: ProviderConstraints = {
      provider: 'suite_b',
      allowedTenantIds: [],
      allowedChatIds: [],
      allowedChannelIds: [],
    };
    expect(check(open, `${GRAPH}/chats/any/messages`, 'opaque body')).toBe(true);
    expect(inboundFilterFor(open, '/v1.0/me/chats')).toBeNull();
  });

  it('refuses bodies it cannot inspect once restricted', () => {
    expect(check(suiteB, `${GRAPH}/me/messages`, 'tenantId=t-9', 'application/x-www-form-urlencoded')).toBe(
      false,
    );
  });

  it('filters listed chats, channels and messages inbound', () => {
    const chats = inboundFilterFor(suiteB, '/v1.0/me/chats')!;
    expect(chats({ value: [{ id: '19:chat-ok@thread.v2' }, { id: '19:other' }] })).toEqual({
      value: [{ id: '19:chat-ok@thread.v2' }],
    });
    const channels = inboundFilterFor(suiteB, '/v1.0/teams/T/allChannels')!;
    expect(channels({ value: [{ id: '19:chan-ok@thread.tacv2' }, { id: '19:x' }] })).toEqual({
      value: [{ id: '19:chan-ok@thread.tacv2' }],
    });
    const msgs = inboundFilterFor(suiteB, '/v1.0/users/u/chats/getAllMessages')!;
    expect(
      msgs({
        value: [
          { chatId: '19:chat-ok@thread.v2' },
          { chatId: '19:other' },
          { channelIdentity: { channelId: '19:x', tenantId: 't-1' } },
          { tenantId: 't-2' },
          { body: 'no ids' },
        ],
      }),
    ).toEqual({ value: [{ chatId: '19:chat-ok@thread.v2' }, { body: 'no ids' }] });
  });
});
