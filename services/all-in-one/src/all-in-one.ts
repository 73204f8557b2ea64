/**
 * Every service in one process on one port: control plane and data plane route trees on
 * one Fastify instance, the audit writer and notifier as in-process consumers. With no
 * DATABASE_URL it runs embedded PostgreSQL (PGlite); with no NATS_URL, the in-process bus.
 */
import { startAuditWriter } from '@vlt/audit';
import { busNames, createBus } from '@vlt/bus';
import type { AllInOneConfig } from '@vlt/config';
import { controlPlaneRoutes, createControlPlaneRuntime } from '@vlt/control-plane';
import { loadOrCreateDevMasterKey } from '@vlt/crypto';
import { createDataPlaneRuntime, dataPlaneRoutes } from '@vlt/data-plane';
import { openDatabase } from '@vlt/db';
import { startNotifier, transportVia } from '@vlt/notifier';
import { createServiceApp, metricsFromConfig, serveMetrics, type App } from '@vlt/service-kit';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';

export interface AllInOne {
  app: App;
  /** The port of /metrics when VLT_METRICS_PORT is set. */
  metricsPort: number | undefined;
  /** Drains and releases everything, in reverse order of start. */
  close(): Promise<void>;
}

export async function startAllInOne(
  config: Readonly<AllInOneConfig>,
  logger: FastifyBaseLogger,
  /** Test seams only; production configuration comes from `config`. */
  seams: { upstreamCa?: string[] } = {},
): Promise<AllInOne> {
  let masterKey = config.masterKey;
  if (!masterKey) {
    const dev = loadOrCreateDevMasterKey(config.dataDir);
    masterKey = dev.key;
    logger.warn(
      { dataDir: config.dataDir, created: dev.created },
      'VLT_MASTER_KEY is not set: using a development master key kept in the data dir (never do this in production)',
    );
  }
  // The in-process bus lives in this process only: a second such gateway on the same database
  // would publish this one's outbox to its own bus (and the other way round). Refuse it.
  const exclusive =
    config.databaseUrl && config.natsServers.length === 0
      ? await claimDatabase(config.databaseUrl, logger)
      : null;
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    migrate: true,
    preparedStatements: config.databasePreparedStatements,
  });
  const names = busNames(config.natsPrefix);
  const bus = await createBus({ natsServers: config.natsServers, names, logger });

  const metrics = metricsFromConfig(config, 'vlt-all-in-one');
  const cp = await createControlPlaneRuntime({
    config: { ...config, masterKey },
    prisma: db.prisma,
    sql: db.sql,
    bus,
    logger,
    embeddedDatabase: db.embedded,
    metrics,
    ...seams,
  }).catch(async (err: unknown) => {
    // Refused before anything else started (a database bound to another bus, ADR 0071): give
    // back what did, so a failed start leaves no pool, connection or claim behind.
    await bus.close().catch(() => undefined);
    await db.close().catch(() => undefined);
    await exclusive?.end().catch(() => undefined);
    throw err;
  });
  const dp = await createDataPlaneRuntime({ config, bus, logger, metrics, ...seams });
  const audit = await startAuditWriter({ bus, names, sql: db.sql, logger });
  metrics?.gauge('vlt_audit_consumer_pending', 'Events the audit writer has not yet stored (its lag)', () =>
    audit.pending(),
  );
  const notifier = await startNotifier({
    bus,
    names,
    logger,
    prisma: db.prisma,
    publicBaseUrl: config.publicBaseUrl,
    pushApiUrl: config.pushApiUrl,
    ackWaitMs: config.notifierAckWaitMs,
    // Chat and push calls share the control plane's upstream client (its CAs and SSRF guard).
    transport: transportVia(cp.deps.upstream),
  });

  const app = await createServiceApp({
    title: 'Agent credential vault',
    logger,
    trustProxy: config.trustProxy,
    bodyLimit: 10 * 1024 * 1024,
    metrics,
  });
  await app.register(controlPlaneRoutes(cp.deps));
  await app.register(dataPlaneRoutes(dp.deps));
  await cp.start();
  await dp.ready;
  const metricsServer = await serveMetrics(metrics, config);

  return {
    app,
    metricsPort: metricsServer?.port,
    async close() {
      try {
        await metricsServer?.close();
        await app.close();
        await dp.stop();
        await cp.stop();
        await notifier.stop();
        await audit.stop();
        await bus.close();
      } finally {
        await db.close();
        await exclusive?.end();
      }
    },
  };
}

async function claimDatabase(databaseUrl: string, logger: FastifyBaseLogger): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrl });
  // A database restart ends this session (and the claim with it); an unhandled 'error' event
  // would take the whole gateway down instead.
  client.on('error', (err) => logger.warn({ err: err.message }, 'database claim connection lost'));
  await client.connect();
  const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(7311002) AS ok');
  if (!rows[0]?.ok) {
    await client.end();
    throw new Error(
      'another all-in-one gateway with an in-process bus already uses this database; set NATS_URL to run several',
    );
  }
  return client;
}
