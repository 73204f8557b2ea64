/**
 * Work done once for many consumed messages (the audit writer's multi-row insert) is one span
 * that every message's trace can reach: a child of the first message's span, linked to every
 * message's span, and linked back from each (`inBatchSpan`, `@vlt/bus`).
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  batchItemContext,
  busNames,
  createInProcessBus,
  inBatchItem,
  inBatchSpan,
  type BatchItemContext,
} from '@vlt/bus';
import { startTelemetry, type StartTelemetryOptions, type TelemetryHandle } from '@vlt/telemetry';

type Exporter = NonNullable<StartTelemetryOptions['spanExporter']>;
type Finished = Parameters<Exporter['export']>[0][number];

/** Keeps what the SDK exports, in memory. */
function memoryExporter(): Exporter & { spans: Finished[] } {
  const spans: Finished[] = [];
  return {
    spans,
    export(batch, done) {
      spans.push(...batch);
      done({ code: 0 });
    },
    shutdown: async () => undefined,
    forceFlush: async () => undefined,
  };
}

let running: TelemetryHandle | undefined;
afterEach(async () => {
  await running?.shutdown();
  running = undefined;
});

describe('inBatchSpan', () => {
  it('tracing off: runs the work in the first item’s context and returns its result', async () => {
    expect(await inBatchSpan('store', [batchItemContext()], {}, async () => 42)).toBe(42);
    expect(inBatchItem(batchItemContext(), () => 'x')).toBe('x');
  });

  it('one span for the batch: a child of the first message, linked to every message, and every message linked back', async () => {
    const exporter = memoryExporter();
    running = await startTelemetry({
      serviceName: 'batch-test',
      env: { OTEL_TRACES_EXPORTER: 'otlp' },
      spanExporter: exporter,
    });
    const names = busNames(`batch${randomBytes(3).toString('hex')}`);
    const bus = createInProcessBus({ names });
    const subject = names.eventSubject('execution', 'execution_requested');
    const inner = names.eventSubject('execution', 'batch_inner');
    // Two events published from nowhere: two traces. Their handlers, each inside its own
    // consumer span, wait for one piece of work done for both.
    const joined: BatchItemContext[] = [];
    let release!: () => void;
    const batchDone = new Promise<void>((r) => (release = r));
    const consumer = await bus.consume(
      { durable: 'batch-test', filterSubject: subject, concurrency: 2 },
      async () => {
        joined.push(batchItemContext());
        if (joined.length === 2) {
          const out = await inBatchSpan('store audit events', joined, { 'db.operation.name': 'INSERT' }, () =>
            bus.publish(inner, { v: 1 }, { msgId: randomBytes(8).toString('hex') }).then(() => 'stored'),
          );
          expect(out).toBe('stored');
          release();
        }
        await batchDone;
        return { type: 'ack' };
      },
    );
    await bus.publish(subject, { n: 1 }, { msgId: randomBytes(8).toString('hex') });
    await bus.publish(subject, { n: 2 }, { msgId: randomBytes(8).toString('hex') });
    await batchDone;
    await consumer.stop();
    await bus.close();

    await vi.waitFor(
      () => expect(exporter.spans.filter((s) => s.name === `process ${subject}`)).toHaveLength(2),
      { timeout: 5_000 },
    );
    const processed = exporter.spans.filter((s) => s.name === `process ${subject}`);
    const batch = exporter.spans.find((s) => s.name === 'store audit events')!;
    const statement = exporter.spans.find((s) => s.name === `publish ${inner}`)!;
    expect(batch, 'the batch span').toBeDefined();
    expect(statement, 'the work inside it').toBeDefined();
    // The batch runs under the consumer span of the message that joined it first.
    const parent = processed.find((p) => p.spanContext().spanId === batch.parentSpanContext?.spanId);
    expect(parent, 'the batch span is a child of one of the consumer spans').toBeDefined();
    const first = parent!;
    const second = processed.find((p) => p !== first)!;
    expect(first.spanContext().traceId).not.toBe(second.spanContext().traceId);

    // In the first message's trace; the work's own span under the batch.
    expect(batch.spanContext().traceId).toBe(first.spanContext().traceId);
    expect(statement.parentSpanContext?.spanId).toBe(batch.spanContext().spanId);
    expect(batch.attributes).toMatchObject({
      'db.operation.name': 'INSERT',
      'messaging.batch.message_count': 2,
    });
    // Every message is named by a link, and every message's span links back to the batch.
    expect(batch.links.map((l) => l.context.spanId).sort()).toEqual(
      [first.spanContext().spanId, second.spanContext().spanId].sort(),
    );
    for (const item of [first, second]) {
      expect(item.links.map((l) => l.context.spanId)).toContain(batch.spanContext().spanId);
    }
  });
});
