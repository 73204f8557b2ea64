/**
 * Process configuration: parsed once at start-up from the environment, validated, frozen.
 * Names are part of the product's interface (operators and external tools rely on them; the
 * README lists them).
 * Dynamic configuration (policies) is data, compiled by the control plane; never env.
 */
import { z } from 'zod';
import { parseProviderSettings, type ProviderSettings } from './providers.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
  readonly code = 'CONFIG_INVALID';
}

const csv = z
  .string()
  .optional()
  .transform((s) =>
    (s ?? '')
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );

const optionalUrl = z
  .string()
  .optional()
  .transform((s) => (s && s.trim() !== '' ? s.trim() : undefined));

const cidr = z.string().regex(/^[0-9a-fA-F:.]+\/\d{1,3}$/, 'expected a CIDR such as 127.0.0.1/32');

const baseShape = {
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Prometheus metrics on a port of their own; unset: no metrics listener. */
  VLT_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  HOST: z.string().default('0.0.0.0'),
  PUBLIC_BASE_URL: optionalUrl,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  NATS_URL: optionalUrl,
  /** Prefix for every subject, stream and bucket: keeps environments sharing one NATS apart. */
  VLT_NATS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/)
    .default('vlt'),
  VLT_TRUST_PROXY: csv,
  VLT_SSRF_ALLOW_CIDRS: csv.pipe(z.array(cidr)),
};

/** For the processes that hold a PostgreSQL connection pool. */
const databaseShape = {
  DATABASE_URL: optionalUrl,
  /** Named prepared statements on hot paths; `false` behind PgBouncer's transaction mode < 1.21. */
  VLT_DB_PREPARED_STATEMENTS: z.enum(['true', 'false']).default('true'),
};

const controlPlaneShape = {
  ...databaseShape,
  VLT_DATA_DIR: z.string().default('./.vlt-data'),
  VLT_MASTER_KEY: optionalUrl,
  VLT_MASTER_KEYS_OLD: z.string().optional(),
  AGENT_TOKEN_AUDIENCE: optionalUrl,
  AGENT_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).max(86_400).default(7200),
  BOOTSTRAP_SECRET_TTL_HOURS: z.coerce.number().positive().max(168).default(1),
  VLT_APPROVAL_TTL_SECONDS: z.coerce.number().int().min(30).max(86_400).default(300),
  VLT_SIGNUP: z.enum(['open', 'closed']).default('open'),
};

const dataPlaneShape = {
  /** Upstream request timeout (headers), milliseconds. */
  VLT_UPSTREAM_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(30_000),
  /** Longest silence between two chunks of a provider's body, milliseconds. */
  VLT_UPSTREAM_IDLE_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(30_000),
  /** Total time for a buffered provider call, connect to last byte, milliseconds. */
  VLT_UPSTREAM_DEADLINE_MS: z.coerce.number().int().min(100).max(600_000).default(60_000),
  /** Total time for a streamed or downloaded provider call, milliseconds. */
  VLT_UPSTREAM_STREAM_DEADLINE_MS: z.coerce.number().int().min(100).max(3_600_000).default(600_000),
  /**
   * An LLM proxy call's wait for the provider's headers, between two chunks, and for a whole
   * buffered answer, milliseconds: a model may think for minutes (the official SDKs wait 10).
   */
  VLT_LLM_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(600_000),
  /**
   * Largest request body an LLM proxy call may carry, bytes: OpenAI transcribes audio up to
   * 25 MB, and a call with images may pass 10 MiB (Anthropic takes 32 MB). Held in memory while
   * it is judged, and an upload while it is rewritten.
   */
  VLT_LLM_BODY_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .max(256 * 1024 * 1024)
    .default(32 * 1024 * 1024),
  /**
   * Most bytes of large LLM proxy request bodies (over 64 KiB, or of undeclared length) one
   * process holds at once; one more is answered 503. At least VLT_LLM_BODY_MAX_BYTES.
   */
  VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .max(16 * 1024 * 1024 * 1024)
    .default(128 * 1024 * 1024),
  /** Most provider calls a process keeps open at once to one origin; one more is answered 503. */
  VLT_UPSTREAM_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(65_536).default(1024),
  /** How long a provider host name's DNS answer is reused, milliseconds; 0 resolves every call. */
  VLT_DNS_CACHE_MS: z.coerce.number().int().min(0).max(300_000).default(10_000),
  /** How long fetched provider credentials stay cached in a data-plane pod. */
  VLT_CREDENTIAL_CACHE_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
  /**
   * How long past its fetch a cached credential is still served while the control plane gives
   * no answer (never past an OAuth token's expiry); 0 turns the outage fallback off.
   */
  VLT_CREDENTIAL_STALE_MS: z.coerce.number().int().min(0).max(3_600_000).default(900_000),
};

