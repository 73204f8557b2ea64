/**
 * Transactional outbox. A control-plane change and the messages it implies (audit events,
 * KV snapshot updates for data planes) commit in one transaction; the relay then publishes
 * them in order. A committed change is never left without its event or its cache update —
 * which matters most for revocations (disable agent, revoke connection).
 */
import { randomUUID } from 'node:crypto';
import { runInTraceContext, withTraceContext, type Bus, type BusNames, type Headers } from '@vlt/bus';
import { eventCategory, type AuditEventMessage } from '@vlt/contracts';
import type { Prisma, PrismaClient, Sql } from '@vlt/db';
import type { FastifyBaseLogger } from 'fastify';

export type OutboxItem =
  | { kind: 'event'; event: AuditEventMessage }
  | { kind: 'kv'; bucket: string; key: string; op: 'put' | 'delete'; value?: unknown };

type Tx = Prisma.TransactionClient;

/** A data-plane cache update, delivered in commit order with the change that implies it. */
export const kvPut = (bucket: string, key: string, value: unknown): OutboxItem => ({
  kind: 'kv',
  bucket,
  key,
  op: 'put',
  value,
});
export const kvDelete = (bucket: string, key: string): OutboxItem => ({
  kind: 'kv',
  bucket,
  key,
  op: 'delete',
});

export async function enqueueOutbox(tx: Tx, names: BusNames, items: OutboxItem[]): Promise<void> {
  if (items.length === 0) return;
  // One multi-row INSERT: the sequence column numbers rows in the order given.
  await tx.outboxEvent.createMany({
    data: items.map((item) => ({
      subject:
        item.kind === 'event'
          ? names.eventSubject(eventCategory(item.event.action), item.event.action)
          : `kv:${item.bucket}`,
      msgId: item.kind === 'event' ? item.event.auditId : randomUUID(),
      payload: item as unknown as Prisma.InputJsonValue,
      // The trace of the change that enqueued it, so its event continues that trace when the
      // relay publishes it later (from a timer, or another replica).
      headers: withTraceContext({}) as Prisma.InputJsonValue,
    })),
  });
}

export interface OutboxRelay {
  /** Publish pending rows now (called after each commit; also runs on a timer). */
  kick(): void;
  /** Resolves when everything committed so far has been published (tests, shutdown). */
  flush(): Promise<void>;
  /**
   * Publishes what this change committed before the caller answers, so an admin who changes
   * a policy or disables an agent gets the response after data planes were told. Bounded:
   * when the bus is down the response goes out anyway and the relay keeps retrying.
   */
  settle(timeoutMs?: number): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

const BATCH = 200;

export function createOutboxRelay(deps: {
  prisma: PrismaClient;
  /**
   * Raw statements, for the relay's look before each batch: whether any row waits. Without it
   * every look is the full batch transaction through Prisma.
   */
  sql?: Sql;
  bus: Bus;
  logger: FastifyBaseLogger;
  intervalMs?: number;
  /**
   * `advisory-lock`: replicas share a PostgreSQL server; one relays at a time, holding a
   * transaction-scoped lock while it publishes. `single-process`: the embedded database,
   * which is one session (a transaction held during publishing would stall every query)
   * and has exactly one relay, whose own loop already serialises publication.
   */
  exclusivity?: 'advisory-lock' | 'single-process';
}): OutboxRelay {
  const { prisma, bus, logger } = deps;
  let running: Promise<void> | null = null;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  type Db = Pick<PrismaClient, 'outboxEvent'>;

  /** Publishes up to one batch through `db`; true when a full batch went out (there may be more). */
  async function publishRows(tx: Db): Promise<boolean> {
    const rows = await tx.outboxEvent.findMany({
      where: { publishedAt: null },
      orderBy: { seq: 'asc' },
      take: BATCH,
    });
    const published: string[] = [];
    // Marked in one statement per batch; a crash before it re-publishes, which consumers absorb.
    const markPublished = () =>
      published.length
        ? tx.outboxEvent.updateMany({ where: { id: { in: published } }, data: { publishedAt: new Date() } })
        : Promise.resolve();
    for (const row of rows) {
      const item = row.payload as unknown as OutboxItem;
      try {
        if (item.kind === 'event') {
          const traced = (row.headers ?? {}) as Headers;
          await runInTraceContext(traced, () => bus.publish(row.subject, item.event, { msgId: row.msgId }));
        } else {
          const kv = await bus.kv(item.bucket);
          if (item.op === 'put') await kv.put(item.key, item.value);
          else await kv.delete(item.key);
        }
      } catch (err) {
        // Stop at the first failure: later rows may depend on this one (ordering).
        await markPublished();
        await tx.outboxEvent.update({ where: { id: row.id }, data: { attempts: { increment: 1 } } });
        logger.warn(
          { err: (err as Error).message, subject: row.subject },
          'outbox publish failed; will retry',
        );
        return false;
      }
      published.push(row.id);
    }
    await markPublished();
    return rows.length === BATCH;
  }

  async function publishBatch(): Promise<boolean> {
    if (deps.exclusivity === 'single-process') return publishRows(prisma);
    // A transaction-scoped advisory lock: only one replica relays at a time, so the
    // messages leave in commit order; the others find the lock taken and return.
    return prisma.$transaction(
      async (tx) => {
        const locked = await tx.$queryRaw<{ ok: boolean }[]>`SELECT pg_try_advisory_xact_lock(7311001) AS ok`;
        if (!locked[0]?.ok) return false;
        return publishRows(tx);
      },
      { timeout: 60_000, maxWait: 10_000 },
    );
  }

  /**
   * Whether any row waits: one statement on the partial index. The relay looks twice a second
   * on every replica, and nearly always finds nothing; through Prisma's interactive
   * transaction (four statements and the ORM's own work) each idle look cost the control plane
   * milliseconds of CPU (ADR 0078).
   */
  async function anyPending(): Promise<boolean> {
    if (!deps.sql) return true;
    const rows = await deps.sql<{ pending: boolean }>`
      SELECT EXISTS (SELECT 1 FROM outbox_events WHERE published_at IS NULL) AS pending`;
    return rows[0]?.pending === true;
  }

  async function drain(): Promise<void> {
    do {
      again = false;
      while (!stopped && (await anyPending()) && (await publishBatch())) {
        /* keep going while full batches go out */
      }
    } while (again && !stopped);
  }

  function kick(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain()
      .catch((err: Error) => logger.warn({ err: err.message }, 'outbox relay error'))
      .finally(() => {
        running = null;
      });
  }

  return {
    kick,
    async flush() {
      kick();
      while (running) await running;
    },
    async settle(timeoutMs = 2_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
        timer.unref();
      });
      await Promise.race([this.flush(), timeout]);
      clearTimeout(timer);
    },
    start() {
      timer = setInterval(kick, deps.intervalMs ?? 500);
      timer.unref();
      kick();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      while (running) await running;
    },
  };
}
