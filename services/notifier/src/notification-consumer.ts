/**
 * Notifier: consumes approval, connection, permission and security events from the durable
 * stream and delivers them (in-app rows + SSE fan-out, bot chats, push). An event is acked once
 * every destination has it or has definitively refused it; otherwise it comes back with backoff
 * and only the destinations still missing are tried again.
 */
import type { Bus, BusNames, Consumer, HandlerOutcome, StreamMessage } from '@vlt/bus';
import { AuditAction, AuditEventMessage, eventCategory } from '@vlt/contracts';
import type { PrismaClient } from '@vlt/db';
import type { Transport } from '@vlt/notify';
import type { FastifyBaseLogger } from 'fastify';
import { deliverPlan, outcomeOf } from './delivery.js';
import { NOTIFIER_ACTIONS, planNotification, planSecurityAlert } from './plan.js';
import { createSecurityAlertDetector } from './security-alerts.js';

export interface NotifierDeps {
  bus: Bus;
  names: BusNames;
  logger: FastifyBaseLogger;
  prisma: PrismaClient;
  publicBaseUrl: string;
  pushApiUrl: string;
  /** Per provider call (default 10 s). */
  deliveryTimeoutMs?: number;
  /** How requests reach chat and push providers (default: undici). */
  transport?: Transport;
  /** JetStream ack wait for the notifier's consumer (default 30 s). */
  ackWaitMs?: number;
}

export function notificationHandler(deps: NotifierDeps) {
  const detector = createSecurityAlertDetector();
  // An event JetStream gave us again while we still work on it (its ack wait ran out): let the
  // first attempt finish, and look again later.
  const inFlight = new Set<string>();
  const ctx = { publicBaseUrl: deps.publicBaseUrl };
  const delivery = {
    prisma: deps.prisma,
    bus: deps.bus,
    names: deps.names,
    logger: deps.logger,
    pushApiUrl: deps.pushApiUrl,
    ...(deps.deliveryTimeoutMs !== undefined && { timeoutMs: deps.deliveryTimeoutMs }),
    ...(deps.transport && { transport: deps.transport }),
  };
  return async (msg: StreamMessage): Promise<HandlerOutcome> => {
    // The subject ends with the action (eventSubject): skip the events nobody is told of
    // before paying for their validation.
    if (!NOTIFIER_ACTIONS.has(msg.subject.slice(msg.subject.lastIndexOf('.') + 1))) return { type: 'ack' };
    const parsed = AuditEventMessage.safeParse(msg.data);
    if (!parsed.success) return { type: 'drop', reason: 'malformed' };
    const e = parsed.data;
    const workspaceId = e.workspaceId;
    if (!workspaceId) return { type: 'ack' };
    if (inFlight.has(e.auditId)) return { type: 'retry', delayMs: 1_000 };
    inFlight.add(e.auditId);
    try {
      return await handle(e, workspaceId, msg.deliveryCount);
    } finally {
      inFlight.delete(e.auditId);
    }
  };

  async function handle(
    e: AuditEventMessage,
    workspaceId: string,
    deliveryCount: number,
  ): Promise<HandlerOutcome> {
    const jobs: { id: string; plan: ReturnType<typeof planSecurityAlert> }[] = [];
    const plan = planNotification(e, ctx);
    if (plan) jobs.push({ id: e.auditId, plan });
    // The detector sees each event once per process; a redelivery must not count a denial twice.
    const alert = deliveryCount === 1 ? detector.check(e) : null;
    if (alert) jobs.push({ id: `${e.auditId}:alert`, plan: planSecurityAlert(alert, ctx) });
    if (jobs.length === 0) return { type: 'ack' };
    const retry: string[] = [];
    for (const job of jobs) {
      try {
        const r = await deliverPlan(delivery, { id: job.id, workspaceId }, job.plan);
        retry.push(...r.retry);
      } catch (err) {
        // The in-app step (our database) failed: everything comes back.
        deps.logger.warn(
          { auditId: e.auditId, err: err instanceof Error ? err.message : 'error' },
          'notification not stored; will retry',
        );
        retry.push('in-app');
      }
    }
    return outcomeOf({ retry, inAppCreated: 0 }, deliveryCount);
  }
}

