/** Notifier process: consumes approval and security events, plus /health. */
import { busNames, createNatsBus } from '@vlt/bus';
import { loadConfig } from '@vlt/config';
import { runUntilSignal } from '@vlt/service-kit';
import { createLogger, startTelemetry } from '@vlt/telemetry';
import { buildNotifierApp } from './app.js';

async function main(): Promise<void> {
  const config = loadConfig('notifier', process.env);
  const telemetry = await startTelemetry({ serviceName: 'vlt-notifier', env: process.env });
  const logger = createLogger({ service: 'notifier', level: config.logLevel });
  const names = busNames(config.natsPrefix);
  const bus = await createNatsBus({ servers: config.natsServers, names, name: 'notifier', logger });
  const { app, consumer } = await buildNotifierApp({ bus, names, logger });
  await app.listen({ port: config.port, host: config.host });
  await runUntilSignal(logger, async () => {
    await app.close();
    await consumer.stop();
    await bus.close();
    await telemetry.shutdown();
  });
}

main().catch((err: Error) => {
  console.error(`notifier failed to start: ${err.message}`);
  process.exit(1);
});
