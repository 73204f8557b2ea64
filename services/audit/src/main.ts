/** Audit process: the JetStream consumer that writes audit rows, plus /health. */
import { busNames, createNatsBus } from '@vlt/bus';
import { loadConfig } from '@vlt/config';
import { createDatabaseClients } from '@vlt/db';
import { metricsFromConfig, runUntilSignal, serveMetrics } from '@vlt/service-kit';
import { createLogger, startTelemetry } from '@vlt/telemetry';
import { buildAuditApp } from './app.js';

async function main(): Promise<void> {
  const config = loadConfig('audit', process.env);
  const telemetry = await startTelemetry({ serviceName: 'vlt-audit', env: process.env });
  const logger = createLogger({ service: 'audit', level: config.logLevel });
  const { sql, close: closeDatabase } = createDatabaseClients(config.databaseUrl, {
    preparedStatements: config.databasePreparedStatements,
  });
  const names = busNames(config.natsPrefix);
  const bus = await createNatsBus({ servers: config.natsServers, names, name: 'audit', logger });
  const metrics = metricsFromConfig(config, 'vlt-audit');
  const { app, consumer } = await buildAuditApp({ bus, names, sql, logger, metrics });
  await app.listen({ port: config.port, host: config.host });
  const metricsServer = await serveMetrics(metrics, config);
  await runUntilSignal(logger, async () => {
    await metricsServer?.close();
    await app.close();
    await consumer.stop();
    await bus.close();
    await closeDatabase();
    await telemetry.shutdown();
  });
}

main().catch((err: Error) => {
  console.error(`audit failed to start: ${err.message}`);
  process.exit(1);
});
