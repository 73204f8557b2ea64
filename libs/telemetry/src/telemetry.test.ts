import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import {
  createLogger,
  fastifyOtelPlugin,
  startTelemetry,
  TelemetryError,
  type TelemetryHandle,
} from './index.js';

let running: TelemetryHandle | undefined;
afterEach(async () => {
  await running?.shutdown();
  running = undefined;
  vi.unstubAllEnvs();
});

function listen(server: http.Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

describe('startTelemetry', () => {
  it('stays off without OTEL variables: no plugin, no recording spans', async () => {
    running = await startTelemetry({ serviceName: 'svc', env: {} });
    expect(running.enabled).toBe(false);
    expect(running.reason).toMatch(/no trace exporter configured/);
    expect(running.fastifyOtelPlugin()).toBeNull();
    expect(fastifyOtelPlugin()).toBeNull();
    expect(trace.getTracer('t').startSpan('s').isRecording()).toBe(false);
    await running.shutdown();
  });

  it('stays off with OTEL_TRACES_EXPORTER=none even when an endpoint is set', async () => {
    running = await startTelemetry({
      serviceName: 'svc',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' },
    });
    expect(running.enabled).toBe(false);
  });

  it('traces a Fastify request and its upstream call as one trace, redacts URLs, and correlates logs', async () => {
    const exporter = new InMemorySpanExporter();
    running = await startTelemetry({
      serviceName: 'gw-test',
      env: { OTEL_TRACES_EXPORTER: 'otlp' },
      spanExporter: exporter,
    });
    expect(running.enabled).toBe(true);
    await expect(
      startTelemetry({ serviceName: 'again', env: { OTEL_TRACES_EXPORTER: 'otlp' } }),
    ).rejects.toBeInstanceOf(TelemetryError);

    let upstreamHeaders: http.IncomingHttpHeaders = {};
    const upstream = http.createServer((req, res) => {
      upstreamHeaders = req.headers;
      res.end('pong');
    });
    const upstreamPort = await listen(upstream);

    // Loaded after the SDK, as main.ts does, so the http instrumentation sees the server.
    const { default: Fastify } = await import('fastify');
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    const app = Fastify({ loggerInstance: createLogger({ service: 'gw-test', destination }) });
    const plugin = fastifyOtelPlugin();
    expect(plugin).not.toBeNull();
    await app.register(plugin!);
    // An anonymous plugin, as route modules are: @fastify/otel would name its spans after the
    // plugin's source text.
    await app.register(async (instance) => {
      instance.get('/items/:id', async (req) => {
        req.log.info('handling');
        const r = await fetch(
          `http://127.0.0.1:${upstreamPort}/bot123456:BOTSECRETxyz/sendMessage?key=UPSTREAMSECRET`,
        );
        return { upstream: await r.text() };
      });
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const appPort = (app.server.address() as AddressInfo).port;

    const res = await fetch(`http://127.0.0.1:${appPort}/items/42?access_token=vltt_CALLERSECRET&limit=5`, {
      headers: { baggage: 'agent-supplied=BAGGAGESECRET' },
    });
    expect(await res.json()).toEqual({ upstream: 'pong' });
    await app.close();
    upstream.close();

    // A server span ends when the response has been flushed, which under load can be a moment
    // after the client already holds the body: wait for it (bounded) instead of racing it.
    await vi.waitFor(
      () => {
        const done = exporter.getFinishedSpans();
        expect(
          done.some((s) => s.kind === SpanKind.SERVER && s.instrumentationScope.name.includes('http')),
        ).toBe(true);
      },
      { timeout: 5_000, interval: 20 },
    );
    const spans = exporter.getFinishedSpans();
    const server = spans.find(
      (s) => s.kind === SpanKind.SERVER && s.instrumentationScope.name.includes('http'),
    );
    const fastifySpan = spans.find((s) => s.instrumentationScope.name.includes('fastify'));
    const upstreamCall = spans.find(
      (s) =>
        s.kind === SpanKind.CLIENT && String(s.attributes['url.full'] ?? '').includes(String(upstreamPort)),
    );
    expect(server, 'http server span').toBeDefined();
    expect(fastifySpan, '@fastify/otel span').toBeDefined();
    expect(upstreamCall, 'undici client span').toBeDefined();
    const traceId = server!.spanContext().traceId;
    expect(fastifySpan!.spanContext().traceId).toBe(traceId);
    expect(upstreamCall!.spanContext().traceId).toBe(traceId);
    expect(upstreamCall!.attributes['url.full']).toBe(
      `http://127.0.0.1:${upstreamPort}/botREDACTED/sendMessage?key=REDACTED`,
    );
    expect(spans.every((s) => s.resource.attributes['service.name'] === 'gw-test')).toBe(true);

    // Trace context reaches the upstream; an agent's baggage does not (no baggage propagator by default).
    expect(upstreamHeaders.traceparent).toMatch(new RegExp(`^00-${traceId}-`));
    expect(upstreamHeaders.baggage).toBeUndefined();

    // Spans are named by route, never by source text or raw URL.
    const fastifyNames = spans
      .filter((s) => s.instrumentationScope.name.includes('fastify'))
      .map((s) => s.name);
    expect(fastifyNames).toContain('GET /items/:id');
    expect(fastifyNames).toContain('handler GET /items/:id');
    for (const s of spans) {
      expect(s.name.length, s.name).toBeLessThanOrEqual(160);
      expect(s.name).not.toMatch(/[{};\n]|instance\.get|42\?/);
      for (const value of Object.values(s.attributes)) expect(String(value)).not.toContain('instance.get');
    }

    const exported = JSON.stringify(
      spans.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events })),
    );
    for (const secret of ['CALLERSECRET', 'BOTSECRETxyz', 'UPSTREAMSECRET'])
      expect(exported).not.toContain(secret);

    const handling = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((r) => r.msg === 'handling');
    expect(handling).toMatchObject({ service: 'gw-test', trace_id: traceId });
    expect(lines.join('\n')).not.toContain('CALLERSECRET');

    await running.shutdown();
    expect(running.fastifyOtelPlugin()).toBeNull();
    expect(fastifyOtelPlugin()).toBeNull();
    expect(trace.getTracer('t').startSpan('s').isRecording()).toBe(false);
  });

  it('bounds shutdown when the collector is unreachable', async () => {
    // The OTLP exporter reads its endpoint from process.env (the spec's variables).
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', 'http://127.0.0.1:9');
    vi.stubEnv('OTEL_EXPORTER_OTLP_PROTOCOL', 'http/json');
    running = await startTelemetry({ serviceName: 'svc', env: process.env, shutdownTimeoutMs: 300 });
    expect(running.enabled).toBe(true);
    trace.getTracer('t').startSpan('pending').end();
    const started = Date.now();
    await running.shutdown();
    await running.shutdown();
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
