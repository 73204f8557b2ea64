import { context, propagation, trace } from '@opentelemetry/api';
import type { FastifyOtelInstrumentation } from '@fastify/otel';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import type { getNodeAutoInstrumentations } from '@opentelemetry/auto-instrumentations-node';
import { TelemetryError } from './errors.js';
import { RedactingSpanProcessor } from './redacting-span-processor.js';
import {
  resolveTracingConfig,
  type OtlpProtocol,
  type TraceExporterKind,
  type TracingConfig,
} from './tracing-config.js';

type Instrumentation = ReturnType<typeof getNodeAutoInstrumentations>[number];

/** `POST /v1/vault/execute`: the route template, never the raw URL (ids, query values). */
function routeSpanName(request: { method: string; routeOptions?: { url?: string } }): string {
  return `${request.method} ${request.routeOptions?.url ?? '(unmatched route)'}`;
}

/** What `app.register()` takes; registered before any route (see @fastify/otel). */
export type FastifyOtelPlugin = ReturnType<FastifyOtelInstrumentation['plugin']>;

export type TelemetryHandle = {
  enabled: boolean;
  /** One line for the boot log: why tracing is on or off. Names variables, never their values. */
  reason: string;
  /** Flushes and stops tracing; resolves within shutdownTimeoutMs and never rejects. Idempotent. */
  shutdown(): Promise<void>;
  /** The @fastify/otel plugin of this SDK, or null when tracing is off. */
  fastifyOtelPlugin(): FastifyOtelPlugin | null;
};

export type StartTelemetryOptions = {
  serviceName: string;
  /**
   * Decides whether and how tracing starts (resolveTracingConfig). The exporters read their own
   * details (endpoint, headers, TLS, timeout, compression) from process.env as the OTel spec
   * defines, so services pass process.env here.
   */
  env: NodeJS.ProcessEnv;
  /** Upper bound for shutdown(); without a collector the SDK's own shutdown takes ~8 s to fail. Default 3000. */
  shutdownTimeoutMs?: number;
  /** Replaces the exporter(s) chosen from env, keeping everything else; for tests. */
  spanExporter?: SpanExporter;
};

/*
 * The OpenTelemetry API keeps one global tracer provider, context manager and propagator per
 * process, so only one SDK can run at a time. This module remembers that one SDK's Fastify
 * plugin for fastifyOtelPlugin(); nothing is set at import, only by startTelemetry.
 */
let active: TelemetryHandle | null = null;
/** Set synchronously, so two concurrent calls cannot both pass the check before the imports resolve. */
let starting = false;

/**
 * The @fastify/otel plugin of the running SDK, or null when tracing is off or not started. For app
 * factories that are not handed the TelemetryHandle; `if (plugin) await app.register(plugin)`.
 */
export function fastifyOtelPlugin(): FastifyOtelPlugin | null {
  return active?.fastifyOtelPlugin() ?? null;
}

function disabled(reason: string): TelemetryHandle {
  return { enabled: false, reason, shutdown: () => Promise.resolve(), fastifyOtelPlugin: () => null };
}

