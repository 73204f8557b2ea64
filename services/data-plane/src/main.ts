/** Data-plane process: stateless; serves Model A/B from caches pushed over NATS. */
import { busNames, createNatsBus } from '@vlt/bus';
import { loadConfig } from '@vlt/config';
import { metricsFromConfig, runUntilSignal, serveMetrics } from '@vlt/service-kit';
import { createLogger, startTelemetry } from '@vlt/telemetry';
import { buildDataPlaneApp } from './app.js';
import { createDataPlaneRuntime } from './runtime.js';

async function main(): Promise<void> {
  const config = loadConfig('data-plane', process.env);
  const telemetry = await startTelemetry({ serviceName: 'vlt-data-plane', env: process.env });
  const logger = createLogger({ service: 'data-plane', level: config.logLevel });
  const bus = await createNatsBus({
    servers: config.natsServers,
    names: busNames(config.natsPrefix),
    name: 'data-plane',
    logger,
  });
  const metrics = metricsFromConfig(config, 'vlt-data-plane');
  const runtime = await createDataPlaneRuntime({ config, bus, logger, metrics });
  await runtime.ready;
  const app = await buildDataPlaneApp(runtime.deps);
  await app.listen({ port: config.port, host: config.host });
  const metricsServer = await serveMetrics(metrics, config);
  await runUntilSignal(logger, async () => {
    await metricsServer?.close();
    await app.close();
    await runtime.stop();
    await bus.close();
    await telemetry.shutdown();
  });
}

main().catch((err: Error) => {
  console.error(`data-plane failed to start: ${err.message}`);
  process.exit(1);
});
