/**
 * Notifier: consumes approval, connection, permission and security events from the durable
 * stream and delivers them (in-app rows + SSE fan-out, bot chats, push). An event is acked once
 * every destination has it or has definitively refused it; otherwise it comes back with backoff
 * and only the destinations still missing are tried again.
 */
import type { Bus, BusNames, Consumer, HandlerOutcome, StreamMessage } from '@vlt/bus';
import { AuditEventMessage } from '@vlt/contracts';
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

export function startNotifier(deps: NotifierDeps): Promise<Consumer> {
  return deps.bus.consume(
    {
      durable: deps.names.durable.notifier,
      filterSubject: deps.names.eventsWildcard,
      // Enough attempts to ride out a provider outage of several minutes at the 60 s backoff cap.
      maxDeliver: 20,
      ackWaitMs: deps.ackWaitMs ?? 30_000,
      // A slow provider must not queue every other workspace's approvals behind it. Order is not
      // kept: an outcome that overtakes its notice finds nothing to edit, and the notice is not
      // sent for an approval that is no longer pending (channelsForNotifier).
      concurrency: 8,
    },
    notificationHandler(deps),
  );
}
