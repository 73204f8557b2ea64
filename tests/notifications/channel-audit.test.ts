/**
 * Notification channels are audited: saving, switching on and off, and deleting one are each
 * recorded once, by whom, for which channel. Switching a channel off silences reviewers there,
 * so it must never go unrecorded; a request that changes nothing records nothing, and another
 * workspace cannot touch the channel (404, nothing recorded). Each answer to a recorded change
 * carries the `auditId` of its entry; an answer to a request that changed nothing carries none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditAll, botTokenConnectionRequest, expectStatus, http, pollAudit } from '../support/api-client.js';
import { newUser } from '../support/identity-harness.js';
import { startConnectionsGateway, type ConnectionsGateway } from '../support/mock-providers.js';

interface Channel {
  id: string;
  enabled: boolean;
  channelType: string;
}

describe('notification channel changes are audited', () => {
  let fx: ConnectionsGateway;
  let connectionId: string;
  let channel: Channel;
  let savedAuditId: string | undefined;

  const channelEvents = async () =>
    (await auditAll(fx.admin, { connectionId })).filter((e) => e.action.startsWith('notification_channel_'));
  const toggle = (id: string, enabled: boolean, headers = fx.admin.headers) =>
    http<{ channel: Channel; auditId?: string }>(
      'PATCH',
      `${fx.base}/v1/notification-channels/${id}/enabled`,
      {
        headers,
        json: { enabled },
      },
    );

  beforeAll(async () => {
    fx = await startConnectionsGateway({ shape: 'embedded', providers: ['chatbot_a'] });
    const bot = await botTokenConnectionRequest(fx.admin, { botToken: fx.mock.botToken });
    expect(bot.status, bot.text).toBe(201);
    connectionId = bot.body.connection.id;
    const saved = expectStatus(
      await http<{ channel: Channel; auditId?: string }>('POST', `${fx.base}/v1/notification-channels`, {
        headers: fx.admin.headers,
        json: { channelType: 'chatbot_a', connectionId, config: { chatId: '-1001' } },
      }),
      201,
    ).body;
    channel = saved.channel;
    savedAuditId = saved.auditId;
  });
  afterAll(async () => {
    await fx?.close();
  });

  it('saving records notification_channel_saved with the member and the channel', async () => {
    const events = await pollAudit(
      fx.admin,
      { connectionId, action: 'notification_channel_saved' },
      (e) => e.length > 0,
    );
    expect(events).toHaveLength(1);
    expect(events[0]!.auditId).toBe(savedAuditId);
    expect(events[0]).toMatchObject({
      actor: fx.owner.id,
      connectionId,
      decision: 'info',
      metadata: { channelId: channel.id, channelType: 'chatbot_a', created: true },
    });
  });

  it('switching off and on records each change once; a request that changes nothing records nothing', async () => {
    const off = expectStatus(await toggle(channel.id, false), 200).body;
    expect(off.channel.enabled).toBe(false);
    // Already off: answered as it is, not recorded again, so no audit entry to name.
    const again = expectStatus(await toggle(channel.id, false), 200).body;
    expect(again.channel.enabled).toBe(false);
    expect(again).not.toHaveProperty('auditId');
    const on = expectStatus(await toggle(channel.id, true), 200).body;
    expect(on.channel.enabled).toBe(true);
    const events = await pollAudit(fx.admin, { connectionId }, (e) =>
      e.some((x) => x.action === 'notification_channel_enabled'),
    );
    const toggles = events.filter((e) => /^notification_channel_(en|dis)abled$/.test(e.action)).reverse();
    expect(toggles.map((e) => e.action)).toEqual([
      'notification_channel_disabled',
      'notification_channel_enabled',
    ]);
    expect(toggles.map((e) => e.auditId)).toEqual([off.auditId, on.auditId]);
    for (const e of toggles) {
      expect(e).toMatchObject({
        actor: fx.owner.id,
        metadata: { channelId: channel.id, channelType: 'chatbot_a' },
      });
    }
  });

  it("another workspace's admin cannot switch it off: 404, the channel stays on, nothing recorded", async () => {
    const before = (await channelEvents()).length;
    const stranger = await newUser(fx.base, 'channel-stranger');
    const r = await toggle(channel.id, false, stranger.admin.headers);
    expect(r.status).toBe(404);
    expect(typeof (r.body as unknown as { error: string }).error).toBe('string');
    const list = expectStatus(
      await http<{ channels: Channel[] }>('GET', `${fx.base}/v1/notification-channels`, {
        headers: fx.admin.headers,
      }),
      200,
    ).body.channels;
    expect(list.find((c) => c.id === channel.id)?.enabled).toBe(true);
    expect((await channelEvents()).length).toBe(before);
  });

  it('deleting records notification_channel_deleted', async () => {
    const deleted = expectStatus(
      await http<{ deleted: true; id: string; auditId: string }>(
        'DELETE',
        `${fx.base}/v1/notification-channels/${channel.id}`,
        { headers: fx.admin.headers },
      ),
      200,
    ).body;
    const events = await pollAudit(
      fx.admin,
      { connectionId, action: 'notification_channel_deleted' },
      (e) => e.length > 0,
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ actor: fx.owner.id, metadata: { channelId: channel.id } });
    expect(events[0]!.auditId).toBe(deleted.auditId);
  });
});
