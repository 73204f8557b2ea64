import type { FastifyBaseLogger } from 'fastify';

/** Waits for SIGTERM/SIGINT, then drains once; a second signal or a stuck drain exits hard. */
export function runUntilSignal(
  logger: FastifyBaseLogger,
  drain: () => Promise<void>,
  graceMs = 15_000,
): Promise<void> {
  return new Promise((resolve) => {
    let draining = false;
    const onSignal = (signal: string) => {
      if (draining) process.exit(1);
      draining = true;
      logger.info({ signal }, 'shutting down');
      const timer = setTimeout(() => {
        logger.error('shutdown timed out');
        process.exit(1);
      }, graceMs);
      timer.unref();
      drain()
        .then(() => resolve())
        .catch((err: Error) => {
          logger.error({ err: err.message }, 'shutdown failed');
          process.exit(1);
        });
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
}
