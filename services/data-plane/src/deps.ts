import type { Bus, BusNames } from '@vlt/bus';
import type { DataPlaneSettings } from '@vlt/config';
import type { UpstreamClient } from '@vlt/upstream';
import type { FastifyBaseLogger } from 'fastify';
import type { SnapshotCaches } from './caches.js';
import type { CredentialCache } from './credentials.js';
import type { RateCounter } from './rate-counter.js';
import type { ResponseFilterPool } from './modules/execute/response-pool.js';
import type { ServiceMetrics } from '@vlt/service-kit';

export interface DataPlaneDeps {
  config: Readonly<DataPlaneSettings>;
  bus: Bus;
  names: BusNames;
  logger: FastifyBaseLogger;
  caches: SnapshotCaches;
  credentials: CredentialCache;
  rateCounter: RateCounter;
  upstream: UpstreamClient;
  /** Worker threads for large buffered responses; absent: filtered on the request's thread. */
  responseFilterPool?: ResponseFilterPool;
  now: () => Date;
  /** Decisions by outcome, when the process serves metrics. */
  metrics?: ServiceMetrics;
}
