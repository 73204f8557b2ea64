/**
 * The one way a control-plane change commits: the rows, the audit events and the data-plane
 * cache updates it implies go in one transaction (through the outbox), and the caller is
 * answered once they were published — so an admin who disables an agent gets the response after
 * the data planes were told. See outbox.ts for delivery.
 */
import { uuidv7 } from '@vlt/service-kit';
import type { AuditEventMessage } from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../deps.js';
import { enqueueOutbox, type OutboxItem } from './outbox.js';

type Tx = Prisma.TransactionClient;

/** Adds messages to the change; they commit with it, in the order given. */
export type Emit = (...items: OutboxItem[]) => void;

export interface CommitOptions {
  /**
   * Wait (bounded) for publication before returning — the default. `false` only nudges the
   * relay: for changes whose readers can also ask the control plane on a cache miss.
   */
  settle?: boolean;
}

/**
 * Runs `work` in a transaction; what it emits is enqueued in the same transaction. Nothing is
 * emitted when `work` throws (the transaction rolls back with its rows).
 */
export async function commitChange<T>(
  deps: Pick<ControlPlaneDeps, 'prisma' | 'names' | 'outbox'>,
  work: (tx: Tx, emit: Emit) => Promise<T>,
  options: CommitOptions = {},
): Promise<T> {
  let emitted = 0;
  const result = await deps.prisma.$transaction(async (tx) => {
    const items: OutboxItem[] = [];
    const out = await work(tx, (...more) => void items.push(...more));
    await enqueueOutbox(tx, deps.names, items);
    emitted = items.length;
    return out;
  });
  if (emitted > 0) {
    if (options.settle === false) deps.outbox.kick();
    else await deps.outbox.settle();
  }
  return result;
}

/** An audit event stamped now, with a time-ordered id unless one is given. */
export function auditEvent(
  deps: Pick<ControlPlaneDeps, 'now'>,
  e: Omit<AuditEventMessage, 'v' | 'auditId' | 'timestamp'> & { auditId?: string },
): AuditEventMessage {
  const now = deps.now();
  return { v: 1, auditId: e.auditId ?? uuidv7(now.getTime()), timestamp: now.toISOString(), ...e };
}

/** The outbox item that records `event`. */
export function audited(event: AuditEventMessage): OutboxItem {
  return { kind: 'event', event };
}
