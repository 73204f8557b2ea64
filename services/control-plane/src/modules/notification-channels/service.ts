/**
 * Where reviewers are told besides the app: one bot-chat (`chatbot_a`) and one team-chat
 * (`chatbot_b`) channel per workspace, each posting through one of the workspace's connections.
 * A channel is used only once a test message went through (`verified`) and while `enabled`;
 * changing where it posts makes it `pending` again. Changes are audited.
 */
import { Errors } from '@vlt/service-kit';
import type {
  ChannelUpsertRequest,
  ChannelView,
  NotifierChannel,
  NotifierChannelsRequest,
} from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import { chatA, chatB, DeliveryError, transportVia, type DetectedChat } from '@vlt/notify';
import type { ControlPlaneDeps } from '../../deps.js';
import { audited, auditEvent, commitChange } from '../../infra/change.js';
import { usableCredentials } from '../connections/token-refresh.js';
import { mintQuickActions } from '../quick-actions/tokens.js';

type Member = { userId: string; workspaceId: string };
type Row = Prisma.NotificationChannelGetPayload<object>;

export function channelView(c: Row): ChannelView {
  return {
    id: c.id,
    channelType: c.channelType as ChannelView['channelType'],
    enabled: c.enabled,
    connectionId: c.connectionId,
    config: c.config as Record<string, string>,
    verificationStatus: c.verificationStatus,
    lastDeliveryStatus: c.lastDeliveryStatus,
    lastDeliveryAt: c.lastDeliveryAt ? c.lastDeliveryAt.toISOString() : null,
    lastDeliveryError: c.lastDeliveryError,
    createdAt: c.createdAt.toISOString(),
  };
}

type ChannelAction =
  | 'notification_channel_saved'
  | 'notification_channel_verified'
  | 'notification_channel_enabled'
  | 'notification_channel_disabled'
  | 'notification_channel_deleted';

/** The audit event of a change a member made to one of the workspace's channels. */
function channelChange(
  deps: ControlPlaneDeps,
  member: Member,
  action: ChannelAction,
  channel: { id: string; channelType: string; connectionId: string },
  extra: Record<string, unknown> = {},
) {
  return auditEvent(deps, {
    action,
    actor: member.userId,
    workspaceId: member.workspaceId,
    agentId: null,
    connectionId: channel.connectionId,
    decision: 'info',
    metadata: { channelId: channel.id, channelType: channel.channelType, ...extra },
  });
}

const targetOf = (c: Row) => {
  const cfg = c.config as Record<string, string>;
  return c.channelType === 'chatbot_a' ? cfg.chatId! : cfg.channelId!;
};

export async function listChannels(deps: ControlPlaneDeps, workspaceId: string) {
  const rows = await deps.prisma.notificationChannel.findMany({
    where: { workspaceId },
    orderBy: { channelType: 'asc' },
  });
  return { channels: rows.map(channelView) };
}

async function channelConnection(
  deps: ControlPlaneDeps,
  workspaceId: string,
  connectionId: string,
  provider: string,
) {
  const conn = await deps.prisma.connection.findFirst({ where: { id: connectionId, workspaceId } });
  if (!conn) throw Errors.notFound('connection not found');
  if (conn.provider !== provider)
    throw Errors.badRequest(`a ${provider} channel needs a ${provider} connection`);
  if (conn.status === 'revoked') throw Errors.connectionRevoked();
  if (conn.status === 'needs_reauth') throw Errors.connectionNeedsReauth();
  return conn;
}

