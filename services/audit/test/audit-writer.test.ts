import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createDatabaseClients, type PrismaClient, type Sql } from '@vlt/db';
import type { AuditEventMessage } from '@vlt/contracts';
import type { StreamMessage } from '@vlt/bus';
import { uuidv7 } from '@vlt/service-kit';
import { realServices } from '@vlt/test-support/services.js';
import { AUDIT_IN_FLIGHT, auditHandler, storeAuditEvent } from '../src/audit-writer.js';

const event = (over: Partial<AuditEventMessage> = {}): AuditEventMessage => ({
  v: 1,
  auditId: uuidv7(),
  action: 'execution_completed',
  timestamp: new Date().toISOString(),
  actor: `agent:${randomUUID()}`,
  workspaceId: randomUUID(),
  agentId: randomUUID(),
  connectionId: randomUUID(),
  decision: 'allowed',
  metadata: { method: 'GET', responseStatus: 200 },
  ...over,
});
const msg = (data: unknown, deliveryCount = 1): StreamMessage => ({
  subject: 'x.events.execution.execution_completed',
  data,
  headers: {},
  msgId: 'm',
  deliveryCount,
});

describe.skipIf(!realServices.hasPostgres())(
  `audit writer (real PostgreSQL) ${realServices.missing()}`,
  () => {
    let prisma: PrismaClient;
    let sql: Sql;
    const logger = pino({ level: 'silent' });
    afterAll(async () => prisma?.$disconnect());
    const open = () => {
      if (!prisma) ({ prisma, sql } = createDatabaseClients(realServices.databaseUrl()));
    };

    it('stores an event once, however often it is delivered', async () => {
      open();
      const e = event();
      expect(await storeAuditEvent(sql, e)).toBe(true);
      expect(await storeAuditEvent(sql, e)).toBe(false);
      const handler = auditHandler({ sql, logger });
      expect(await handler(msg(e, 2))).toEqual({ type: 'ack' });
      const rows = await prisma.auditEvent.findMany({ where: { auditId: e.auditId } });
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        action: 'execution_completed',
        decision: 'allowed',
        agentId: e.agentId,
      });
      expect(rows[0]!.timestamp.toISOString()).toBe(e.timestamp);
    });

    it('stores every field as sent, nulls and unstorable text included', async () => {
      open();
      const e = event({
        actor: 'agent:a\u0000b',
        auditId: `${uuidv7()}\ud800`,
        workspaceId: null,
        agentId: null,
        connectionId: null,
        metadata: {
          nested: { list: [1, 'two', null, { deep: true }] },
          'k\u0000': 'v\u0000',
          quote: `'";`,
          lone: 'x\udc00',
        },
      });
      expect(await auditHandler({ sql, logger })(msg(e))).toEqual({ type: 'ack' });
      const row = await prisma.auditEvent.findUniqueOrThrow({
        where: { auditId: e.auditId.replace('\ud800', '\ufffd') },
      });
      expect(row).toMatchObject({
        actor: 'agent:a\ufffdb',
        workspaceId: null,
        agentId: null,
        connectionId: null,
        action: e.action,
        decision: e.decision,
        metadata: {
          nested: { list: [1, 'two', null, { deep: true }] },
          'k\ufffd': 'v\ufffd',
          quote: `'";`,
          lone: 'x\ufffd',
        },
      });
      expect(row.timestamp.toISOString()).toBe(e.timestamp);
    });

    it('drops malformed events and writes nothing', async () => {
      open();
      const handler = auditHandler({ sql, logger });
      const bad = { ...event(), action: 'not_an_action' };
      expect(await handler(msg(bad))).toMatchObject({ type: 'drop' });
      expect(await prisma.auditEvent.count({ where: { auditId: bad.auditId } })).toBe(0);
    });

    it('stores events handled together with one statement, each acked after its commit', async () => {
      open();
      let statements = 0;
      const counting: Sql = (strings, ...values) => {
        statements++;
        return sql(strings, ...values);
      };
      const handler = auditHandler({ sql: counting, logger });
      const events = Array.from({ length: 40 }, () => event());
      const outcomes = await Promise.all(events.map((e) => handler(msg(e))));
      expect(outcomes).toEqual(events.map(() => ({ type: 'ack' })));
      expect(statements).toBe(1);
      expect(
        await prisma.auditEvent.count({ where: { auditId: { in: events.map((e) => e.auditId) } } }),
      ).toBe(40);
    });

    it('a batch that fails is stored row by row: one bad row does not hold back the others', async () => {
      open();
      const good = [event(), event()];
      // A timestamp PostgreSQL rejects makes the multi-row insert fail as a whole.
      const bad = event({ timestamp: '+275760-09-13T00:00:00.001Z' });
      const handler = auditHandler({ sql, logger });
      const [a, b, c] = await Promise.all([handler(msg(good[0])), handler(msg(bad)), handler(msg(good[1]))]);
      expect(a).toEqual({ type: 'ack' });
      expect(c).toEqual({ type: 'ack' });
      expect(b.type).toBe('retry');
      expect(await prisma.auditEvent.count({ where: { auditId: { in: good.map((e) => e.auditId) } } })).toBe(
        2,
      );
    });

    it('asks for a retry, not an ack, when the write fails', async () => {
      const broken = createDatabaseClients('postgresql://nobody@127.0.0.1:1/none');
      const handler = auditHandler({ sql: broken.sql, logger });
      const out = await handler(msg(event(), 3));
      expect(out.type).toBe('retry');
      await broken.prisma.$disconnect();
    });
  },
);

