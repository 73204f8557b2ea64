/**
 * Regression (operability): events relayed by the outbox started new traces, because the relay
 * publishes later, from a timer or another replica, outside the request that made the change.
 * Each outbox row now keeps the trace context it was enqueued in, and is published in it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busNames, createInProcessBus, type Bus } from '@vlt/bus';
import { createPrismaClient, type PrismaClient } from '@vlt/db';
import { startTelemetry, type TelemetryHandle } from '@vlt/telemetry';
import { createRunDatabase } from '@vlt/test-support/run-database.js';
import { realServices } from '@vlt/test-support/services.js';
import { audited, auditEvent } from '../src/infra/change.js';
import { createOutboxRelay, enqueueOutbox } from '../src/infra/outbox.js';

describe.skipIf(!realServices.hasPostgres())(`outbox keeps the trace ${realServices.missing()}`, () => {
  let prisma: PrismaClient;
  let drop: () => Promise<void>;
  let telemetry: TelemetryHandle;
  let bus: Bus;

  beforeAll(async () => {
    telemetry = await startTelemetry({
      serviceName: 'outbox-test',
      env: { OTEL_TRACES_EXPORTER: 'otlp' },
      spanExporter: { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} },
    });
    const admin = new URL(realServices.databaseUrl());
    admin.pathname = '/postgres';
    const db = await createRunDatabase(admin.toString(), `vlt_outbox_${randomBytes(4).toString('hex')}`);
    drop = db.drop;
    prisma = createPrismaClient(db.url);
  });
  afterAll(async () => {
    await bus?.close();
    await prisma?.$disconnect();
    await drop?.();
    await telemetry?.shutdown();
  });

  it('publishes a relayed event in the trace of the change that enqueued it', async () => {
    const names = busNames(`outbox${randomBytes(3).toString('hex')}`);
    bus = createInProcessBus({ names });
    const relay = createOutboxRelay({ prisma, bus, logger: pino({ level: 'silent' }) });
    const seen: Record<string, string>[] = [];
    await bus.consume({ durable: 'trace-check' }, async (msg) => {
      seen.push(msg.headers);
      return { type: 'ack' };
    });

    const event = auditEvent(
      { now: () => new Date() },
      {
        action: 'agent_updated',
        actor: randomUUID(),
        workspaceId: null,
        agentId: null,
        connectionId: null,
        decision: 'info',
        metadata: {},
      },
    );
    // The change commits inside a request's span...
    const traceId = await trace.getTracer('test').startActiveSpan('PUT /v1/agents/:id', async (span) => {
      await prisma.$transaction((tx) => enqueueOutbox(tx, names, [audited(event)]));
      span.end();
      return span.spanContext().traceId;
    });
    // ...and is relayed later, from outside it.
    await context.with(ROOT_CONTEXT, () => relay.flush());
    const deadline = Date.now() + 5_000;
    while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(seen).toHaveLength(1);
    expect(seen[0]!.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-0[01]$`));
  });
});
