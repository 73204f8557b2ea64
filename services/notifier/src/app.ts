import type { Consumer } from '@vlt/bus';
import { createServiceApp, type App, type ServiceMetrics } from '@vlt/service-kit';
import { startNotifier, type NotifierDeps } from './notification-consumer.js';

export type { NotifierDeps };

/** The notifier service: its consumer, and an HTTP face for health and docs. */
export async function buildNotifierApp(
  deps: NotifierDeps & { metrics?: ServiceMetrics },
): Promise<{ app: App; consumer: Consumer }> {
  const consumer = await startNotifier(deps);
  deps.metrics?.gauge(
    'vlt_notifier_consumer_pending',
    'Events the notifier has not yet delivered (its lag)',
    () => consumer.pending(),
  );
  const app = await createServiceApp({
    title: 'Agent credential vault — notifier',
    logger: deps.logger,
    trustProxy: [],
    metrics: deps.metrics,
    health: async () => {
      if (!deps.bus.isConnected()) return 'bus disconnected';
      await deps.prisma.$queryRaw`SELECT 1`;
      return 'ok';
    },
  });
  return { app, consumer };
}
