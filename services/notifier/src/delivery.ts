/**
 * Carries out a notification plan, idempotently per (event, destination):
 *  - in-app rows, one per member, created once (unique on event and user), then broadcast to
 *    every control-plane replica's SSE streams;
 *  - chat channels (verified, enabled; tokens and quick-action links from the control plane),
 *    each with its own delivery row, so a redelivered event skips what was sent and retries
 *    what failed, and one channel's outage never holds back another;
 *  - push to every registered device of the workspace, dropping unregistered tokens.
 * Any retryable failure makes the event come back later (with backoff); the rest is acked.
 */
import type { Bus, BusNames, HandlerOutcome } from '@vlt/bus';
import {
  NotifierChannelsResponse,
  toNotificationView,
  type NotificationBroadcast,
  type NotifierChannel,
} from '@vlt/contracts';
import type { Prisma, PrismaClient } from '@vlt/db';
import { chatA, chatB, DeliveryError, sendPush, type Transport, type UrlButton } from '@vlt/notify';
import type { NotificationPlan } from './plan.js';

export interface DeliveryDeps {
  prisma: PrismaClient;
  bus: Bus;
  names: BusNames;
  logger: { warn(obj: object, msg?: string): void; info(obj: object, msg?: string): void };
  pushApiUrl: string;
  /** Per provider call. */
  timeoutMs?: number;
  /** How requests reach the providers (default: undici; the all-in-one passes its upstream client). */
  transport?: Transport;
}

export interface DeliveryOutcome {
  /** Destinations that failed in a way a retry may fix. */
  retry: string[];
  inAppCreated: number;
}

const errorText = (err: unknown) =>
  err instanceof DeliveryError ? err.message : err instanceof Error ? err.name : 'delivery failed';

export async function deliverPlan(
  deps: DeliveryDeps,
  event: { id: string; workspaceId: string },
  plan: NotificationPlan,
): Promise<DeliveryOutcome> {
  const out: DeliveryOutcome = { retry: [], inAppCreated: 0 };
  // In-app first: it is the record, and it must not depend on any outside provider.
  out.inAppCreated = await deliverInApp(deps, event, plan);
  const results = await Promise.allSettled([
    plan.chat ? deliverChat(deps, event, plan.chat) : Promise.resolve([] as string[]),
    plan.push ? deliverPush(deps, event, plan.push) : Promise.resolve([] as string[]),
  ]);
  for (const r of results) {
    if (r.status === 'fulfilled') out.retry.push(...r.value);
    else {
      // Our own side failed (database, bus): the whole event comes back.
      deps.logger.warn({ eventId: event.id, err: errorText(r.reason) }, 'notification delivery failed');
      out.retry.push('internal');
    }
  }
  return out;
}

async function deliverInApp(
  deps: DeliveryDeps,
  event: { id: string; workspaceId: string },
  plan: NotificationPlan,
): Promise<number> {
  const members = await deps.prisma.membership.findMany({
    where: { workspaceId: event.workspaceId },
    select: { userId: true },
  });
  if (members.length === 0) return 0;
  const created = await deps.prisma.notification.createManyAndReturn({
    data: members.map((m) => ({
      workspaceId: event.workspaceId,
      userId: m.userId,
      type: plan.inApp.type,
      title: plan.inApp.title,
      body: plan.inApp.body,
      linkUrl: plan.inApp.linkUrl,
      metadata: plan.inApp.metadata as Prisma.InputJsonValue,
      sourceEventId: event.id,
    })),
    // A redelivered event finds its rows and creates none: nothing is shown twice.
    skipDuplicates: true,
  });
  if (created.length > 0) {
    const message: NotificationBroadcast = {
      v: 1,
      workspaceId: event.workspaceId,
      items: created.map((n) => ({ userId: n.userId!, notification: toNotificationView(n) })),
    };
    // Live view only: a stream that misses it still finds the row in the list.
    await deps.bus.broadcast(deps.names.broadcast.notifications(event.workspaceId), message).catch((err) => {
      deps.logger.warn({ eventId: event.id, err: errorText(err) }, 'notification broadcast failed');
    });
  }
  return created.length;
}

type Claim = { kind: 'mine'; id: string } | { kind: 'done' } | { kind: 'busy' };

/**
 * Takes (event, destination) for one delivery attempt. A lease, not a flag: a notifier that dies
 * mid-send leaves the row `sending` until the lease ends, then a redelivery may take it; while it
 * runs, a second handler of the same event (JetStream redelivered it after the ack wait, here or
 * on another replica) finds it `busy` instead of sending a second message.
 */
