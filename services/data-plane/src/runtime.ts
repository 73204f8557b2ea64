import type { Bus } from '@vlt/bus';
import { busNames } from '@vlt/bus';
import type { DataPlaneSettings } from '@vlt/config';
import { createUpstreamClient } from '@vlt/upstream';
import type { FastifyBaseLogger } from 'fastify';
import { createSnapshotCaches } from './caches.js';
import { createCredentialCache } from './credentials.js';
import type { DataPlaneDeps } from './deps.js';
import { createRateCounter } from './rate-counter.js';
import { createResponseFilterPool } from './modules/execute/response-pool.js';
import type { ServiceMetrics } from '@vlt/service-kit';

export interface DataPlaneRuntime {
  deps: DataPlaneDeps;
  /** Resolves once every cache holds the full snapshot. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

export async function createDataPlaneRuntime(opts: {
  config: Readonly<DataPlaneSettings>;
  bus: Bus;
  logger: FastifyBaseLogger;
  now?: () => Date;
  /** CAs trusted for provider HTTPS besides the system's (tests; processes use NODE_EXTRA_CA_CERTS). */
  upstreamCa?: string[];
  metrics?: ServiceMetrics;
}): Promise<DataPlaneRuntime> {
  const { config, bus, logger } = opts;
  const names = busNames(config.natsPrefix);
  const caches = await createSnapshotCaches({ bus, names, logger });
  const credentials = createCredentialCache({
    bus,
    names,
    ttlMs: config.credentialCacheMs,
    staleMs: config.credentialStaleMs,
    logger,
  });
  const upstream = createUpstreamClient({
    ssrfAllowCidrs: config.ssrfAllowCidrs,
    timeoutMs: config.upstreamTimeoutMs,
    idleTimeoutMs: config.upstreamIdleTimeoutMs,
    deadlineMs: config.upstreamDeadlineMs,
    streamDeadlineMs: config.upstreamStreamDeadlineMs,
    maxConnectionsPerOrigin: config.upstreamMaxConnections,
    dnsCacheMs: config.dnsCacheMs,
    ...(opts.upstreamCa && { extraCa: opts.upstreamCa }),
  });
  const responseFilterPool = createResponseFilterPool();
  const deps: DataPlaneDeps = {
    config,
    bus,
    names,
    logger,
    caches,
    credentials,
    rateCounter: createRateCounter({ bus, names }),
    upstream,
    responseFilterPool,
    now: opts.now ?? (() => new Date()),
    ...(opts.metrics && { metrics: opts.metrics }),
  };
  return {
    deps,
    ready: caches.ready,
    async stop() {
      await caches.stop();
      await upstream.close();
      await responseFilterPool.close();
    },
  };
}