const notifierShape = {
  /** Mobile push service (Expo-style push API). */
  VLT_PUSH_API_URL: z
    .string()
    .url()
    .refine((u) => u.startsWith('https://'), 'must use https')
    .default('https://exp.host/--/api/v2/push/send'),
  /**
   * How long the notifier may hold an event before JetStream gives it to another notifier (or
   * to itself after a restart). Above the longest delivery (provider calls time out at 5 s).
   */
  VLT_NOTIFIER_ACK_WAIT_MS: z.coerce.number().int().min(1_000).max(300_000).default(30_000),
};

const schemas = {
  'control-plane': z.object({ ...baseShape, ...controlPlaneShape }),
  'data-plane': z.object({ ...baseShape, ...dataPlaneShape }),
  audit: z.object({ ...baseShape, ...databaseShape }),
  notifier: z.object({ ...baseShape, DATABASE_URL: optionalUrl, ...notifierShape }),
  'all-in-one': z.object({ ...baseShape, ...controlPlaneShape, ...dataPlaneShape, ...notifierShape }),
} as const;

export type ServiceName = keyof typeof schemas;
type RawAll = z.infer<(typeof schemas)['all-in-one']>;

export interface CommonConfig {
  service: ServiceName;
  env: 'development' | 'production' | 'test';
  port: number;
  host: string;
  /** `VLT_METRICS_PORT`: where /metrics is served (same host); undefined: not served. */
  metricsPort: number | undefined;
  publicBaseUrl: string;
  logLevel: string;
  /** NATS_URL split into its servers, once. Empty only for the all-in-one (in-process bus). */
  natsServers: string[];
  natsPrefix: string;
  trustProxy: string[];
  ssrfAllowCidrs: string[];
  /** Every provider's endpoints and the deployment's OAuth apps (`VLT_<PROVIDER>_*`). */
  providers: ProviderSettings;
}

/** What the control-plane runtime reads, whichever process hosts it. */
export interface ControlPlaneSettings extends CommonConfig {
  dataDir: string;
  masterKeysOld: string | undefined;
  agentTokenAudience: string;
  agentTokenTtlSeconds: number;
  bootstrapSecretTtlSeconds: number;
  approvalTtlSeconds: number;
  signup: 'open' | 'closed';
}

/** What the data-plane runtime reads, whichever process hosts it. */
export interface DataPlaneSettings extends CommonConfig {
  upstreamTimeoutMs: number;
  upstreamIdleTimeoutMs: number;
  upstreamDeadlineMs: number;
  upstreamStreamDeadlineMs: number;
  /** Most provider calls open at once to one origin, per process. */
  upstreamMaxConnections: number;
  dnsCacheMs: number;
  /** LLM proxy calls: headers, idle and buffered-call limit (VLT_LLM_TIMEOUT_MS). */
  llmTimeoutMs: number;
  /** Largest request body an LLM proxy call may carry (VLT_LLM_BODY_MAX_BYTES). */
  llmBodyMaxBytes: number;
  /** Bytes of large LLM request bodies a process holds at once at most (ADR 0096). */
  llmLargeBodiesInFlightBytes: number;
  credentialCacheMs: number;
  credentialStaleMs: number;
}

/** How a process that owns a connection pool talks to PostgreSQL. */
export interface DatabaseSettings {
  /** `VLT_DB_PREPARED_STATEMENTS`. */
  databasePreparedStatements: boolean;
}

/** The split control plane: its database, broker and master key are required. */
export interface ControlPlaneConfig extends ControlPlaneSettings, DatabaseSettings {
  databaseUrl: string;
  masterKey: string;
}

export type DataPlaneConfig = DataPlaneSettings;

export interface AuditConfig extends CommonConfig, DatabaseSettings {
  databaseUrl: string;
}

/** What the notifier reads, whichever process hosts it. */
export interface NotifierSettings extends CommonConfig {
  pushApiUrl: string;
  notifierAckWaitMs: number;
}

/** The split notifier: delivery records live in the database; it never holds the master key. */
export interface NotifierConfig extends NotifierSettings {
  databaseUrl: string;
}

/** Everything in one process: a missing database, broker or key means the embedded default. */
export interface AllInOneConfig
  extends ControlPlaneSettings, DataPlaneSettings, NotifierSettings, DatabaseSettings {
  databaseUrl: string | undefined;
  masterKey: string | undefined;
}

interface ConfigByService {
  'control-plane': ControlPlaneConfig;
  'data-plane': DataPlaneConfig;
  audit: AuditConfig;
  notifier: NotifierConfig;
  'all-in-one': AllInOneConfig;
}

function formatIssues(error: z.ZodError): string {
  // Name the variable and the rule, never the value: a value may be a secret.
  return error.issues.map((i) => `${i.path.join('.') || '(env)'}: ${i.message}`).join('; ');
}

function required(service: ServiceName, raw: RawAll): string[] {
  if (service === 'all-in-one') return [];
  const missing: string[] = [];
  if (!raw.NATS_URL) missing.push('NATS_URL');
  if ((service === 'control-plane' || service === 'audit' || service === 'notifier') && !raw.DATABASE_URL)
    missing.push('DATABASE_URL');
  if (service === 'control-plane' && !raw.VLT_MASTER_KEY) missing.push('VLT_MASTER_KEY');
  return missing;
}