export async function upsertChannel(deps: ControlPlaneDeps, member: Member, body: ChannelUpsertRequest) {
  await channelConnection(deps, member.workspaceId, body.connectionId, body.channelType);
  const config = body.config as Prisma.InputJsonValue;
  return commitChange(deps, async (tx, emit) => {
    const before = await tx.notificationChannel.findUnique({
      where: { workspaceId_channelType: { workspaceId: member.workspaceId, channelType: body.channelType } },
    });
    // Pointing a verified channel somewhere else needs a new test message first.
    const moved =
      !before ||
      before.connectionId !== body.connectionId ||
      JSON.stringify(before.config) !== JSON.stringify(body.config);
    const row = await tx.notificationChannel.upsert({
      where: { workspaceId_channelType: { workspaceId: member.workspaceId, channelType: body.channelType } },
      create: {
        workspaceId: member.workspaceId,
        channelType: body.channelType,
        connectionId: body.connectionId,
        config,
      },
      update: {
        connectionId: body.connectionId,
        config,
        ...(moved && { verificationStatus: 'pending', lastDeliveryStatus: null, lastDeliveryError: null }),
      },
    });
    const event = channelChange(deps, member, 'notification_channel_saved', row, { created: !before });
    emit(audited(event));
    return { created: !before, channel: channelView(row), auditId: event.auditId };
  });
}

async function ownChannel(deps: ControlPlaneDeps, workspaceId: string, id: string) {
  const row = await deps.prisma.notificationChannel.findFirst({ where: { id, workspaceId } });
  if (!row) throw Errors.notFound('notification channel not found');
  return row;
}

/** The credential to post with; a broken connection is the caller's 409. */
async function postingToken(deps: ControlPlaneDeps, connectionId: string): Promise<string> {
  const usable = await usableCredentials(deps, connectionId);
  if (!usable.ok) {
    if (usable.code === 'revoked') throw Errors.connectionRevoked();
    if (usable.code === 'needs_reauth') throw Errors.connectionNeedsReauth();
    throw Errors.unavailable('the connection cannot be used right now');
  }
  const c = usable.credentials;
  if (c.type === 'bot_token') return c.token;
  if (c.type === 'oauth') return c.accessToken;
  throw Errors.badRequest('this connection cannot post messages');
}

function apiUrl(deps: ControlPlaneDeps, type: 'chatbot_a' | 'chatbot_b'): string {
  const url = deps.config.providers[type].apiUrl;
  if (!url) throw Errors.unavailable(`no API URL is configured for ${type}`);
  return url;
}

function deliveryFailed(err: unknown): never {
  if (err instanceof DeliveryError)
    throw Errors.upstreamUnavailable(`the test message was not delivered: ${err.message}`);
  throw err;
}

export async function testChannel(deps: ControlPlaneDeps, member: Member, id: string) {
  const row = await ownChannel(deps, member.workspaceId, id);
  const token = await postingToken(deps, row.connectionId);
  const ctx = {
    apiUrl: apiUrl(deps, row.channelType as 'chatbot_a'),
    token,
    transport: transportVia(deps.upstream),
  };
  const text =
    'Test message from the credential vault: approval requests for this workspace will appear here.';
  try {
    if (row.channelType === 'chatbot_a') await chatA.sendMessage(ctx, { chatId: targetOf(row), text });
    else await chatB.postMessage(ctx, { channel: targetOf(row), text });
  } catch (err) {
    await deps.prisma.notificationChannel.update({
      where: { id },
      data: {
        lastDeliveryStatus: 'failing',
        lastDeliveryAt: deps.now(),
        lastDeliveryError: err instanceof DeliveryError ? err.message : 'delivery failed',
      },
    });
    deliveryFailed(err);
  }
  let auditId: string | undefined;
  const updated = await commitChange(deps, async (tx, emit) => {
    const r = await tx.notificationChannel.update({
      where: { id },
      data: {
        verificationStatus: 'verified',
        lastDeliveryStatus: 'delivered',
        lastDeliveryAt: deps.now(),
        lastDeliveryError: null,
      },
    });
    if (row.verificationStatus !== 'verified') {
      const event = channelChange(deps, member, 'notification_channel_verified', row);
      emit(audited(event));
      auditId = event.auditId;
    }
    return r;
  });
  return { channel: channelView(updated), delivered: true as const, ...(auditId && { auditId }) };
}

