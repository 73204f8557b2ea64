/**
 * A member's in-app notifications (rows written by the notifier, one per member) and their
 * push subscriptions. Everything is scoped to the caller: another member's rows are not found.
 */
import { Errors } from '@vlt/service-kit';
import { toNotificationView as notificationView } from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';

type Member = { userId: string; workspaceId: string };
type Row = Prisma.NotificationGetPayload<object>;

export { notificationView };

/** Keyset cursor over (createdAt, id) descending: stable while new rows arrive. */
function encodeCursor(n: Row): string {
  return Buffer.from(`${n.createdAt.toISOString()}|${n.id}`).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  const [at, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const createdAt = new Date(at ?? '');
  if (!id || Number.isNaN(createdAt.getTime()) || !/^[0-9a-f-]{36}$/.test(id)) {
    throw Errors.badRequest('invalid cursor');
  }
  return { createdAt, id };
}

export async function listNotifications(
  deps: ControlPlaneDeps,
  member: Member,
  q: { unread?: 'true' | 'false' | undefined; cursor?: string | undefined; limit: number },
) {
  const after = q.cursor ? decodeCursor(q.cursor) : null;
  const rows = await deps.prisma.notification.findMany({
    where: {
      workspaceId: member.workspaceId,
      userId: member.userId,
      ...(q.unread === 'true' && { read: false }),
      ...(after && {
        OR: [{ createdAt: { lt: after.createdAt } }, { createdAt: after.createdAt, id: { lt: after.id } }],
      }),
    },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: q.limit + 1,
  });
  const page = rows.slice(0, q.limit);
  return {
    notifications: page.map(notificationView),
    nextCursor: rows.length > q.limit ? encodeCursor(page[page.length - 1]!) : null,
  };
}

export async function markRead(deps: ControlPlaneDeps, member: Member, id: string) {
  const now = deps.now();
  await deps.prisma.notification.updateMany({
    where: { id, userId: member.userId, workspaceId: member.workspaceId, read: false },
    data: { read: true, readAt: now },
  });
  const row = await deps.prisma.notification.findFirst({
    where: { id, userId: member.userId, workspaceId: member.workspaceId },
  });
  if (!row) throw Errors.notFound('notification not found');
  return { notification: notificationView(row) };
}

export async function markAllRead(deps: ControlPlaneDeps, member: Member) {
  const { count } = await deps.prisma.notification.updateMany({
    where: { userId: member.userId, workspaceId: member.workspaceId, read: false },
    data: { read: true, readAt: deps.now() },
  });
  return { updated: count };
}

/** Devices per member: enough for anyone, bounded for the push fan-out. */
export const MAX_PUSH_SUBSCRIPTIONS_PER_USER = 20;

type SubRow = Prisma.PushSubscriptionGetPayload<object>;
const subView = (s: SubRow) => ({
  id: s.id,
  expoPushToken: s.expoPushToken,
  platform: s.platform,
  deviceName: s.deviceName,
  createdAt: s.createdAt.toISOString(),
});

export async function createPushSubscription(
  deps: ControlPlaneDeps,
  member: Member,
  body: { token: string; platform: 'ios' | 'android' | 'web'; deviceName?: string | undefined },
) {
  const existing = await deps.prisma.pushSubscription.findUnique({
    where: { userId_expoPushToken: { userId: member.userId, expoPushToken: body.token } },
  });
  if (!existing) {
    const count = await deps.prisma.pushSubscription.count({ where: { userId: member.userId } });
    if (count >= MAX_PUSH_SUBSCRIPTIONS_PER_USER) {
      throw Errors.conflict(`at most ${MAX_PUSH_SUBSCRIPTIONS_PER_USER} devices per user; remove one first`);
    }
  }
  // The same device registering again (new app start) updates its record instead of adding one.
  const row = await deps.prisma.pushSubscription.upsert({
    where: { userId_expoPushToken: { userId: member.userId, expoPushToken: body.token } },
    create: {
      userId: member.userId,
      workspaceId: member.workspaceId,
      expoPushToken: body.token,
      platform: body.platform,
      deviceName: body.deviceName ?? null,
    },
    update: { workspaceId: member.workspaceId, platform: body.platform, deviceName: body.deviceName ?? null },
  });
  return { subscription: subView(row) };
}

export async function listPushSubscriptions(deps: ControlPlaneDeps, member: Member) {
  const rows = await deps.prisma.pushSubscription.findMany({
    where: { userId: member.userId, workspaceId: member.workspaceId },
    orderBy: { createdAt: 'asc' },
  });
  return { subscriptions: rows.map(subView) };
}

export async function deletePushSubscription(deps: ControlPlaneDeps, member: Member, id: string) {
  const { count } = await deps.prisma.pushSubscription.deleteMany({
    where: { id, userId: member.userId, workspaceId: member.workspaceId },
  });
  if (count === 0) throw Errors.notFound('push subscription not found');
  return { deleted: true as const, id };
}