/**
 * The notifier's subscriptions: one durable per stream subject it acts on, so the broker never
 * delivers it the execution traffic (most of the stream). A category whose every action is
 * wanted is one wildcard. NATS 2.9 gives a consumer one filter subject, hence several durables.
 */
export function notifierSubscriptions(names: BusNames): Array<{ durable: string; filterSubject: string }> {
  const byCategory = new Map<string, AuditAction[]>();
  for (const action of AuditAction.options) {
    const category = eventCategory(action);
    byCategory.set(category, [...(byCategory.get(category) ?? []), action]);
  }
  const out: Array<{ durable: string; filterSubject: string }> = [];
  for (const [category, actions] of byCategory) {
    const wanted = actions.filter((a) => NOTIFIER_ACTIONS.has(a));
    if (wanted.length === actions.length) {
      out.push({
        durable: `${names.durable.notifier}-${category}`,
        filterSubject: names.eventSubject(category, '>'),
      });
    } else {
      for (const action of wanted)
        out.push({
          durable: `${names.durable.notifier}-${action}`,
          filterSubject: names.eventSubject(category, action),
        });
    }
  }
  return out;
}

/**
 * Where each subscription's durable starts when this call creates it (an existing durable keeps
 * its own position; undefined: at the oldest event kept).
 *  - An earlier release read the whole stream with one durable (`names.durable.notifier`): while
 *    it exists, every new durable starts right after what it had finished (ADR 0065).
 *  - A notifier has run before (one of its durables exists) and this release subscribes to
 *    something new: that durable starts with the events published from now on. The stream keeps
 *    days of events, and a first-time subscription must not page reviewers about all of them
 *    (a week-old security alert); the release before did not notify them either.
 *  - No notifier has ever run here: everything kept, so nothing produced before its first start
 *    goes unnoticed.
 */
async function startSequences(
  bus: Bus,
  retiredFloor: number | null,
  subs: ReadonlyArray<{ durable: string }>,
): Promise<Array<number | undefined>> {
  if (retiredFloor !== null) return subs.map(() => retiredFloor + 1);
  const floors = await Promise.all(subs.map((s) => bus.durableAckFloor(s.durable)));
  if (floors.every((f) => f === null)) return subs.map(() => undefined);
  const fromNow = (await bus.lastEventSequence()) + 1;
  return floors.map((f) => (f === null ? fromNow : undefined));
}

/**
 * Starts the notifier's consumers, one durable per subscription (see `startSequences` for where
 * a new one starts). The single durable of an earlier release is removed once they all exist;
 * events it had finished out of order may come again, and deliveries are idempotent per event.
 */
export async function startNotifier(deps: NotifierDeps): Promise<Consumer> {
  const handler = notificationHandler(deps);
  const retired = deps.names.durable.notifier;
  const floor = await deps.bus.durableAckFloor(retired);
  const subs = notifierSubscriptions(deps.names);
  const starts = await startSequences(deps.bus, floor, subs);
  const consumers: Consumer[] = [];
  try {
    for (const [i, sub] of subs.entries()) {
      const startSequence = starts[i];
      consumers.push(
        await deps.bus.consume(
          {
            ...sub,
            // Enough attempts to ride out a provider outage of several minutes at the 60 s backoff cap.
            maxDeliver: 20,
            ackWaitMs: deps.ackWaitMs ?? 30_000,
            // A slow provider must not queue every other workspace's approvals behind it. Order is
            // not kept: an outcome that overtakes its notice finds nothing to edit, and the notice is
            // not sent for an approval that is no longer pending (channelsForNotifier).
            concurrency: 8,
            ...(startSequence !== undefined && { startSequence }),
          },
          handler,
        ),
      );
    }
  } catch (err) {
    await Promise.all(consumers.map((c) => c.stop()));
    throw err;
  }
  if (floor !== null) {
    await deps.bus.deleteDurable(retired);
    deps.logger.info({ durable: retired, floor }, 'notifier: replaced the single durable by one per subject');
  }
  return {
    async stop() {
      await Promise.all(consumers.map((c) => c.stop()));
    },
    async pending() {
      const each = await Promise.all(consumers.map((c) => c.pending()));
      return each.reduce((a, b) => a + b, 0);
    },
  };
}
