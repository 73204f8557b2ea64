import type { Context } from '@opentelemetry/api';
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { redactQuery, redactUrl } from './redact-url.js';

/** URL-bearing attributes set by the http, undici and @fastify/otel instrumentations (old and new semconv). */
const URL_ATTRIBUTES = ['url.full', 'url.path', 'url.original', 'http.url', 'http.target'] as const;
const QUERY_ATTRIBUTES = ['url.query'] as const;

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
