/**
 * The only writer of audit rows. Consumes the event stream with a durable consumer and
 * inserts each event keyed by its auditId, acking only after the commit: a crash before the
 * ack means redelivery, and redelivery of a stored event is a no-op.
 */
import type { Bus, BusNames, Consumer, HandlerOutcome, StreamMessage } from '@vlt/bus';
import { AuditEventMessage } from '@vlt/contracts';
import type { Prisma, PrismaClient } from '@vlt/db';
import { storableJson, storableText } from '@vlt/service-kit';
import type { FastifyBaseLogger } from 'fastify';

/**
 * Every decision is recorded whatever its content: text PostgreSQL cannot store (NUL, lone
 * surrogates in an agent's header name, say) is replaced, never a reason to drop the event.
 */
export async function storeAuditEvent(prisma: PrismaClient, e: AuditEventMessage): Promise<boolean> {
  const res = await prisma.auditEvent.createMany({
    data: [
      {
        auditId: e.auditId,
        timestamp: new Date(e.timestamp),
        actor: storableText(e.actor),
        workspaceId: e.workspaceId,
        agentId: e.agentId,
        connectionId: e.connectionId,
        action: e.action,
        decision: e.decision,
        metadata: storableJson(e.metadata) as Prisma.InputJsonValue,
      },
    ],
    skipDuplicates: true,
  });
  return res.count === 1;
}

export function auditHandler(deps: { prisma: PrismaClient; logger: FastifyBaseLogger }) {
  return async (msg: StreamMessage): Promise<HandlerOutcome> => {
    const parsed = AuditEventMessage.safeParse(msg.data);
    if (!parsed.success) {
      // A malformed event will never become valid: drop it, loudly.
      deps.logger.error({ subject: msg.subject, msgId: msg.msgId }, 'dropping malformed audit event');
      return { type: 'drop', reason: 'malformed' };
    }
    try {
      await storeAuditEvent(deps.prisma, parsed.data);
      return { type: 'ack' };
    } catch (err) {
      deps.logger.warn(
        { err: (err as Error).message, auditId: parsed.data.auditId },
        'audit write failed; retrying',
      );
      return { type: 'retry', delayMs: Math.min(30_000, 500 * msg.deliveryCount) };
    }
  };
}

/**
 * An insert takes milliseconds, so 5 s of ack wait covers a full prefetch batch while letting
 * events caught in flight by a crash come back quickly.
 */
export function startAuditWriter(deps: {
  bus: Bus;
  names: BusNames;
  prisma: PrismaClient;
  logger: FastifyBaseLogger;
}): Promise<Consumer> {
  return deps.bus.consume(
    {
      durable: deps.names.durable.audit,
      filterSubject: deps.names.eventsWildcard,
      maxDeliver: 100,
      ackWaitMs: 5_000,
    },
    auditHandler(deps),
  );
}
