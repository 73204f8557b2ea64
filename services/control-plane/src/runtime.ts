import type { Bus } from '@vlt/bus';
import { busNames } from '@vlt/bus';
import type { ControlPlaneSettings } from '@vlt/config';
import { parseMasterKeys } from '@vlt/crypto';
import { sqlThroughPrisma, type PrismaClient, type Sql } from '@vlt/db';
import { createUpstreamClient } from '@vlt/upstream';
import type { FastifyBaseLogger } from 'fastify';
import type { ControlPlaneDeps } from './deps.js';
import { bindDatabaseToBus } from './infra/bus-binding.js';
import { createOutboxRelay } from './infra/outbox.js';
import { createRateLimiter } from './infra/rate-limiter.js';
import { createSigningKeys } from './infra/signing-keys.js';
import { expireStaleApprovals } from './modules/approvals/service.js';
import { purgeSpentOAuthFlows } from './modules/connections/oauth-flow.js';
import { resyncCaches, serveDataPlaneRequests } from './modules/data-plane-feed/service.js';
import type { ServiceMetrics } from '@vlt/service-kit';

export interface ControlPlaneRuntime {
  deps: ControlPlaneDeps;
  /** Starts background work: outbox relay, data-plane request handlers, cache resync. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function createControlPlaneRuntime(opts: {
  config: Readonly<ControlPlaneSettings> & { masterKey: string };
  prisma: PrismaClient;
  /** Raw statements on Prisma's pool (hot paths); through Prisma itself when not given. */
  sql?: Sql;
  bus: Bus;
  logger: FastifyBaseLogger;
  now?: () => Date;
  /** The embedded database: one process, one session (see the outbox relay). */
  embeddedDatabase?: boolean;
  /** CAs trusted for provider HTTPS besides the system's (tests; processes use NODE_EXTRA_CA_CERTS). */
  upstreamCa?: string[];
  metrics?: ServiceMetrics;
}): Promise<ControlPlaneRuntime> {
  const { config, prisma, bus, logger } = opts;
  const sql = opts.sql ?? sqlThroughPrisma(prisma);
  const keyring = parseMasterKeys(config.masterKey, config.masterKeysOld);
  const names = busNames(config.natsPrefix);
  // Before the relay exists: it must never publish another deployment's rows.
  await bindDatabaseToBus(sql, config.natsPrefix);
  const outbox = createOutboxRelay({
    prisma,
    sql,
    bus,
    logger,
    exclusivity: opts.embeddedDatabase ? 'single-process' : 'advisory-lock',
  });
  const signingKeys = await createSigningKeys({ prisma, keyring, issuer: config.publicBaseUrl });
  if (signingKeys.undecryptable().length) {
    logger.warn(
      { kids: signingKeys.undecryptable() },
      'some API signing keys were sealed with a master key this process does not hold; they verify but never sign',
    );
  }
  const upstream = createUpstreamClient({
    ssrfAllowCidrs: config.ssrfAllowCidrs,
    timeoutMs: 15_000,
    ...(opts.upstreamCa && { extraCa: opts.upstreamCa }),
  });
  const now = opts.now ?? (() => new Date());
  const deps: ControlPlaneDeps = {
    config,
    prisma,
    sql,
    bus,
    names,
    keyring,
    logger,
    upstream,
    signingKeys,
    outbox,
    rateLimiter: createRateLimiter(sql, now),
    now,
    ...(opts.metrics && { metrics: opts.metrics }),
  };
  opts.metrics?.gauge(
    'vlt_outbox_pending',
    'Committed changes whose events or cache updates are not yet published',
    async () => {
      const rows = await sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM outbox_events WHERE published_at IS NULL`;
      return rows[0]?.n ?? 0;
    },
  );
  const handles: { stop(): Promise<void> }[] = [];
  let expiryTimer: NodeJS.Timeout | undefined;
  let keyTimer: NodeJS.Timeout | undefined;
  return {
    deps,
    async start() {
      outbox.start();
      handles.push(...(await serveDataPlaneRequests(deps)));
      await resyncCaches(deps);
      await outbox.flush();
      // Pending approvals past their expiry become `expired` (and are audited) within 10 s.
      expiryTimer = setInterval(() => {
        expireStaleApprovals(deps).catch((err: Error) =>
          logger.warn({ err: err.message }, 'approval expiry failed'),
        );
      }, 10_000);
      expiryTimer.unref();
      // Pick up keys rotated by another replica or the rotation command, and drop retired ones.
      keyTimer = setInterval(() => {
        signingKeys
          .reload()
          .catch((err: Error) => logger.warn({ err: err.message }, 'signing key reload failed'));
        purgeSpentOAuthFlows(deps).catch((err: Error) =>
          logger.warn({ err: err.message }, 'purging spent OAuth flows failed'),
        );
      }, 60_000);
      keyTimer.unref();
    },
    async stop() {
      if (expiryTimer) clearInterval(expiryTimer);
      if (keyTimer) clearInterval(keyTimer);
      for (const h of handles) await h.stop();
      await outbox.stop();
      await upstream.close();
    },
  };
}
