import type { Bus } from '@vlt/bus';
import { busNames } from '@vlt/bus';
import type { DataPlaneConfig } from '@vlt/config';
import { createUpstreamClient } from '@vlt/upstream';
import type { FastifyBaseLogger } from 'fastify';
import { createSnapshotCaches } from './caches.js';
import { createCredentialCache } from './credentials.js';
import type { DataPlaneDeps } from './deps.js';

export interface DataPlaneRuntime {
  deps: DataPlaneDeps;
  /** Resolves once every cache holds the full snapshot. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

export async function createDataPlaneRuntime(opts: {
  config: Readonly<DataPlaneConfig>;
  bus: Bus;
  logger: FastifyBaseLogger;
  now?: () => Date;
}): Promise<DataPlaneRuntime> {
  const { config, bus, logger } = opts;
  const names = busNames(config.natsPrefix);
  const caches = await createSnapshotCaches({ bus, names, logger });
  const credentials = createCredentialCache({ bus, names, ttlMs: config.credentialCacheMs });
  const upstream = createUpstreamClient({
    ssrfAllowCidrs: config.ssrfAllowCidrs,
    timeoutMs: config.upstreamTimeoutMs,
  });
  const deps: DataPlaneDeps = {
    config,
    bus,
    names,
    logger,
    caches,
    credentials,
    upstream,
    now: opts.now ?? (() => new Date()),
  };
  return {
    deps,
    ready: caches.ready,
    async stop() {
      await caches.stop();
      await upstream.close();
    },
  };
}
