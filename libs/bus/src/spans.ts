/**
 * Spans for messaging, in the OpenTelemetry semantic conventions' kinds: PRODUCER for a
 * publish, CONSUMER for handling a stream event, CLIENT/SERVER for request/reply. The trace
 * context itself travels in message headers (wire.ts); these spans make the hops visible, so
 * one trace reads agent call → data plane → JetStream → audit row. With tracing off the
 * OpenTelemetry API hands out non-recording spans and this costs a few allocations.
 */
import { context, SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';
import type { Bus, HandlerOutcome, StreamMessage } from './bus.js';

function inSpan<T>(name: string, kind: SpanKind, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
  const span = trace.getTracer('@vlt/bus').startSpan(name, { kind, attributes });
  // Tracing off (or nothing to continue): run as is, without a placeholder span in context.
  if (!span.isRecording() && !trace.isSpanContextValid(span.spanContext())) return fn();
  return context.with(trace.setSpan(context.active(), span), async () => {
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