/** OTEL_BSP_* as the SDK's own env path would apply them; invalid values keep the defaults. */
function batchOptionsFromEnv(env: NodeJS.ProcessEnv) {
  const num = (name: string) => {
    const raw = env[name]?.trim();
    const value = raw ? Number(raw) : NaN;
    return Number.isInteger(value) && value >= 0 ? value : undefined;
  };
  return {
    scheduledDelayMillis: num('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: num('OTEL_BSP_EXPORT_TIMEOUT'),
    maxQueueSize: num('OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: num('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
  };
}

async function createOtlpExporter(protocol: OtlpProtocol): Promise<SpanExporter> {
  // Imported on demand: only the chosen transport is loaded (grpc pulls in @grpc/grpc-js).
  switch (protocol) {
    case 'grpc':
      return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
    case 'http/json':
      return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
    case 'http/protobuf':
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
  }
}

async function createExportProcessors(
  kinds: TraceExporterKind[],
  protocol: OtlpProtocol,
  env: NodeJS.ProcessEnv,
  override: SpanExporter | undefined,
): Promise<SpanProcessor[]> {
  const { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor } =
    await import('@opentelemetry/sdk-trace');
  if (override) return [new SimpleSpanProcessor({ exporter: override })];
  return Promise.all(
    kinds.map(async (kind) =>
      kind === 'console'
        ? new SimpleSpanProcessor({ exporter: new ConsoleSpanExporter() })
        : new BatchSpanProcessor({
            exporter: await createOtlpExporter(protocol),
            ...batchOptionsFromEnv(env),
          }),
    ),
  );
}

/**
 * Starts OpenTelemetry tracing when the OTEL_* variables configure an exporter (rules in
 * tracing-config.ts and the telemetry ADR); otherwise returns a disabled handle and loads none of
 * the SDK. Call it first in main.ts, before building the Fastify app, and register
 * `handle.fastifyOtelPlugin()` in the app. Traces only: metrics and OTel logs are not exported
 * (logs go to stdout through createLogger, carrying trace ids). Rejects only when tracing is
 * configured but the SDK cannot load or start, or when it is already running.
 */
export async function startTelemetry(opts: StartTelemetryOptions): Promise<TelemetryHandle> {
  const config = resolveTracingConfig(opts.env);
  if (!config.enabled) return disabled(config.reason);
  if (active || starting) {
    throw new TelemetryError('VLT_TELEMETRY_ALREADY_STARTED', 'telemetry is already started in this process');
  }
  starting = true;
  try {
    active = await startSdk(opts, config);
    return active;
  } finally {
    starting = false;
  }
}

async function startSdk(
  opts: StartTelemetryOptions,
  config: Extract<TracingConfig, { enabled: true }>,
): Promise<TelemetryHandle> {
  const [
    { NodeSDK, core },
    { getNodeAutoInstrumentations: autoInstrumentations },
    { FastifyOtelInstrumentation },
    { PrismaInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/auto-instrumentations-node'),
    import('@fastify/otel'),
    import('@prisma/instrumentation'),
  ]);

  const fastifyInstrumentation = new FastifyOtelInstrumentation({
    registerOnInitialization: false,
    // @fastify/otel names hook and handler spans after the plugin, and an anonymous plugin's
    // name is its whole source text: name them by route instead (METHOD /route/:param).
    requestHook: (span, request) => span.updateName(routeSpanName(request)),
    lifecycleHook: (span, info) => {
      span.updateName(`${info.hookName} ${routeSpanName(info.request)}`);
      span.setAttribute('hook.name', info.hookName);
    },
  });
  const instrumentations: Instrumentation[] = [
    ...autoInstrumentations({
      // Our pino mixin already adds trace ids; the pino instrumentation would add them a second time.
      '@opentelemetry/instrumentation-pino': { enabled: false },
      // A span per DNS lookup and per socket drowns the request spans that matter.
      '@opentelemetry/instrumentation-dns': { enabled: false },
      '@opentelemetry/instrumentation-net': { enabled: false },
      // Metrics only, and no metrics are exported.
      '@opentelemetry/instrumentation-runtime-node': { enabled: false },
    }),
    fastifyInstrumentation,
    // Database spans: Prisma traces its own operations and statements (SQL text with bind
    // parameters, never values), whatever the module load order (ESM imports escape the
    // require hooks the pg instrumentation relies on).
    new PrismaInstrumentation() as unknown as Instrumentation,
  ];

  const sdk = new NodeSDK({
    // An operator's OTEL_SERVICE_NAME wins over the built-in name.
    serviceName: opts.env.OTEL_SERVICE_NAME?.trim() || opts.serviceName,
    instrumentations,
    // W3C trace context only, unless OTEL_PROPAGATORS says otherwise: the SDK's default also
    // propagates W3C baggage, which would forward whatever an agent puts there to providers.
    ...(opts.env.OTEL_PROPAGATORS?.trim() ? {} : { textMapPropagator: new core.W3CTraceContextPropagator() }),
    // Redaction first, so the exporting processors only ever see redacted URLs.
    spanProcessors: [
      new RedactingSpanProcessor(),
      ...(await createExportProcessors(config.exporters, config.protocol, opts.env, opts.spanExporter)),
    ],
    // Traces only: empty lists stop the SDK from defaulting metrics and logs to OTLP on localhost.
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();

  const timeoutMs = opts.shutdownTimeoutMs ?? 3000;
  let stopping: Promise<void> | undefined;
  const plugin = fastifyInstrumentation.plugin();
  const handle: TelemetryHandle = {
    enabled: true,
    reason: config.reason,
    fastifyOtelPlugin: () => (stopping ? null : plugin),
    shutdown: () =>
      (stopping ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
          timer.unref();
        });
        // Losing the last spans is acceptable; holding up process exit for a dead collector is not.
        await Promise.race([sdk.shutdown().catch(() => undefined), deadline]);
        clearTimeout(timer);
        for (const instrumentation of instrumentations) instrumentation.disable();
        // Release the API globals so a later start (tests, a restart in-process) can register again.
        trace.disable();
        context.disable();
        propagation.disable();
        if (active === handle) active = null;
      })()),
  };
  return handle;
}
