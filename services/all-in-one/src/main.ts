/** The embedded default: `make start`. One process, one port, every route. */
import { loadConfig } from '@vlt/config';
import { runUntilSignal } from '@vlt/service-kit';
import { createLogger, startTelemetry } from '@vlt/telemetry';
import { startAllInOne } from './all-in-one.js';

async function main(): Promise<void> {
  const config = loadConfig('all-in-one', process.env);
  const telemetry = await startTelemetry({ serviceName: 'vlt-gateway', env: process.env });
  const logger = createLogger({ service: 'all-in-one', level: config.logLevel });
  const gateway = await startAllInOne(config, logger);
  await gateway.app.listen({ port: config.port, host: config.host });
  logger.info(
    {
      url: config.publicBaseUrl,
      embeddedDb: !config.databaseUrl,
      embeddedBus: config.natsServers.length === 0,
    },
    'gateway ready',
  );
  await runUntilSignal(logger, async () => {
    await gateway.close();
    await telemetry.shutdown();
  });
}

main().catch((err: Error) => {
  console.error(`gateway failed to start: ${err.message}`);
  process.exit(1);
});
