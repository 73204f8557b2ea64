import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createPrismaClient, type PrismaClient } from '@vlt/db';
import type { AuditEventMessage } from '@vlt/contracts';
import type { StreamMessage } from '@vlt/bus';
import { uuidv7 } from '@vlt/service-kit';
import { realServices } from '@vlt/test-support/services.js';
import { auditHandler, storeAuditEvent } from '../src/audit-writer.js';

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
    const logger = pino({ level: 'silent' });
    afterAll(async () => prisma?.$disconnect());

    it('stores an event once, however often it is delivered', async () => {
      prisma = createPrismaClient(realServices.databaseUrl());
      const e = event();
      expect(await storeAuditEvent(prisma, e)).toBe(true);
      expect(await storeAuditEvent(prisma, e)).toBe(false);
      const handler = auditHandler({ prisma, logger });
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

    it('drops malformed events and writes nothing', async () => {
      prisma ??= createPrismaClient(realServices.databaseUrl());
      const handler = auditHandler({ prisma, logger });
      const bad = { ...event(), action: 'not_an_action' };
      expect(await handler(msg(bad))).toMatchObject({ type: 'drop' });
      expect(await prisma.auditEvent.count({ where: { auditId: bad.auditId } })).toBe(0);
    });

    it('stores events handled together with one statement, each acked after its commit', async () => {
      prisma ??= createPrismaClient(realServices.databaseUrl());
      let statements = 0;
      const counting = new Proxy(prisma, {
        get(target, prop, recv) {
          if (prop !== 'auditEvent') return Reflect.get(target, prop, recv);
          const model = target.auditEvent;
          return new Proxy(model, {
            get(m, p2, r2) {
              if (p2 !== 'createMany') return Reflect.get(m, p2, r2);
              return (...args: Parameters<typeof model.createMany>) => {
                statements++;
                return model.createMany(...args);
              };
            },
          });
        },
      });
      const handler = auditHandler({ prisma: counting, logger });
      const events = Array.from({ length: 40 }, () => event());
      const outcomes = await Promise.all(events.map((e) => handler(msg(e))));
      expect(outcomes).toEqual(events.map(() => ({ type: 'ack' })));
      expect(statements).toBe(1);
      expect(
        await prisma.auditEvent.count({ where: { auditId: { in: events.map((e) => e.auditId) } } }),
      ).toBe(40);
    });

    it('a batch that fails is stored row by row: one bad row does not hold back the others', async () => {
      prisma ??= createPrismaClient(realServices.databaseUrl());
      const good = [event(), event()];
      // A timestamp PostgreSQL rejects makes the multi-row insert fail as a whole.
      const bad = event({ timestamp: '+275760-09-13T00:00:00.001Z' });
      const handler = auditHandler({ prisma, logger });
      const [a, b, c] = await Promise.all([handler(msg(good[0])), handler(msg(bad)), handler(msg(good[1]))]);
      expect(a).toEqual({ type: 'ack' });
      expect(c).toEqual({ type: 'ack' });
      expect(b.type).toBe('retry');
      expect(await prisma.auditEvent.count({ where: { auditId: { in: good.map((e) => e.auditId) } } })).toBe(
        2,
      );
    });

    it('asks for a retry, not an ack, when the write fails', async () => {
      const broken = createPrismaClient('postgresql://nobody@127.0.0.1:1/none');
      const handler = auditHandler({ prisma: broken, logger });
      const out = await handler(msg(event(), 3));
      expect(out.type).toBe('retry');
      await broken.$disconnect();
    });
  },
);
