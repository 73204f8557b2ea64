/**
 * Regression (performance, ADR 0078): the outbox relay looks for pending rows twice a second on
 * every control-plane replica and nearly always finds none. Each look was Prisma's interactive
 * transaction (BEGIN, advisory lock, read, COMMIT) even then. An idle look is now one raw
 * statement; the transaction runs only when a row waits, and such rows still leave in order.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busNames, createInProcessBus, type Bus } from '@vlt/bus';
import { createDatabaseClients, type PrismaClient, type Sql } from '@vlt/db';
import { createRunDatabase } from '@vlt/test-support/run-database.js';
import { realServices } from '@vlt/test-support/services.js';
import { audited, auditEvent } from '../src/infra/change.js';
import { createOutboxRelay, enqueueOutbox } from '../src/infra/outbox.js';

describe.skipIf(!realServices.hasPostgres())(`outbox relay at rest ${realServices.missing()}`, () => {
  let prisma: PrismaClient;
  let sql: Sql;
  let drop: () => Promise<void>;
  let bus: Bus;

  beforeAll(async () => {
    const admin = new URL(realServices.databaseUrl());
    admin.pathname = '/postgres';
    const db = await createRunDatabase(admin.toString(), `vlt_outbox_idle_${randomBytes(4).toString('hex')}`);
    drop = db.drop;
    ({ prisma, sql } = createDatabaseClients(db.url));
  });
  afterAll(async () => {
    await bus?.close();
    await prisma?.$disconnect();
    await drop?.();
  });

  it('an idle look opens no transaction; committed rows are still published, in order', async () => {
    const names = busNames(`outboxidle${randomBytes(3).toString('hex')}`);
    bus = createInProcessBus({ names });
    let transactions = 0;
    const counted = new Proxy(prisma, {
      get(target, key) {
        if (key === '$transaction') {
          return (...args: Parameters<PrismaClient['$transaction']>) => {
            transactions++;
            return target.$transaction(...args);
          };
        }
        return Reflect.get(target, key) as unknown;
      },
    });
    const relay = createOutboxRelay({ prisma: counted, sql, bus, logger: pino({ level: 'silent' }) });
    const seen: string[] = [];
    await bus.consume({ durable: 'idle-check' }, async (msg) => {
      seen.push((msg.data as { actor: string }).actor);
      return { type: 'ack' };
    });

    for (let i = 0; i < 5; i++) await relay.flush();
    expect(transactions).toBe(0);

    const actors = [randomUUID(), randomUUID()];
    const events = actors.map((actor) =>
      auditEvent(
        { now: () => new Date() },
        {
          action: 'agent_updated',
          actor,
          workspaceId: null,
          agentId: null,
          connectionId: null,
          decision: 'info',
          metadata: {},
        },
      ),
    );
    await prisma.$transaction((tx) => enqueueOutbox(tx, names, events.map(audited)));
    await relay.flush();
    const deadline = Date.now() + 5_000;
    while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual(actors);
    expect(transactions).toBeGreaterThan(0);
    const left = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM outbox_events WHERE published_at IS NULL`;
    expect(left[0]?.n).toBe(0);

    // At rest again: looks cost no transaction.
    const before = transactions;
    for (let i = 0; i < 5; i++) await relay.flush();
    expect(transactions).toBe(before);
  });
});
