import { context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { batchItemContext, inBatchItem, inBatchSpan, startTelemetry, type TelemetryHandle } from './index.js';

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

  it('one span for the batch: a child of the first item, linked to every item, and every item linked back', async () => {
    const exporter = new InMemorySpanExporter();
    running = await startTelemetry({
      serviceName: 'batch-test',
      env: { OTEL_TRACES_EXPORTER: 'otlp' },
      spanExporter: exporter,
    });
    const tracer = trace.getTracer('test');
    // Two events from two different traces, each handled under its own consumer span.
    const a = tracer.startSpan('process a');
    const b = tracer.startSpan('process b');
    const items = [a, b].map((s) => context.with(trace.setSpan(context.active(), s), batchItemContext));
    const out = await inBatchSpan(
      'store audit events',
      items,
      { 'db.operation.name': 'INSERT' },
      async () => {
        tracer.startSpan('INSERT audit_events').end();
        return 'stored';
      },
    );
    expect(out).toBe('stored');
    a.end();
    b.end();

    await vi.waitFor(() => expect(exporter.getFinishedSpans().length).toBe(4), { timeout: 5_000 });
    const spans = exporter.getFinishedSpans();
    const byName = (n: string) => spans.find((s) => s.name === n)!;
    const batch = byName('store audit events');
    const [pa, pb, db] = [byName('process a'), byName('process b'), byName('INSERT audit_events')];
    expect(pa.spanContext().traceId).not.toBe(pb.spanContext().traceId);

    // In the first item's trace, under its span; the statement's own span under the batch span.
    expect(batch.spanContext().traceId).toBe(pa.spanContext().traceId);
    expect(batch.parentSpanContext?.spanId).toBe(pa.spanContext().spanId);
    expect(db.parentSpanContext?.spanId).toBe(batch.spanContext().spanId);
    expect(batch.attributes).toMatchObject({
      'db.operation.name': 'INSERT',
      'messaging.batch.message_count': 2,
    });
    // Every item is named by a link, and every item's span links back to the batch.
    expect(batch.links.map((l) => l.context.spanId)).toEqual([
      pa.spanContext().spanId,
      pb.spanContext().spanId,
    ]);
    for (const item of [pa, pb]) {
      expect(item.links.map((l) => l.context.spanId)).toContain(batch.spanContext().spanId);
    }
  });
});
