/** Notifier process: delivers approval, connection and security notifications, plus /health. */
import { busNames, createNatsBus } from '@vlt/bus';
import { loadConfig } from '@vlt/config';
import { createPrismaClient } from '@vlt/db';
import { metricsFromConfig, runUntilSignal, serveMetrics } from '@vlt/service-kit';
import { createLogger, startTelemetry } from '@vlt/telemetry';
import { buildNotifierApp } from './app.js';

async function main(): Promise<void> {
  const config = loadConfig('notifier', process.env);
  const telemetry = await startTelemetry({ serviceName: 'vlt-notifier', env: process.env });
  const logger = createLogger({ service: 'notifier', level: config.logLevel });
  const prisma = createPrismaClient(config.databaseUrl);
  const names = busNames(config.natsPrefix);
  const bus = await createNatsBus({ servers: config.natsServers, names, name: 'notifier', logger });
  const metrics = metricsFromConfig(config, 'vlt-notifier');
  const { app, consumer } = await buildNotifierApp({
    bus,
    names,
    logger,
    prisma,
    publicBaseUrl: config.publicBaseUrl,
    pushApiUrl: config.pushApiUrl,
    ackWaitMs: config.notifierAckWaitMs,
    metrics,
  });
  await app.listen({ port: config.port, host: config.host });
  const metricsServer = await serveMetrics(metrics, config);
  await runUntilSignal(logger, async () => {
    await metricsServer?.close();
    await app.close();
    await consumer.stop();
    await bus.close();
    await prisma.$disconnect();
    await telemetry.shutdown();
  });
}

main().catch((err: Error) => {
  console.error(`notifier failed to start: ${err.message}`);
  process.exit(1);
});
