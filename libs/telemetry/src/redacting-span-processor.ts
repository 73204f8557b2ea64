import type { Context } from '@opentelemetry/api';
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { redactQuery, redactUrl } from './redact-url.js';

/** URL-bearing attributes set by the http, undici and @fastify/otel instrumentations (old and new semconv). */
const URL_ATTRIBUTES = ['url.full', 'url.path', 'url.original', 'http.url', 'http.target'] as const;
const QUERY_ATTRIBUTES = ['url.query'] as const;
const MAX_SPAN_NAME = 160;
const MAX_ATTRIBUTE_CHARS = 1024;

/**
 * Runs before the exporting processors and rewrites URL attributes with redactUrl, so no
 * instrumentation can ship a token in a query string or path to the trace backend. One place
 * instead of per-instrumentation hooks: each instrumentation records URLs its own way (undici and
 * @fastify/otel keep the raw query; http redacts only a few cloud signature names).
 * `onEnding` is used because the span is still writable there and every attribute is set by then.
 */
export class RedactingSpanProcessor implements SpanProcessor {
  onStart(_span: Span, _parentContext: Context): void {}

  onEnding(span: Span): void {
    // Last line of defence for readable traces: a name that carries source text or a value
    // (an instrumentation naming spans after an anonymous function) is replaced, not shipped.
    if (span.name.length > MAX_SPAN_NAME || /[\n{};]/.test(span.name)) {
      span.updateName(span.instrumentationScope.name || 'span');
    }
    for (const [name, value] of Object.entries(span.attributes)) {
      if (typeof value === 'string' && value.length > MAX_ATTRIBUTE_CHARS) {
        span.setAttribute(name, `${value.slice(0, MAX_ATTRIBUTE_CHARS)}…`);
      }
    }
    for (const name of URL_ATTRIBUTES) {
      const value = span.attributes[name];
      if (typeof value === 'string') {
        const redacted = redactUrl(value);
        if (redacted !== value) span.setAttribute(name, redacted);
      }
    }
    for (const name of QUERY_ATTRIBUTES) {
      const value = span.attributes[name];
      if (typeof value === 'string' && value !== '') span.setAttribute(name, redactQuery(value));
    }
  }

  onEnd(_span: ReadableSpan): void {}

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}
