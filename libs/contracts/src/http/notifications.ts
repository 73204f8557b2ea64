/**
 * In-app notifications, push subscriptions, notification channels and quick actions: the
 * shapes of their routes and of what the notifier hands the control plane's SSE streams.
 */
import { z } from 'zod';

export const NotificationType = z.enum([
  'permission_request',
  'approval_resolved',
  'connection_issue',
  'security_alert',
]);
export type NotificationType = z.infer<typeof NotificationType>;

/** The spec's fields plus DESIGN's `data`/`readAt` (the same facts, for either reader). */
export const NotificationView = z.object({
  id: z.uuid(),
  type: NotificationType,
  title: z.string(),
  body: z.string(),
  linkUrl: z.string().nullable(),
  read: z.boolean(),
  readAt: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
  data: z.record(z.string(), z.unknown()).nullable(),
  createdAt: z.string(),
});
export type NotificationView = z.infer<typeof NotificationView>;

export const NotificationListQuery = z.object({
  unread: z.enum(['true', 'false']).optional(),
  cursor: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});
export const NotificationListResponse = z.object({
  notifications: z.array(NotificationView),
  nextCursor: z.string().nullable(),
});
export const NotificationReadResponse = z.object({ notification: NotificationView });
export const NotificationReadAllResponse = z.object({ updated: z.number().int() });

export const NotificationStreamQuery = z.object({ access_token: z.string().max(4096).optional() });

/** Broadcast from the notifier to every control-plane replica (at most once; rows are the record). */
export const NotificationBroadcast = z.object({
  v: z.literal(1),
  workspaceId: z.uuid(),
  /** Per member: each stream shows only its own user's rows. */
  items: z.array(z.object({ userId: z.uuid(), notification: NotificationView })).max(1000),
});
export type NotificationBroadcast = z.infer<typeof NotificationBroadcast>;

export const PushPlatform = z.enum(['ios', 'android', 'web']);
export const PushSubscriptionCreateRequest = z.object({
  token: z.string().min(1).max(512),
  platform: PushPlatform,
  deviceName: z.string().max(200).optional(),
});
export const PushSubscriptionView = z.object({
  id: z.uuid(),
  expoPushToken: z.string(),
  platform: z.string(),
  deviceName: z.string().nullable(),
  createdAt: z.string(),
});
export const PushSubscriptionResponse = z.object({ subscription: PushSubscriptionView });
export const PushSubscriptionListResponse = z.object({ subscriptions: z.array(PushSubscriptionView) });

export const ChannelType = z.enum(['chatbot_a', 'chatbot_b']);
export type ChannelType = z.infer<typeof ChannelType>;

const chatId = z.string().trim().min(1).max(128);
export const ChannelUpsertRequest = z.discriminatedUnion('channelType', [
  z.object({
    channelType: z.literal('chatbot_a'),
    connectionId: z.uuid(),
    config: z.object({ chatId }).strict(),
  }),
  z.object({
    channelType: z.literal('chatbot_b'),
    connectionId: z.uuid(),
    config: z.object({ channelId: chatId }).strict(),
  }),
]);
export type ChannelUpsertRequest = z.infer<typeof ChannelUpsertRequest>;

export const ChannelView = z.object({
  id: z.uuid(),
  channelType: ChannelType,
  enabled: z.boolean(),
  connectionId: z.uuid(),
  config: z.record(z.string(), z.string()),
  verificationStatus: z.enum(['pending', 'verified']),
  lastDeliveryStatus: z.string().nullable(),
  lastDeliveryAt: z.string().nullable(),
  lastDeliveryError: z.string().nullable(),
  createdAt: z.string(),
});
export type ChannelView = z.infer<typeof ChannelView>;
/** The audit entry a change recorded; absent when the request changed nothing (nothing recorded). */
const ChangeAuditId = z.string().optional();
export const ChannelResponse = z.object({ channel: ChannelView, auditId: ChangeAuditId });
export const ChannelListResponse = z.object({ channels: z.array(ChannelView) });
export const ChannelEnabledRequest = z.object({ enabled: z.boolean() });
export const ChannelTestResponse = z.object({
  channel: ChannelView,
  delivered: z.literal(true),
  auditId: ChangeAuditId,
});
/** A user's own push subscription is not workspace configuration: its removal is not audited. */
export const PushSubscriptionDeleteResponse = z.object({ deleted: z.literal(true), id: z.uuid() });
export const ChannelDeleteResponse = PushSubscriptionDeleteResponse.extend({ auditId: z.string() });
export const DetectChatsRequest = z.object({ connectionId: z.uuid() });
export const DetectChatsResponse = z.object({
  chats: z.array(
    z.object({ chatId: z.string(), name: z.string(), type: z.string(), username: z.string().nullable() }),
  ),
});

export const QuickActionParams = z.object({ token: z.string().min(1).max(300) });

/** What a stored notification row has (structural: no database types in contracts). */
export interface NotificationRowLike {
  id: string;
  type: string;
  title: string;
  body: string;
  linkUrl: string | null;
  read: boolean;
  readAt: Date | null;
  metadata: unknown;
  createdAt: Date;
}

/** One row as every reader sees it: the list routes and the SSE stream alike. */
export function toNotificationView(n: NotificationRowLike): NotificationView {
  const metadata =
    n.metadata && typeof n.metadata === 'object' && !Array.isArray(n.metadata)
      ? (n.metadata as Record<string, unknown>)
      : null;
  return {
    id: n.id,
    type: n.type as NotificationType,
    title: n.title,
    body: n.body,
    linkUrl: n.linkUrl,
    read: n.read,
    readAt: n.readAt ? n.readAt.toISOString() : null,
    metadata,
    data: metadata,
    createdAt: n.createdAt.toISOString(),
  };
}
