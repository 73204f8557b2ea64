/**
 * Prometheus metrics of a service: request rate, latency and errors per route, decisions by
 * outcome, and gauges a service registers (outbox depth, consumer lag). Served on a listener of
 * its own (`VLT_METRICS_PORT`), never on the public port: the edge routes every path of the
 * public port to a service, and metrics describe traffic an outsider must not read.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { FastifyInstance } from 'fastify';

export interface ServiceMetrics {
  registry: Registry;
  /** Counts a recorded decision (an audit event) by its action and outcome. */
  decision(action: string, decision: string): void;
  /**
   * A value read when scraped (outbox depth, consumer lag). A failing read leaves the gauge
   * out of that scrape rather than failing it.
   */
  gauge(name: string, help: string, read: () => Promise<number> | number): void;
  /** Observes every response of `app` (registered by createServiceApp). */
  observe(app: FastifyInstance): void;
}

export function createServiceMetrics(service: string): ServiceMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });

  const duration = new Histogram({
    name: 'vlt_http_request_duration_seconds',
    help: 'HTTP requests by method, route template and status class, with their duration',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const decisions = new Counter({
    name: 'vlt_decisions_total',
    help: 'Recorded decisions (audit events) by action and outcome',
    labelNames: ['action', 'decision'] as const,
    registers: [registry],
  });

  return {
    registry,
    decision: (action, decision) => decisions.inc({ action, decision }),
    gauge(name, help, read) {
      new Gauge({
        name,
        help,
        registers: [registry],
        async collect() {
          try {
            this.set(await read());
          } catch {
            this.reset();
          }
        },
      });
    },
    observe(app) {
      app.addHook('onResponse', (request, reply, done) => {
        // The route template, never the raw URL: ids and query values would explode the
        // label set and could carry secrets.
        const route = request.routeOptions.url ?? 'unmatched';
        duration.observe(
          { method: request.method, route, status: `${Math.floor(reply.statusCode / 100)}xx` },
          reply.elapsedTime / 1000,
        );
        done();
      });
    },
  };
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** Serves `GET /metrics` (Prometheus text format) on its own port. */
export async function startMetricsServer(
  metrics: ServiceMetrics,
  listen: { port: number; host: string },
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The metrics of a process whose configuration asks for them (`VLT_METRICS_PORT`), else none. */
export function metricsFromConfig(config: { metricsPort: number | undefined }, service: string) {
  return config.metricsPort === undefined ? undefined : createServiceMetrics(service);
}

/** Starts the metrics listener when there are metrics to serve. */
export async function serveMetrics(
  metrics: ServiceMetrics | undefined,
  config: { metricsPort: number | undefined; host: string },
): Promise<MetricsServer | null> {
  if (!metrics || config.metricsPort === undefined) return null;
  return startMetricsServer(metrics, { port: config.metricsPort, host: config.host });
}
