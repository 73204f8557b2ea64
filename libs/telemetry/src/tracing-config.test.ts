import { describe, expect, it } from 'vitest';
import { resolveTracingConfig } from './index.js';

const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

describe('resolveTracingConfig', () => {
  it.each<[string, NodeJS.ProcessEnv, boolean, RegExp]>([
    ['no OTEL variables', {}, false, /no trace exporter configured/],
    [
      'empty endpoint counts as unset',
      { OTEL_EXPORTER_OTLP_ENDPOINT: ' ' },
      false,
      /no trace exporter configured/,
    ],
    ['generic endpoint', ENDPOINT, true, /otlp http\/protobuf to \$OTEL_EXPORTER_OTLP_ENDPOINT/],
    [
      'traces endpoint',
      { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' },
      true,
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/,
    ],
    [
      'explicit otlp without endpoint uses the spec default',
      { OTEL_TRACES_EXPORTER: 'otlp' },
      true,
      /default endpoint/,
    ],
    ['console', { OTEL_TRACES_EXPORTER: 'console' }, true, /console/],
    ['none wins over an endpoint', { ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }, false, /=none/],
    ['none among others', { OTEL_TRACES_EXPORTER: 'otlp,none' }, false, /=none/],
    ['SDK disabled', { ...ENDPOINT, OTEL_SDK_DISABLED: 'TRUE' }, false, /OTEL_SDK_DISABLED/],
    ['SDK disabled=false is ignored', { ...ENDPOINT, OTEL_SDK_DISABLED: 'false' }, true, /otlp/],
    [
      'unsupported exporter',
      { ...ENDPOINT, OTEL_TRACES_EXPORTER: 'zipkin' },
      false,
      /unsupported OTEL_TRACES_EXPORTER value\(s\): zipkin/,
    ],
    [
      'unsupported protocol',
      { ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' },
      false,
      /unsupported OTLP protocol/,
    ],
    [
      'protocol is irrelevant for console',
      { OTEL_TRACES_EXPORTER: 'console', OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' },
      true,
      /console/,
    ],
  ])('%s', (_label, env, enabled, reason) => {
    const config = resolveTracingConfig(env);
    expect(config.enabled).toBe(enabled);
    expect(config.reason).toMatch(reason);
  });

  it('picks the traces protocol over the generic one and de-duplicates exporters', () => {
    const config = resolveTracingConfig({
      ...ENDPOINT,
      OTEL_TRACES_EXPORTER: 'OTLP, console,otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    });
    expect(config).toMatchObject({ enabled: true, exporters: ['otlp', 'console'], protocol: 'http/json' });
  });

  it('never echoes variable values that could hold credentials', () => {
    const config = resolveTracingConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://user:hunter2@collector:4318',
    });
    expect(config.reason).not.toContain('hunter2');
  });
});
