/**
 * Control-plane process (split deployment): owns PostgreSQL, pushes snapshots to data
 * planes over NATS KV, serves their requests, publishes events through the outbox.
 */
import { busNames, createNatsBus } from '@vlt/bus';
import { loadConfig } from '@vlt/config';
import { applyMigrations, createDatabaseClients } from '@vlt/db';
import { createLogger, startTelemetry } from '@vlt/telemetry';
import { buildControlPlaneApp } from './app.js';
import { createControlPlaneRuntime } from './runtime.js';
import { metricsFromConfig, runUntilSignal, serveMetrics } from '@vlt/service-kit';

async function main(): Promise<void> {
  const config = loadConfig('control-plane', process.env);
  const telemetry = await startTelemetry({ serviceName: 'vlt-control-plane', env: process.env });
  const logger = createLogger({ service: 'control-plane', level: config.logLevel });
  await applyMigrations(config.databaseUrl);
  const db = createDatabaseClients(config.databaseUrl, {
    preparedStatements: config.databasePreparedStatements,
  });
  const bus = await createNatsBus({
    servers: config.natsServers,
    names: busNames(config.natsPrefix),
    name: 'control-plane',
    logger,
  });
  const metrics = metricsFromConfig(config, 'vlt-control-plane');
  const runtime = await createControlPlaneRuntime({
    config,
    prisma: db.prisma,
    sql: db.sql,
    bus,
    logger,
    metrics,
  });
  const app = await buildControlPlaneApp(runtime.deps);
  await runtime.start();
  await app.listen({ port: config.port, host: config.host });
  const metricsServer = await serveMetrics(metrics, config);
  await runUntilSignal(logger, async () => {
    await metricsServer?.close();
    await app.close();
    await runtime.stop();
    await bus.close();
    await db.close();
    await telemetry.shutdown();
  });
}

main().catch((err: Error) => {
  // Config and start-up errors are written for operators and carry no secret values.
  console.error(`control-plane failed to start: ${err.message}`);
  process.exit(1);
});
