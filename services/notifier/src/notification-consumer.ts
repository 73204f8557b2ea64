/**
 * Notifier: consumes approval and security events. Delivery (in-app rows + SSE, bot chats,
 * push) arrives with the notifications work; for now it records what it would notify.
 */
import type { Bus, BusNames, Consumer, HandlerOutcome, StreamMessage } from '@vlt/bus';
import { AuditEventMessage } from '@vlt/contracts';
import type { FastifyBaseLogger } from 'fastify';

const NOTIFY_ON = new Set([
  'approval_requested',
  'approval_approved',
  'approval_denied',
  'approval_expired',
  'connection_needs_reauth',
  'connection_revoked',
  'permission_requested',
]);

export function notificationHandler(deps: { logger: FastifyBaseLogger }) {
  return async (msg: StreamMessage): Promise<HandlerOutcome> => {
    const parsed = AuditEventMessage.safeParse(msg.data);
    if (!parsed.success) return { type: 'drop', reason: 'malformed' };
    if (NOTIFY_ON.has(parsed.data.action)) {
      deps.logger.info(
        { action: parsed.data.action, auditId: parsed.data.auditId, workspaceId: parsed.data.workspaceId },
        'notification event received',
      );
    }
    return { type: 'ack' };
  };
}

export function startNotifier(deps: {
  bus: Bus;
  names: BusNames;
  logger: FastifyBaseLogger;
}): Promise<Consumer> {
  return deps.bus.consume(
    { durable: deps.names.durable.notifier, filterSubject: deps.names.eventsWildcard },
    notificationHandler(deps),
  );
}
