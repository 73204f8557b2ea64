import { hostname } from 'node:os';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type DestinationStream, type Logger } from 'pino';
import { redactUrl } from './redact-url.js';
import { CENSOR, redactSecrets } from './redact-secrets.js';

export type { Logger, DestinationStream };

/**
 * Fixed pino `redact` paths, as a second line behind redactSecrets: they apply after serializers,
 * so a serializer that someone changes to include headers still cannot print these.
 */
export const REDACT_PATHS: readonly string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["x-vlt-session-key"]',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
];

/** The fields of a Fastify request (or a raw IncomingMessage) that the serializer reads. */
export type RequestLike = {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number } | null;
};

/**
 * pino serializer for Fastify requests (`req`): method and URL with query values removed (an SSE
 * client may pass its token as a query parameter; OAuth callbacks carry `code`), no headers.
 * Installed by createLogger, so `Fastify({ loggerInstance })` uses it for its request logs.
 */
export function serializeRequest(req: RequestLike): Record<string, unknown> {
  if (typeof req !== 'object' || req === null) return {};
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : undefined,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/** pino serializer for Fastify replies (`res`): the status code only. */
export function serializeReply(res: { statusCode?: number }): Record<string, unknown> {
  return typeof res === 'object' && res !== null ? { statusCode: res.statusCode } : {};
}

/** pino's error serializer, flattened to a plain object so that its custom properties are walked too. */
function serializeError(err: Error): unknown {
  const serialized: unknown = pino.stdSerializers.err(err);
  return typeof serialized === 'object' && serialized !== null
    ? redactSecrets({ ...serialized })
    : serialized;
}

/** Adds the active span's ids so a log line can be joined to its trace (OTel log data model names). */
function traceContextMixin(): Record<string, string> {
  const ctx = trace.getActiveSpan()?.spanContext();
  if (!ctx || !isSpanContextValid(ctx)) return {};
  return {
    trace_id: ctx.traceId,
    span_id: ctx.spanId,
    trace_flags: `0${ctx.traceFlags.toString(16)}`.slice(-2),
  };
}

export type CreateLoggerOptions = {
  service: string;
  level?: string;
  /** Where JSON lines go; stdout when absent. Tests pass a collecting stream. */
  destination?: DestinationStream;
};

/**
 * JSON logger for every service: service name, trace ids when a span is active, secrets redacted
 * (SECRET_KEYS at any depth; the message string itself is not inspected, so never interpolate
 * secrets into it).
 */
export function createLogger(opts: CreateLoggerOptions): Logger {
  const options = {
    level: opts.level ?? 'info',
    base: { service: opts.service, pid: process.pid, hostname: hostname() },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: {
      level: (label: string) => ({ level: label }),
      log: (record: Record<string, unknown>) => redactSecrets(record),
    },
    mixin: traceContextMixin,
    redact: { paths: [...REDACT_PATHS], censor: CENSOR },
    // Serializers run after formatters.log, so their output is walked again here.
    serializers: {
      req: (req: RequestLike) => redactSecrets(serializeRequest(req)),
      res: (res: { statusCode?: number }) => redactSecrets(serializeReply(res)),
      err: serializeError,
    },
  };
  // stdout is written synchronously, as Node writes process.stdout to a pipe or file on Linux.
  // pino's default hands every line to the libuv threadpool: a thread hop per request's access
  // line, lines held back while DNS or crypto fill the pool, and lost if the process is killed
  // (ADR 0088).
  const logger = pino(options, opts.destination ?? pino.destination({ dest: 1, sync: true }));
  // pino skips formatters for child bindings (`logger.child({ token })`), so they are redacted
  // here; children are created from this instance's prototype chain and inherit the override.
  const child = logger.child;
  logger.child = function (this: Logger, bindings, childOptions) {
    return child.call(this, redactSecrets(bindings), childOptions);
  } as Logger['child'];
  return logger;
}
