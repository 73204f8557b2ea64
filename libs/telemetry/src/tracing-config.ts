/**
 * Whether and how tracing starts, decided from the standard OTEL_* variables only (ADR 0008:
 * "tracing off when no exporter is set"). Pure, so the rules have a table test; the ADR
 * docs/decisions/0008-telemetry.md states them for operators.
 */

export type TraceExporterKind = 'otlp' | 'console';
export type OtlpProtocol = 'http/protobuf' | 'http/json' | 'grpc';

export type TracingConfig =
  | { enabled: false; reason: string }
  | { enabled: true; reason: string; exporters: TraceExporterKind[]; protocol: OtlpProtocol };

const SUPPORTED_EXPORTERS: readonly string[] = ['otlp', 'console'];
const PROTOCOLS: readonly string[] = ['http/protobuf', 'http/json', 'grpc'];

/** The spec treats an empty variable as unset. */
function read(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

export function resolveTracingConfig(env: NodeJS.ProcessEnv): TracingConfig {
  if (read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') {
    return { enabled: false, reason: 'OTEL_SDK_DISABLED=true' };
  }

  const listed = (read(env, 'OTEL_TRACES_EXPORTER') ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (listed.includes('none')) return { enabled: false, reason: 'OTEL_TRACES_EXPORTER=none' };
  // An unknown exporter turns tracing off rather than guessing: the boot log shows the reason.
  const unsupported = listed.filter((name) => !SUPPORTED_EXPORTERS.includes(name));
  if (unsupported.length > 0) {
    return {
      enabled: false,
      reason: `unsupported OTEL_TRACES_EXPORTER value(s): ${unsupported.join(', ')} (supported: otlp, console, none)`,
    };
  }

  const endpointVar = ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT'].find((name) =>
    read(env, name),
  );
  let exporters = [...new Set(listed)] as TraceExporterKind[];
  if (exporters.length === 0) {
    // The SDK would default to OTLP on localhost; here an unset exporter with no endpoint means off.
    if (!endpointVar) {
      return {
        enabled: false,
        reason:
          'no trace exporter configured (set OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)',
      };
    }
    exporters = ['otlp'];
  }

  const protocol =
    read(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ??
    read(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ??
    'http/protobuf';
  if (exporters.includes('otlp') && !PROTOCOLS.includes(protocol)) {
    return {
      enabled: false,
      reason: `unsupported OTLP protocol "${protocol}" (supported: ${PROTOCOLS.join(', ')})`,
    };
  }

  const parts = exporters.map((kind) =>
    kind === 'otlp'
      ? `otlp ${protocol} to ${endpointVar ? `$${endpointVar}` : 'the default endpoint'}`
      : 'console',
  );
  return {
    enabled: true,
    reason: `tracing on: ${parts.join(', ')}`,
    exporters,
    protocol: protocol as OtlpProtocol,
  };
}
