import { createRequire } from 'node:module';
import { expect, it } from 'vitest';

it('importing @vlt/telemetry registers nothing and loads no OpenTelemetry SDK', async () => {
  const api = await import('./index.js');
  expect(typeof api.startTelemetry).toBe('function');
  // The OTel API keeps its registrations on this global; nothing may be registered at import.
  expect((globalThis as Record<symbol, unknown>)[Symbol.for('opentelemetry.js.api.1')]).toBeUndefined();
  const loaded = Object.keys(createRequire(import.meta.url).cache);
  expect(
    loaded.filter((path) => /sdk-node|auto-instrumentations|@fastify[\\/]otel|exporter-trace/.test(path)),
  ).toEqual([]);
  expect(api.fastifyOtelPlugin()).toBeNull();
});
