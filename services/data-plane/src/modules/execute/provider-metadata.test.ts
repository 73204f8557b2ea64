import { describe, expect, it } from 'vitest';
import { providerMetadata } from './provider-metadata.js';

const json = (value: unknown) => ({ kind: 'json' as const, value });
const b64url = (text: string) => Buffer.from(text).toString('base64url');

describe('emailMetadata', () => {
  const mime = [
    'From: Agent <agent@corp.example>',
    'To: "Bach, Sebastian" <sebu@example.com>,',
    ' mozart@example.com',
    'Cc: Composers: haydn@example.com, "Clara" <clara@example.com>;',
    'Bcc: audit@corp.example',
    'Subject: =?UTF-8?B?UXVhcnRlcmx5IHLDqXN1bHRz?=',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'The numbers are attached.',
  ].join('\r\n');
  const expected = {
    emailMetadata: {
      to: ['sebu@example.com', 'mozart@example.com'],
      cc: ['haydn@example.com', 'clara@example.com'],
      bcc: ['audit@corp.example'],
      subject: 'Quarterly résults',
    },
  };

  it('reads To, Cc (a group too), Bcc and an encoded Subject from a suite_a message and draft', async () => {
    const send = 'https://gmail.googleapis.com/gmail/v1/users/me/messages/send';
    expect(await providerMetadata('suite_a', 'POST', send, json({ raw: b64url(mime) }))).toEqual(expected);
    const draft = 'https://gmail.googleapis.com/gmail/v1/users/me/drafts';
    expect(
      await providerMetadata('suite_a', 'POST', draft, json({ message: { raw: b64url(mime) } })),
    ).toEqual(expected);
  });

  it('reads only the header block of a large message: its 8 MiB attachment is never decoded', async () => {
    const large = `${mime}\r\n${'A'.repeat(8 * 1024 * 1024)}`;
    const send = 'https://gmail.googleapis.com/gmail/v1/users/me/messages/send';
    expect(await providerMetadata('suite_a', 'POST', send, json({ raw: b64url(large) }))).toEqual(expected);
    // A header block longer than 64 KiB is not read at all: no metadata, no error.
    const endless = `Subject: x\r\nX-Pad: ${'p'.repeat(70 * 1024)}\r\n\r\nbody`;
    expect(await providerMetadata('suite_a', 'POST', send, json({ raw: b64url(endless) }))).toEqual({});
    expect(await providerMetadata('suite_a', 'POST', send, json({ raw: '%%% not base64 %%%' }))).toEqual({});
  });

  it('reads a suite_b sendMail, and a forward whose recipients sit beside the message', async () => {
    const address = (a: string) => ({ emailAddress: { address: a, name: 'n' } });
    const sendMail = 'https://graph.microsoft.com/v1.0/me/sendMail';
    const body = json({
      message: {
        subject: 'Offer',
        toRecipients: [address('a@example.com')],
        ccRecipients: [address('b@example.com')],
        bccRecipients: [address('c@example.com')],
      },
    });
    expect(await providerMetadata('suite_b', 'POST', sendMail, body)).toEqual({
      emailMetadata: {
        to: ['a@example.com'],
        cc: ['b@example.com'],
        bcc: ['c@example.com'],
        subject: 'Offer',
      },
    });
    const forward = 'https://graph.microsoft.com/v1.0/users/u1/messages/m1/forward';
    expect(
      await providerMetadata('suite_b', 'POST', forward, json({ toRecipients: [address('d@example.com')] })),
    ).toEqual({ emailMetadata: { to: ['d@example.com'], cc: [], bcc: [], subject: null } });
  });

  it('reads the operation of a $batch that needs the reviewer, else the first that has metadata', async () => {
    const send = (id: string, to: string) => ({
      id,
      method: 'POST',
      url: '/me/sendMail',
      body: { message: { subject: id, toRecipients: [{ emailAddress: { address: to } }] } },
    });
    const batch = json({
      requests: [
        { id: 'r', method: 'GET', url: '/me/messages' },
        send('s1', 'a@example.com'),
        send('s2', 'b@example.com'),
      ],
    });
    const url = 'https://graph.microsoft.com/v1.0/$batch';
    const mail = (to: string, subject: string) => ({ emailMetadata: { to: [to], cc: [], bcc: [], subject } });
    expect(await providerMetadata('suite_b', 'POST', url, batch, 's2')).toEqual(mail('b@example.com', 's2'));
    expect(await providerMetadata('suite_b', 'POST', url, batch)).toEqual(mail('a@example.com', 's1'));
    // A batch the pipeline would refuse has none.
    expect(await providerMetadata('suite_b', 'POST', url, json({ requests: 'x' }))).toEqual({});
  });

  it('lists at most 100 recipients per field and counts the rest', async () => {
    const to = Array.from({ length: 150 }, (_, i) => ({ emailAddress: { address: `r${i}@example.com` } }));
    const out = await providerMetadata(
      'suite_b',
      'POST',
      'https://graph.microsoft.com/v1.0/me/sendMail',
      json({ message: { toRecipients: to } }),
    );
    const listed = (out as { emailMetadata: { to: string[] } }).emailMetadata.to;
    expect(listed).toHaveLength(101);
    expect(listed.at(-1)).toBe('… [50 more]');
  });
});