/**
 * Switching a channel off silences reviewers' notifications there, so a change is audited; a
 * request that changes nothing is not. The conditional update decides which, atomically: of two
 * concurrent requests to switch it off, one records it.
 */
export async function setChannelEnabled(
  deps: ControlPlaneDeps,
  member: Member,
  id: string,
  enabled: boolean,
) {
  let auditId: string | undefined;
  const row = await commitChange(deps, async (tx, emit) => {
    // Both statements are scoped to the member's workspace: another workspace's channel is
    // neither changed nor found (404), with nothing written.
    const changed = await tx.notificationChannel.updateMany({
      where: { id, workspaceId: member.workspaceId, enabled: !enabled },
      data: { enabled },
    });
    const r = await tx.notificationChannel.findFirst({ where: { id, workspaceId: member.workspaceId } });
    if (!r) throw Errors.notFound('notification channel not found');
    if (changed.count > 0) {
      const event = channelChange(
        deps,
        member,
        enabled ? 'notification_channel_enabled' : 'notification_channel_disabled',
        r,
      );
      emit(audited(event));
      auditId = event.auditId;
    }
    return r;
  });
  return { channel: channelView(row), ...(auditId && { auditId }) };
}

export async function deleteChannel(deps: ControlPlaneDeps, member: Member, id: string) {
  const row = await ownChannel(deps, member.workspaceId, id);
  const event = channelChange(deps, member, 'notification_channel_deleted', row);
  await commitChange(deps, async (tx, emit) => {
    await tx.notificationChannel.delete({ where: { id } });
    emit(audited(event));
  });
  return { deleted: true as const, id, auditId: event.auditId };
}

export async function detectChats(
  deps: ControlPlaneDeps,
  member: Member,
  connectionId: string,
): Promise<{ chats: DetectedChat[] }> {
  const conn = await channelConnection(deps, member.workspaceId, connectionId, 'chatbot_a');
  const token = await postingToken(deps, conn.id);
  try {
    const chats = await chatA.detectChats({
      apiUrl: apiUrl(deps, 'chatbot_a'),
      token,
      transport: transportVia(deps.upstream),
    });
    return { chats };
  } catch (err) {
    if (err instanceof DeliveryError)
      throw Errors.upstreamUnavailable(`the bot's updates could not be read: ${err.message}`);
    throw err;
  }
}

/**
 * For the notifier only (request/reply): verified, enabled channels with what it takes to post,
 * and, for a pending approval, one pair of quick-action links per channel. A channel whose
 * connection cannot be used is left out and shows why on its status.
 */
export async function channelsForNotifier(deps: ControlPlaneDeps, req: NotifierChannelsRequest) {
  const rows = await deps.prisma.notificationChannel.findMany({
    where: {
      workspaceId: req.workspaceId,
      enabled: true,
      verificationStatus: 'verified',
      ...(req.channelIds && { id: { in: req.channelIds } }),
    },
  });
  const approval = req.approvalId
    ? await deps.prisma.approvalRequest.findFirst({
        where: { id: req.approvalId, workspaceId: req.workspaceId },
      })
    : null;
  const askable = approval && approval.status === 'pending' && approval.expiresAt > deps.now();
  const channels: NotifierChannel[] = [];
  for (const row of rows) {
    let token: string;
    try {
      token = await postingToken(deps, row.connectionId);
    } catch (err) {
      await deps.prisma.notificationChannel.update({
        where: { id: row.id },
        data: {
          lastDeliveryStatus: 'failing',
          lastDeliveryAt: deps.now(),
          lastDeliveryError: err instanceof Error ? err.message.slice(0, 200) : 'connection unusable',
        },
      });
      continue;
    }
    const type = row.channelType as 'chatbot_a' | 'chatbot_b';
    const url = deps.config.providers[type].apiUrl;
    if (!url) continue;
    channels.push({
      id: row.id,
      channelType: type,
      target: targetOf(row),
      apiUrl: url,
      token,
      quickActions: askable ? await mintQuickActions(deps, approval, row.id) : null,
    });
  }
  return { channels };
}