/**
 * Parses the environment for one service, once, at start-up. Split services (everything but
 * the all-in-one) refuse to start without NATS_URL, and those that own tables or keys without
 * DATABASE_URL and VLT_MASTER_KEY; their config types then say so (no `!` at the call site).
 */
export function loadConfig<S extends ServiceName>(
  service: S,
  env: Record<string, string | undefined>,
): Readonly<ConfigByService[S]> {
  const parsed = schemas[service].safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(`invalid configuration for ${service}: ${formatIssues(parsed.error)}`);
  }
  // Shapes absent from this service's schema are simply undefined here: their defaults apply.
  const raw = schemas['all-in-one'].parse({}) as RawAll;
  Object.assign(raw, parsed.data);
  const missing = required(service, raw);
  if (missing.length) {
    throw new ConfigError(
      `${service} runs split from the others and needs ${missing.join(', ')} (only the all-in-one has embedded defaults)`,
    );
  }
  if (raw.NODE_ENV === 'production' && service === 'all-in-one' && !raw.VLT_MASTER_KEY) {
    throw new ConfigError('VLT_MASTER_KEY is required when NODE_ENV=production');
  }

  if (raw.VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES < raw.VLT_LLM_BODY_MAX_BYTES) {
    // Otherwise a body within its limit could never be held, and would be refused for good.
    throw new ConfigError(
      `invalid configuration for ${service}: VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES must be at least VLT_LLM_BODY_MAX_BYTES`,
    );
  }

  const { providers, problems } = parseProviderSettings(env);
  if (problems.length) throw new ConfigError(`invalid configuration for ${service}: ${problems.join('; ')}`);

  const publicBaseUrl = (raw.PUBLIC_BASE_URL ?? `http://localhost:${raw.PORT}`).replace(/\/+$/, '');
  try {
    new URL(publicBaseUrl);
  } catch {
    throw new ConfigError('invalid configuration: PUBLIC_BASE_URL is not a URL');
  }

  const common: CommonConfig = {
    service,
    env: raw.NODE_ENV,
    port: raw.PORT,
    host: raw.HOST,
    metricsPort: raw.VLT_METRICS_PORT,
    publicBaseUrl,
    logLevel: raw.LOG_LEVEL,
    natsServers: (raw.NATS_URL ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    natsPrefix: raw.VLT_NATS_PREFIX,
    trustProxy: raw.VLT_TRUST_PROXY,
    ssrfAllowCidrs: raw.VLT_SSRF_ALLOW_CIDRS,
    providers,
  };
  const all: AllInOneConfig = {
    ...common,
    databaseUrl: raw.DATABASE_URL,
    databasePreparedStatements: raw.VLT_DB_PREPARED_STATEMENTS === 'true',
    masterKey: raw.VLT_MASTER_KEY,
    dataDir: raw.VLT_DATA_DIR,
    masterKeysOld: raw.VLT_MASTER_KEYS_OLD,
    agentTokenAudience: raw.AGENT_TOKEN_AUDIENCE ?? publicBaseUrl,
    agentTokenTtlSeconds: raw.AGENT_TOKEN_TTL_SECONDS,
    bootstrapSecretTtlSeconds: Math.round(raw.BOOTSTRAP_SECRET_TTL_HOURS * 3600),
    approvalTtlSeconds: raw.VLT_APPROVAL_TTL_SECONDS,
    signup: raw.VLT_SIGNUP,
    upstreamTimeoutMs: raw.VLT_UPSTREAM_TIMEOUT_MS,
    upstreamIdleTimeoutMs: raw.VLT_UPSTREAM_IDLE_TIMEOUT_MS,
    upstreamDeadlineMs: raw.VLT_UPSTREAM_DEADLINE_MS,
    upstreamStreamDeadlineMs: raw.VLT_UPSTREAM_STREAM_DEADLINE_MS,
    upstreamMaxConnections: raw.VLT_UPSTREAM_MAX_CONNECTIONS,
    dnsCacheMs: raw.VLT_DNS_CACHE_MS,
    llmTimeoutMs: raw.VLT_LLM_TIMEOUT_MS,
    llmBodyMaxBytes: raw.VLT_LLM_BODY_MAX_BYTES,
    llmLargeBodiesInFlightBytes: raw.VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES,
    credentialCacheMs: raw.VLT_CREDENTIAL_CACHE_MS,
    credentialStaleMs: raw.VLT_CREDENTIAL_STALE_MS,
    pushApiUrl: raw.VLT_PUSH_API_URL,
    notifierAckWaitMs: raw.VLT_NOTIFIER_ACK_WAIT_MS,
  };
  // The checks above guarantee the fields each split service's type declares required.
  return Object.freeze(all) as unknown as Readonly<ConfigByService[S]>;
}
