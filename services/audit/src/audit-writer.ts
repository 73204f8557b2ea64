/**
 * The only writer of audit rows. Consumes the event stream with a durable consumer and
 * inserts each event keyed by its auditId, acking only after the commit: a crash before the
 * ack means redelivery, and redelivery of a stored event is a no-op.
 */
import { randomUUID } from 'node:crypto';
import {
  batchItemContext,
  inBatchItem,
  inBatchSpan,
  type BatchItemContext,
  type Bus,
  type BusNames,
  type Consumer,
  type HandlerOutcome,
  type StreamMessage,
} from '@vlt/bus';
import { AuditEventMessage } from '@vlt/contracts';
import type { Sql } from '@vlt/db';
import { storableJson, storableText } from '@vlt/service-kit';
import type { FastifyBaseLogger } from 'fastify';

/**
 * The rows of `audit_events` as one JSON document, the single parameter of the insert. One
 * JSON.stringify rather than a text array per column: the driver escaped each array element
 * (the metadata's JSON a second time) in JavaScript, about 5 % of the audit service's CPU in a
 * profile; the writer's own CPU per stored event fell by about a sixth.
 *
 * Every decision is recorded whatever its content: text PostgreSQL cannot store (NUL, lone
 * surrogates in an agent's header name, say) is replaced, never a reason to drop the event. In
 * JSON a lone surrogate is an escape PostgreSQL refuses, so every text goes through it.
 */
function auditRows(events: readonly AuditEventMessage[]): string {
  const optional = (s: string | null) => (s === null ? null : storableText(s));
  return JSON.stringify(
    events.map((e) => ({
      id: randomUUID(),
      audit_id: storableText(e.auditId),
      ts: storableText(e.timestamp),
      actor: storableText(e.actor),
      workspace_id: optional(e.workspaceId),
      agent_id: optional(e.agentId),
      connection_id: optional(e.connectionId),
      action: e.action,
      decision: e.decision,
      metadata: storableJson(e.metadata),
    })),
  );
}

/**
 * Inserts the events with one statement whatever their number (one parameter, so the
 * statement text and its plan never change), skipping any stored before. Raw SQL rather
 * than Prisma's createMany: the ORM compiled a new query per batch size and spent more CPU on
 * that than the database spent storing the rows (bench/gateway.ts profile, ADR 0061).
 * Resolves with the number of rows written.
 */
async function insertAuditEvents(sql: Sql, events: readonly AuditEventMessage[]): Promise<number> {
  const rows = await sql<{ audit_id: string }>`
    INSERT INTO audit_events
      (id, audit_id, "timestamp", actor, workspace_id, agent_id, connection_id, action, decision, metadata)
    SELECT u.id, u.audit_id, u.ts, u.actor, u.workspace_id, u.agent_id,
           u.connection_id, u.action, u.decision, u.metadata
      FROM json_to_recordset(${auditRows(events)}::json)
        AS u(id uuid, audit_id text, ts timestamptz, actor text, workspace_id text, agent_id text,
             connection_id text, action text, decision text, metadata jsonb)
    ON CONFLICT (audit_id) DO NOTHING
    RETURNING audit_id`;
  return rows.length;
}

/** Stores one event; false when it was stored before (idempotent by auditId). */
export async function storeAuditEvent(sql: Sql, e: AuditEventMessage): Promise<boolean> {
  return (await insertAuditEvents(sql, [e])) === 1;
}

/**
 * How long a batch collects rows when the writer is not busy (a busy one fills its batch first,
 * see AUDIT_IN_FLIGHT). Each statement has a fixed cost far above its rows' (the embedded
 * database: several milliseconds of CPU), so the window sets how many rows share it: 100 ms
 * saved the all-in-one about 0.7 ms of CPU per brokered call at c=1 (ADR 0080). An audit row
 * appears at most this much later; nobody waits on one, and the ack still follows the commit.
 */
const BATCH_WINDOW_MS = 100;

/**
 * Events the writer holds at once, unacked (the bus hands it no more). A batch this size can
 * grow no further, so it is stored at once rather than at the end of the window: the window
 * would otherwise cap the writer at this many events per window.
 */
export const AUDIT_IN_FLIGHT = 64;

/**
 * Events handled at the same time are stored with one multi-row insert (idempotent by
 * auditId): each handler resolves once the statement holding its row committed, so every ack
 * still follows its commit. A batch that fails is retried row by row, so one bad row cannot
 * hold back the others.
 */
export class AuditBatcher {
  private queue: Array<{ e: AuditEventMessage; ctx: BatchItemContext; done: (err?: unknown) => void }> = [];
  /** The end of the current collection window, while one runs. */
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sql: Sql,
    /** Stored at once when this many wait: the most the consumer hands over before acks. */
    private readonly maxBatch = AUDIT_IN_FLIGHT,
  ) {}

  store(e: AuditEventMessage): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({
        e,
        // Each event's trace links to the one statement that stores it (and back).
        ctx: batchItemContext(),
        done: (err) => (err === undefined ? resolve() : reject(err)),
      });
      if (this.queue.length >= this.maxBatch) void this.flush();
      // Collect what arrives meanwhile: one statement for many rows costs a fraction of one
      // statement each.
      else this.timer ??= setTimeout(() => void this.flush(), BATCH_WINDOW_MS);
    });
  }

  private async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.queue.splice(0, this.maxBatch);
    if (batch.length === 0) return;
    if (this.queue.length > 0) this.timer = setTimeout(() => void this.flush(), BATCH_WINDOW_MS);
    try {
      await inBatchSpan(
        'store audit events',
        batch.map((b) => b.ctx),
        { 'db.operation.name': 'INSERT', 'db.collection.name': 'audit_events' },
        () =>
          insertAuditEvents(
            this.sql,
            batch.map((b) => b.e),
          ),
      );
      for (const b of batch) b.done();
    } catch {
      await Promise.all(
        batch.map((b) =>
          inBatchItem(b.ctx, () => storeAuditEvent(this.sql, b.e)).then(
            () => b.done(),
            (err: unknown) => b.done(err ?? new Error('failed')),
          ),
        ),
      );
    }
  }
}

export function auditHandler(deps: { sql: Sql; logger: FastifyBaseLogger }) {
  const batcher = new AuditBatcher(deps.sql);
  return async (msg: StreamMessage): Promise<HandlerOutcome> => {
    const parsed = AuditEventMessage.safeParse(msg.data);
    if (!parsed.success) {
      // A malformed event will never become valid: drop it, loudly.
      deps.logger.error({ subject: msg.subject, msgId: msg.msgId }, 'dropping malformed audit event');
      return { type: 'drop', reason: 'malformed' };
    }
    try {
      await batcher.store(parsed.data);
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
 * Up to AUDIT_IN_FLIGHT events in flight are stored per statement. A batch insert takes
 * milliseconds, so 5 s of ack wait covers a full prefetch while letting events caught in flight
 * by a crash come back quickly.
 */
export function startAuditWriter(deps: {
  bus: Bus;
  names: BusNames;
  sql: Sql;
  logger: FastifyBaseLogger;
}): Promise<Consumer> {
  return deps.bus.consume(
    {
      durable: deps.names.durable.audit,
      filterSubject: deps.names.eventsWildcard,
      maxDeliver: 100,
      ackWaitMs: 5_000,
      concurrency: AUDIT_IN_FLIGHT,
    },
    auditHandler(deps),
  );
}