/** A database that stores every row it is sent and records each statement's audit ids. */
function recordingSql() {
  const statements: string[][] = [];
  const sql = ((_strings: TemplateStringsArray, ...values: unknown[]) => {
    // The insert's one parameter: the rows as a JSON document.
    const auditIds = (JSON.parse(values[0] as string) as Array<{ audit_id: string }>).map((r) => r.audit_id);
    statements.push(auditIds);
    return Promise.resolve(auditIds.map((id) => ({ audit_id: id })));
  }) as unknown as Sql;
  return { sql, statements };
}

/** Which of the promises have settled, without waiting for the others. */
async function settled(ps: Promise<unknown>[]): Promise<number> {
  let n = 0;
  ps.forEach((p) => void p.then(() => n++));
  await vi.advanceTimersByTimeAsync(0);
  return n;
}

describe('audit batching (a recording database, fake timers)', () => {
  /** A handler over a fresh recording database, with the window's timer under the test's control. */
  function batchingHandler() {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = recordingSql();
    return { db, handler: auditHandler({ sql: db.sql, logger: pino({ level: 'silent' }) }) };
  }
  afterEach(() => {
    vi.useRealTimers();
  });

  it('stores a batch as soon as it holds every event the bus lets be in flight, without waiting for the window', async () => {
    const { db, handler } = batchingHandler();

    const full = Array.from({ length: AUDIT_IN_FLIGHT }, () => event());
    const acks = full.map((e) => handler(msg(e)));
    expect(await settled(acks)).toBe(AUDIT_IN_FLIGHT); // no timer advanced
    expect(await Promise.all(acks)).toEqual(full.map(() => ({ type: 'ack' })));
    expect(db.statements).toEqual([full.map((e) => e.auditId)]);
  });

  it('holds a smaller batch until the window ends, then stores it with one statement', async () => {
    const { db, handler } = batchingHandler();

    const few = [event(), event(), event()];
    const acks = few.map((e) => handler(msg(e)));
    expect(await settled(acks)).toBe(0);
    expect(db.statements).toEqual([]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await Promise.all(acks)).toEqual(few.map(() => ({ type: 'ack' })));
    expect(db.statements).toEqual([few.map((e) => e.auditId)]);
  });

  it('events that arrive after a full batch are stored by a statement of their own', async () => {
    const { db, handler } = batchingHandler();

    const first = [event()];
    const firstAck = first.map((e) => handler(msg(e)));
    const rest = Array.from({ length: AUDIT_IN_FLIGHT - 1 }, () => event());
    await Promise.all([...firstAck, ...rest.map((e) => handler(msg(e)))]);
    const late = [event(), event()];
    const lateAcks = late.map((e) => handler(msg(e)));
    expect(await settled(lateAcks)).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000);
    await Promise.all(lateAcks);
    expect(db.statements.map((s) => s.length)).toEqual([AUDIT_IN_FLIGHT, 2]);
  });
});