describe('teamChatMetadata and chatBotMetadata', () => {
  it('reads the team, channel and content of a channel message, and the chat of a chat message', async () => {
    const channel = 'https://graph.microsoft.com/v1.0/teams/t-1/channels/19%3Aabc%40thread.tacv2/messages';
    expect(
      await providerMetadata(
        'suite_b',
        'POST',
        channel,
        json({ body: { contentType: 'html', content: '<b>hi</b>' } }),
      ),
    ).toEqual({
      teamChatMetadata: {
        teamId: 't-1',
        channelId: '19:abc@thread.tacv2',
        chatId: null,
        contentType: 'html',
        content: '<b>hi</b>',
      },
    });
    const chat = 'https://graph.microsoft.com/v1.0/chats/19%3Achat-1/messages';
    expect(await providerMetadata('suite_b', 'POST', chat, json({ body: { content: 'hello' } }))).toEqual({
      teamChatMetadata: {
        teamId: null,
        channelId: null,
        chatId: '19:chat-1',
        contentType: 'text',
        content: 'hello',
      },
    });
    // Reading a chat's messages sends nothing.
    expect(await providerMetadata('suite_b', 'GET', chat, undefined)).toEqual({});
  });

  it('reads the chat and text of a chatbot_a message (JSON, form or query) and a chatbot_b post', async () => {
    const api = 'https://api.telegram.org';
    expect(
      await providerMetadata(
        'chatbot_a',
        'POST',
        `${api}/sendMessage`,
        json({ chat_id: -100123, text: 'deploy done' }),
      ),
    ).toEqual({ chatBotMetadata: { chatId: '-100123', text: 'deploy done' } });
    expect(
      await providerMetadata('chatbot_a', 'POST', `${api}/sendPhoto`, {
        kind: 'form',
        value: { chat_id: ['42'], caption: ['the chart'] },
      }),
    ).toEqual({ chatBotMetadata: { chatId: '42', text: 'the chart' } });
    expect(
      await providerMetadata('chatbot_a', 'GET', `${api}/sendMessage?chat_id=7&text=hi`, undefined),
    ).toEqual({
      chatBotMetadata: { chatId: '7', text: 'hi' },
    });
    expect(
      await providerMetadata(
        'chatbot_b',
        'POST',
        'https://slack.com/api/chat.postMessage',
        json({ channel: 'C123', text: 'x'.repeat(5000) }),
      ),
    ).toEqual({ chatBotMetadata: { chatId: 'C123', text: `${'x'.repeat(4096)}… [904 more characters]` } });
  });

  it('has nothing to say of requests it does not recognise', async () => {
    expect(
      await providerMetadata('issues', 'POST', 'https://t.example/rest/api/3/issue', json({ a: 1 })),
    ).toEqual({});
    expect(await providerMetadata('chatbot_a', 'POST', 'https://api.telegram.org/getMe', json({}))).toEqual(
      {},
    );
    expect(await providerMetadata('suite_a', 'POST', 'not a url', json({ raw: 'x' }))).toEqual({});
  });
});
