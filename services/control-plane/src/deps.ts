import type { Bus, BusNames } from '@vlt/bus';
import type { ControlPlaneSettings } from '@vlt/config';
import type { MasterKeyring } from '@vlt/crypto';
import type { PrismaClient, Sql } from '@vlt/db';
import type { UpstreamClient } from '@vlt/upstream';
import type { FastifyBaseLogger } from 'fastify';
import type { OutboxRelay } from './infra/outbox.js';
import type { RateLimiter } from './infra/rate-limiter.js';
import type { SigningKeys } from './infra/signing-keys.js';
import type { ServiceMetrics } from '@vlt/service-kit';

/** Everything the control plane's service functions need: one typed object, no singletons. */
export interface ControlPlaneDeps {
  config: Readonly<ControlPlaneSettings>;
  prisma: PrismaClient;
  /** The same pool without the ORM, for statements on hot paths (token issuance, rate limits). */
  sql: Sql;
  bus: Bus;
  names: BusNames;
  keyring: MasterKeyring;
  logger: FastifyBaseLogger;
  upstream: UpstreamClient;
  signingKeys: SigningKeys;
  outbox: OutboxRelay;
  rateLimiter: RateLimiter;
  now: () => Date;
  /** When the process serves metrics (request rates, outbox depth). */
  metrics?: ServiceMetrics;
}
