/**
 * One piece of work done for many traced items at once (the audit writer's multi-row insert).
 * Its span is a child of the first item's span, so the database span under it stays in that
 * trace, and it links to every item's span; each item's span links back to it while still
 * open. An SRE reading any one item's trace can follow the link to the statement that stored
 * it (OpenTelemetry's convention for batch processing is links, not one parent).
 */
import { context, trace, SpanStatusCode, type Attributes, type Context, type Link } from '@opentelemetry/api';

/** Where an item was when it joined a batch: the trace context to link it by (opaque). */
export type BatchItemContext = Context;

/** The active trace context, to hand to `inBatchSpan` later. */
export function batchItemContext(): BatchItemContext {
  return context.active();
}

/** Runs `fn` in an item's own trace context (work done for that item alone). */
export function inBatchItem<T>(item: BatchItemContext, fn: () => T): T {
  return context.with(item, fn);
}

export async function inBatchSpan<T>(
  name: string,
  items: readonly BatchItemContext[],
  attributes: Attributes,
  fn: () => Promise<T>,
): Promise<T> {
  const parent = items[0] ?? context.active();
  const links: Link[] = [];
  for (const item of items) {
    const sc = trace.getSpanContext(item);
    if (sc && trace.isSpanContextValid(sc)) links.push({ context: sc });
  }
  const span = trace
    .getTracer('@vlt/telemetry')
    .startSpan(
      name,
      { attributes: { ...attributes, 'messaging.batch.message_count': items.length }, links },
      parent,
    );
  // Tracing off: no span to put in context, nothing to link.
  if (!span.isRecording()) return context.with(parent, fn);
  for (const item of items) trace.getSpan(item)?.addLink({ context: span.spanContext() });
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn();
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.name : 'error' });
      throw err;
    } finally {
      span.end();
    }
  });
}
