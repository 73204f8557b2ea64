/**
 * Spans for messaging, in the OpenTelemetry semantic conventions' kinds: PRODUCER for a
 * publish, CONSUMER for handling a stream event, CLIENT/SERVER for request/reply. The trace
 * context itself travels in message headers (wire.ts); these spans make the hops visible, so
 * one trace reads agent call → data plane → JetStream → audit row. With tracing off the
 * OpenTelemetry API hands out non-recording spans and this costs a few allocations.
 */
import {
  context,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
} from '@opentelemetry/api';
import type { Bus, HandlerOutcome, StreamMessage } from './bus.js';

function inSpan<T>(name: string, kind: SpanKind, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
  const span = trace.getTracer('@vlt/bus').startSpan(name, { kind, attributes });
  // Tracing off (or nothing to continue): run as is, without a placeholder span in context.
  if (!span.isRecording() && !trace.isSpanContextValid(span.spanContext())) return fn();
  return runInSpan(span, context.active(), fn);
}

/** Runs `fn` with `span` active under `parent`; the span ends when `fn` settles, failed on a throw. */
function runInSpan<T>(span: Span, parent: Context, fn: () => Promise<T>): Promise<T> {
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

const messaging = (subject: string, operation: string, extra: Attributes = {}): Attributes => ({
  'messaging.system': 'nats',
  'messaging.destination.name': subject,
  'messaging.operation.type': operation,
  ...extra,
});

/** Wraps `bus`'s operations in spans; every other member is left as it is. */
export function withSpans<B extends Bus>(bus: B): B {
  const { publish, consume, request, reply } = bus;
  bus.publish = (subject, data, opts) =>
    inSpan(
      `publish ${subject}`,
      SpanKind.PRODUCER,
      messaging(subject, 'send', { 'messaging.message.id': opts.msgId }),
      () => publish.call(bus, subject, data, opts),
    );
  bus.consume = (opts, handler) =>
    consume.call(bus, opts, (msg: StreamMessage): Promise<HandlerOutcome> =>
      inSpan(
        `process ${msg.subject}`,
        SpanKind.CONSUMER,
        messaging(msg.subject, 'process', {
          'messaging.message.id': msg.msgId,
          'messaging.consumer.group.name': opts.durable,
          'messaging.message.delivery_count': msg.deliveryCount,
        }),
        () => handler(msg),
      ),
    );
  bus.request = (subject, data, opts) =>
    inSpan(`request ${subject}`, SpanKind.CLIENT, messaging(subject, 'send'), () =>
      request.call(bus, subject, data, opts),
    );
  bus.reply = (subject, handler, opts) =>
    reply.call(
      bus,
      subject,
      (data, headers) =>
        inSpan(`reply ${subject}`, SpanKind.SERVER, messaging(subject, 'process'), () =>
          handler(data, headers),
        ),
      opts,
    );
  return bus;
}

/*
 * One piece of work done for many consumed messages at once (the audit writer's multi-row
 * insert). Its span is a child of the first message's span, so the database span under it stays
 * in that trace, and it links to every message's span; each message's span links back while
 * still open. Whoever reads any one message's trace can follow the link to the statement that
 * stored it (OpenTelemetry's convention for batches is links, not one parent).
 */

/** Where a message was when it joined a batch: the trace context to link it by (opaque). */
export type BatchItemContext = Context;

/** The active trace context (a consumer's, in its handler), to hand to `inBatchSpan` later. */
export function batchItemContext(): BatchItemContext {
  return context.active();
}

/** Runs `fn` in one message's own trace context (work done for that message alone). */
export function inBatchItem<T>(item: BatchItemContext, fn: () => T): T {
  return context.with(item, fn);
}

export function inBatchSpan<T>(
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
    .getTracer('@vlt/bus')
    .startSpan(
      name,
      { attributes: { ...attributes, 'messaging.batch.message_count': items.length }, links },
      parent,
    );
  // Tracing off: no span to put in context, nothing to link.
  if (!span.isRecording()) return context.with(parent, fn);
  for (const item of items) trace.getSpan(item)?.addLink({ context: span.spanContext() });
  return runInSpan(span, parent, fn);
}
