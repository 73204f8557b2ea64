import type { Bus, BusNames, Consumer } from '@vlt/bus';
import type { Sql } from '@vlt/db';
import { createServiceApp, type App, type ServiceMetrics } from '@vlt/service-kit';
import type { FastifyBaseLogger } from 'fastify';
import { startAuditWriter } from './audit-writer.js';

export interface AuditDeps {
  bus: Bus;
  names: BusNames;
  sql: Sql;
  logger: FastifyBaseLogger;
  metrics?: ServiceMetrics;
}

/** The audit service: its consumer, and an HTTP face for health and docs. */
export async function buildAuditApp(deps: AuditDeps): Promise<{ app: App; consumer: Consumer }> {
  const consumer = await startAuditWriter(deps);
  deps.metrics?.gauge(
    'vlt_audit_consumer_pending',
    'Events the audit writer has not yet stored (its lag)',
    () => consumer.pending(),
  );
  const app = await createServiceApp({
    title: 'Agent credential vault — audit',
    logger: deps.logger,
    trustProxy: [],
    metrics: deps.metrics,
    health: async () => {
      // Not ready when the broker it reads from or the database it writes to is gone.
      if (!deps.bus.isConnected()) return 'bus disconnected';
      await deps.sql`SELECT 1`;
      return 'ok';
    },
  });
  return { app, consumer };
}
