import type { Bus, BusNames, Consumer } from '@vlt/bus';
import { createServiceApp, type App } from '@vlt/service-kit';
import type { FastifyBaseLogger } from 'fastify';
import { startNotifier } from './notification-consumer.js';

export interface NotifierDeps {
  bus: Bus;
  names: BusNames;
  logger: FastifyBaseLogger;
}

/** The notifier service: its consumer, and an HTTP face for health and docs. */
export async function buildNotifierApp(deps: NotifierDeps): Promise<{ app: App; consumer: Consumer }> {
  const consumer = await startNotifier(deps);
  const app = await createServiceApp({
    title: 'Agent credential vault — notifier',
    logger: deps.logger,
    trustProxy: [],
    health: () => (deps.bus.isConnected() ? 'ok' : 'bus disconnected'),
  });
  return { app, consumer };
}