async function claim(
  deps: DeliveryDeps,
  event: { id: string; workspaceId: string },
  destination: string,
  approvalId: string | null,
): Promise<Claim> {
  const row = await deps.prisma.notificationDelivery.upsert({
    where: { eventId_destination: { eventId: event.id, destination } },
    create: { eventId: event.id, destination, workspaceId: event.workspaceId, approvalId },
    update: {},
  });
  if (row.status === 'sent' || row.status === 'failed' || row.status === 'skipped') return { kind: 'done' };
  const now = new Date();
  const taken = await deps.prisma.notificationDelivery.updateMany({
    where: {
      id: row.id,
      OR: [{ status: 'pending' }, { status: 'sending', leaseUntil: { lt: now } }],
    },
    data: {
      status: 'sending',
      leaseUntil: new Date(now.getTime() + leaseMs(deps)),
      attempts: { increment: 1 },
    },
  });
  return taken.count === 1 ? { kind: 'mine', id: row.id } : { kind: 'busy' };
}

/** Longer than one provider call can take, so a live attempt never loses its lease. */
const leaseMs = (deps: DeliveryDeps) => (deps.timeoutMs ?? 5_000) + 2_000;

async function settle(
  deps: DeliveryDeps,
  id: string,
  result: { ok: true; messageRef?: Prisma.InputJsonValue } | { ok: false; error: string; final: boolean },
) {
  await deps.prisma.notificationDelivery.update({
    where: { id },
    data: result.ok
      ? {
          leaseUntil: null,
          status: 'sent',
          sentAt: new Date(),
          lastError: null,
          ...(result.messageRef && { messageRef: result.messageRef }),
        }
      : { status: result.final ? 'failed' : 'pending', leaseUntil: null, lastError: result.error },
  });
}

async function channelStatus(deps: DeliveryDeps, channelId: string, error: string | null) {
  await deps.prisma.notificationChannel
    .updateMany({
      where: { id: channelId },
      data: error
        ? { lastDeliveryStatus: 'failing', lastDeliveryError: error, lastDeliveryAt: new Date() }
        : { lastDeliveryStatus: 'delivered', lastDeliveryError: null, lastDeliveryAt: new Date() },
    })
    .catch(() => undefined);
}

async function channelsFor(
  deps: DeliveryDeps,
  req: { workspaceId: string; approvalId?: string; channelIds?: string[] },
): Promise<NotifierChannel[]> {
  const raw = await deps.bus.request(
    deps.names.rpc.notifierChannels,
    { v: 1, ...req },
    { timeoutMs: 10_000 },
  );
  return NotifierChannelsResponse.parse(raw).channels;
}

type Net = Pick<DeliveryDeps, 'timeoutMs' | 'transport'>;

function ctxOf(ch: NotifierChannel, net: Net) {
  return {
    apiUrl: ch.apiUrl,
    token: ch.token,
    transport: net.transport,
    ...(net.timeoutMs !== undefined && { timeoutMs: net.timeoutMs }),
  };
}

/** Sends to one channel; returns the message reference for a later edit. */
async function send(ch: NotifierChannel, net: Net, text: string, buttons: UrlButton[], link?: UrlButton) {
  const ctx = ctxOf(ch, net);
  if (ch.channelType === 'chatbot_a') {
    const all = link ? [...buttons, link] : buttons;
    const ref = await chatA.sendMessage(ctx, { chatId: ch.target, text, buttons: all });
    return { chatId: ref.chatId, messageId: ref.messageId };
  }
  const ref = await chatB.postMessage(ctx, { channel: ch.target, text, buttons, ...(link && { link }) });
  return { channel: ref.channel, ts: ref.ts };
}

async function edit(ch: NotifierChannel, net: Net, ref: Record<string, unknown>, text: string) {
  const ctx = ctxOf(ch, net);
  if (ch.channelType === 'chatbot_a') {
    await chatA.editMessageText(ctx, {
      chatId: String(ref.chatId),
      messageId: Number(ref.messageId),
      text,
    });
  } else {
    await chatB.updateMessage(ctx, { channel: String(ref.channel), ts: String(ref.ts), text });
  }
}

