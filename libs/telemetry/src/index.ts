/**
 * @vlt/telemetry: JSON logs (pino) that carry trace ids and never print secrets, and opt-in
 * OpenTelemetry tracing. Nothing runs at import; the SDK is loaded only when tracing is on.
 */
export {
  createLogger,
  serializeRequest,
  serializeReply,
  REDACT_PATHS,
  type CreateLoggerOptions,
  type DestinationStream,
  type Logger,
  type RequestLike,
} from './logger.js';
export { redactSecrets, isSecretKey, SECRET_KEYS, CENSOR } from './redact-secrets.js';
export { redactUrl, redactQuery, REDACTED } from './redact-url.js';
export {
  startTelemetry,
  fastifyOtelPlugin,
  type FastifyOtelPlugin,
  type StartTelemetryOptions,
  type TelemetryHandle,
} from './telemetry.js';
export {
  resolveTracingConfig,
  type OtlpProtocol,
  type TraceExporterKind,
  type TracingConfig,
} from './tracing-config.js';
export { RedactingSpanProcessor } from './redacting-span-processor.js';
export { TelemetryError, type TelemetryErrorCode } from './errors.js';
