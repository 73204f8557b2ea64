import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Sql } from '@vlt/db';
import type { AuditEventMessage } from '@vlt/contracts';
import type { StreamMessage } from '@vlt/bus';
import { uuidv7 } from '@vlt/service-kit';
import { AUDIT_IN_FLIGHT, auditHandler } from '../src/audit-writer.js';

const event = (): AuditEventMessage => ({
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
});
const msg = (data: unknown): StreamMessage => ({
  subject: 'x.events.execution.execution_completed',
  data,
  headers: {},
  msgId: 'm',
  deliveryCount: 1,
});

/** A database that stores every row it is sent and records each statement's audit ids. */
function recordingSql() {
  const statements: string[][] = [];
  const sql = ((_strings: TemplateStringsArray, ...values: unknown[]) => {
    const auditIds = values[1] as string[];
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

describe('audit batching', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('stores a batch as soon as it holds every event the bus lets be in flight, without waiting for the window', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = recordingSql();
    const handler = auditHandler({ sql: db.sql, logger: pino({ level: 'silent' }) });

    const full = Array.from({ length: AUDIT_IN_FLIGHT }, () => event());
    const acks = full.map((e) => handler(msg(e)));
    expect(await settled(acks)).toBe(AUDIT_IN_FLIGHT); // no timer advanced
    expect(await Promise.all(acks)).toEqual(full.map(() => ({ type: 'ack' })));
    expect(db.statements).toEqual([full.map((e) => e.auditId)]);
  });

  it('holds a smaller batch until the window ends, then stores it with one statement', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = recordingSql();
    const handler = auditHandler({ sql: db.sql, logger: pino({ level: 'silent' }) });

    const few = [event(), event(), event()];
    const acks = few.map((e) => handler(msg(e)));
    expect(await settled(acks)).toBe(0);
    expect(db.statements).toEqual([]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await Promise.all(acks)).toEqual(few.map(() => ({ type: 'ack' })));
    expect(db.statements).toEqual([few.map((e) => e.auditId)]);
  });

  it('events that arrive after a full batch are stored by a statement of their own', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = recordingSql();
    const handler = auditHandler({ sql: db.sql, logger: pino({ level: 'silent' }) });

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