async function deliverChat(
  deps: DeliveryDeps,
  event: { id: string; workspaceId: string },
  chat: NonNullable<NotificationPlan['chat']>,
): Promise<string[]> {
  const retry: string[] = [];
  if (chat.kind === 'approval_outcome') {
    // Edit every notice that went out for this approval, wherever it went.
    const notices = await deps.prisma.notificationDelivery.findMany({
      where: { approvalId: chat.approvalId, status: 'sent', destination: { startsWith: 'chat:' } },
    });
    if (notices.length === 0) return retry;
    const byId = new Map(notices.map((n) => [n.destination.slice('chat:'.length), n]));
    const channels = await channelsFor(deps, {
      workspaceId: event.workspaceId,
      channelIds: [...byId.keys()],
    });
    // Channels in parallel: one provider's outage or slowness never holds back another.
    await Promise.all(
      channels.map(async (ch) => {
        const notice = byId.get(ch.id);
        if (!notice?.messageRef) return;
        const row = await claim(deps, event, `edit:${ch.id}`, chat.approvalId);
        if (row.kind === 'busy') retry.push(`edit:${ch.id}`);
        if (row.kind !== 'mine') return;
        try {
          await edit(ch, deps, notice.messageRef as Record<string, unknown>, chat.text);
          await settle(deps, row.id, { ok: true });
        } catch (err) {
          const retryable = !(err instanceof DeliveryError) || err.retryable;
          await settle(deps, row.id, { ok: false, error: errorText(err), final: !retryable });
          await channelStatus(deps, ch.id, errorText(err));
          if (retryable) retry.push(`edit:${ch.id}`);
        }
      }),
    );
    return retry;
  }

  const channels = await channelsFor(deps, {
    workspaceId: event.workspaceId,
    ...(chat.kind === 'approval_notice' && { approvalId: chat.approvalId }),
  });
  await Promise.all(
    channels.map(async (ch) => {
      const destination = `chat:${ch.id}`;
      const row = await claim(
        deps,
        event,
        destination,
        chat.kind === 'approval_notice' ? chat.approvalId : null,
      );
      if (row.kind === 'busy') retry.push(destination);
      if (row.kind !== 'mine') return;
      if (chat.kind === 'approval_notice' && !ch.quickActions) {
        // The approval was decided or expired before the notice could go out: nothing to ask.
        await deps.prisma.notificationDelivery.update({
          where: { id: row.id },
          data: { status: 'skipped', leaseUntil: null },
        });
        return;
      }
      const buttons: UrlButton[] = ch.quickActions
        ? [
            { text: 'Approve', url: ch.quickActions.approveUrl },
            { text: 'Deny', url: ch.quickActions.denyUrl },
          ]
        : [];
      const link = chat.kind === 'alert' ? { text: 'Open activity log', url: chat.linkUrl } : undefined;
      try {
        const ref = await send(ch, deps, chat.text, buttons, link);
        await settle(deps, row.id, { ok: true, messageRef: ref });
        await channelStatus(deps, ch.id, null);
      } catch (err) {
        const retryable = !(err instanceof DeliveryError) || err.retryable;
        deps.logger.warn(
          { eventId: event.id, channelId: ch.id, err: errorText(err), retryable },
          'chat delivery failed',
        );
        await settle(deps, row.id, { ok: false, error: errorText(err), final: !retryable });
        await channelStatus(deps, ch.id, errorText(err));
        if (retryable) retry.push(destination);
      }
    }),
  );
  return retry;
}

async function deliverPush(
  deps: DeliveryDeps,
  event: { id: string; workspaceId: string },
  push: NonNullable<NotificationPlan['push']>,
): Promise<string[]> {
  const subs = await deps.prisma.pushSubscription.findMany({
    where: { workspaceId: event.workspaceId },
    select: { id: true, expoPushToken: true },
    take: 5_000,
  });
  if (subs.length === 0) return [];
  const row = await claim(deps, event, 'push', null);
  if (row.kind === 'busy') return ['push'];
  if (row.kind !== 'mine') return [];
  try {
    const { unregistered } = await sendPush(
      deps.pushApiUrl,
      subs.map((s) => ({
        to: s.expoPushToken,
        title: push.title,
        body: push.body,
        data: { type: push.type, url: push.url },
      })),
      { transport: deps.transport, ...(deps.timeoutMs !== undefined && { timeoutMs: deps.timeoutMs }) },
    );
    if (unregistered.length) {
      await deps.prisma.pushSubscription.deleteMany({
        where: { workspaceId: event.workspaceId, expoPushToken: { in: unregistered } },
      });
      deps.logger.info(
        { eventId: event.id, removed: unregistered.length },
        'push subscriptions no longer registered removed',
      );
    }
    await settle(deps, row.id, { ok: true });
    return [];
  } catch (err) {
    const retryable = !(err instanceof DeliveryError) || err.retryable;
    deps.logger.warn({ eventId: event.id, err: errorText(err), retryable }, 'push delivery failed');
    await settle(deps, row.id, { ok: false, error: errorText(err), final: !retryable });
    return retryable ? ['push'] : [];
  }
}

/** 1 s, 2 s, 4 s … at most 60 s between attempts. */
export function retryDelayMs(deliveryCount: number): number {
  return Math.min(60_000, 1_000 * 2 ** Math.max(0, deliveryCount - 1));
}

export function outcomeOf(result: DeliveryOutcome, deliveryCount: number): HandlerOutcome {
  return result.retry.length ? { type: 'retry', delayMs: retryDelayMs(deliveryCount) } : { type: 'ack' };
}
