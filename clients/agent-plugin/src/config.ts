/**
 * The plugin's configuration (spec, "Plugin configuration"): validated with zod, reported field
 * by field, and resolved into what the rest of the plugin uses — the key as a PKCS8 PEM the SDK
 * imports, credentials wrapped so they never print.
 */
import { createPrivateKey, type JsonWebKeyInput } from 'node:crypto';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import { Secret } from './secret.js';

export const DEBUG_LEVELS = ['silent', 'error', 'warn', 'info', 'debug'] as const;
export type DebugLevel = (typeof DEBUG_LEVELS)[number];

export const DEFAULT_POLL_TIMEOUT_MS = 300_000;
export const DEFAULT_POLL_INTERVAL_MS = 3_000;
export const DEFAULT_WATCHER_POLL_MS = 5_000;

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** https, or plain http to this machine only: tokens must not cross a network in clear text. */
const BaseUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
  .max(2048)
  .superRefine((value, ctx) => {
    const u = new URL(value);
    if (u.protocol === 'http:' && !LOOPBACK_HOSTS.has(u.hostname) && !u.hostname.startsWith('127.')) {
      ctx.addIssue({ code: 'custom', message: 'must use https (plain http is accepted for loopback only)' });
    }
    if (u.username || u.password) ctx.addIssue({ code: 'custom', message: 'must not embed credentials' });
    if (u.search || u.hash) ctx.addIssue({ code: 'custom', message: 'must not have a query or fragment' });
  });

const AgentAuth = z
  .object({
    mode: z.literal('agent'),
    agentId: z.uuid({ error: 'must be the agent id (a UUID)' }),
    privateKey: z
      .string({ error: 'must be the base64-encoded ES256 private JWK' })
      .min(1, { error: 'must be the base64-encoded ES256 private JWK' })
      .max(8192),
    tokenAudience: z.string().min(1).max(2048).optional(),
  })
  .strict();

const BearerAuth = z
  .object({
    mode: z.literal('bearer'),
    token: z
      .string({ error: 'must be an agent access token (it starts with vltt_)' })
      .max(4096)
      .regex(/^vltt_[A-Za-z0-9._~-]+$/, { error: 'must be an agent access token (it starts with vltt_)' }),
  })
  .strict();

export const PluginConfigSchema = z
  .object({
    baseUrl: BaseUrl.describe("The vault's address, e.g. https://vault.example.com"),
    auth: z
      .discriminatedUnion('mode', [AgentAuth, BearerAuth], {
        error: "must be {mode: 'agent', agentId, privateKey[, tokenAudience]} or {mode: 'bearer', token}",
      })
      .describe('How the plugin authenticates to the vault'),
    debugLevel: z.enum(DEBUG_LEVELS).default('warn'),
    pollTimeoutMs: z.number().int().min(1_000).max(3_600_000).default(DEFAULT_POLL_TIMEOUT_MS),
    pollIntervalMs: z.number().int().min(250).max(60_000).default(DEFAULT_POLL_INTERVAL_MS),
    connectedProviders: z.array(z.string().min(1).max(100)).max(50).default([]),
  })
  .strict();

export type PluginConfigInput = z.input<typeof PluginConfigSchema>;

export type ResolvedAuth =
  | { mode: 'agent'; agentId: string; tokenAudience: string; privateKeyPem: Secret }
  | { mode: 'bearer'; token: Secret };

export interface ResolvedConfig {
  /** Without trailing slashes (the token audience must match the vault's own spelling). */
  baseUrl: string;
  auth: ResolvedAuth;
  debugLevel: DebugLevel;
  pollTimeoutMs: number;
  pollIntervalMs: number;
  connectedProviders: string[];
}

/** The plugin's rules as JSON Schema (refinements aside), for resolved configuration. */
export function configJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(PluginConfigSchema, { io: 'input', target: 'draft-7' });
  delete schema.$schema;
  return schema;
}

/** Where OpenClaw may hold a reference to a secret store instead of the credential itself. */
export const SECRET_INPUT_PATHS = ['auth.privateKey', 'auth.token'] as const;

/** An OpenClaw SecretRef: the host resolves it to the credential before the plugin runs. */
const SecretRefSchema = z
  .object({
    source: z.enum(['env', 'file', 'exec', 'store']),
    provider: z.string().min(1),
    id: z.string().min(1),
  })
  .strict();

export function isSecretRef(value: unknown): boolean {
  return SecretRefSchema.safeParse(value).success;
}

/**
 * The manifest's `configSchema`. OpenClaw validates the configuration as written, before it
 * resolves SecretRefs (the setup CLI writes the key as one, ADR 0058), so the credential fields
 * accept a reference too; the plugin itself only ever sees the resolved string.
 */
export function manifestConfigSchema(): Record<string, unknown> {
  const schema = configJsonSchema();
  const ref = z.toJSONSchema(SecretRefSchema, { target: 'draft-7' });
  delete ref.$schema;
  const auth = (schema.properties as Record<string, { oneOf: { properties: Record<string, unknown> }[] }>)
    .auth!;
  for (const branch of auth.oneOf) {
    for (const field of ['privateKey', 'token']) {
      const plain = branch.properties[field];
      if (plain) branch.properties[field] = { anyOf: [plain, ref] };
    }
  }
  return schema;
}

function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let v = raw;
  for (const key of path)
    v = v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[key] : undefined;
  return v;
}

function describeIssues(raw: unknown, issues: readonly z.core.$ZodIssue[]): string[] {
  // Paths and rule messages only: never the values, which include the key and the token.
  return issues.map((i) => {
    const path = i.path.map(String).join('.') || '(config)';
    if (i.code === 'unrecognized_keys') return `${path}: unknown field(s) ${i.keys.join(', ')}`;
    if (i.code === 'invalid_type' && valueAt(raw, i.path) === undefined) return `${path}: is required`;
    return `${path}: ${i.message}`;
  });
}

/** A base64 (or base64url) JSON JWK of an EC P-256 private key, as the PKCS8 PEM the SDK imports. */
function privateKeyPem(encoded: string): Secret | undefined {
  try {
    const text = Buffer.from(encoded.trim(), 'base64').toString('utf8');
    const jwk = JSON.parse(text) as JsonWebKeyInput['key'];
    if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.d !== 'string') return undefined;
    const key = createPrivateKey({ key: jwk, format: 'jwk' });
    return new Secret(key.export({ type: 'pkcs8', format: 'pem' }).toString());
  } catch {
    return undefined;
  }
}

/**
 * Validates raw plugin configuration (as the host passes it) and resolves defaults. Throws a
 * ConfigError listing every problem; the error never contains a configured value.
 */
export function parseConfig(raw: unknown): ResolvedConfig {
  const parsed = PluginConfigSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    throw new ConfigError(
      `invalid vault plugin configuration: ${describeIssues(raw ?? {}, parsed.error.issues).join('; ')}`,
    );
  }
  const c = parsed.data;
  const baseUrl = c.baseUrl.replace(/\/+$/, '');
  let auth: ResolvedAuth;
  if (c.auth.mode === 'agent') {
    const pem = privateKeyPem(c.auth.privateKey);
    if (!pem) {
      throw new ConfigError(
        'invalid vault plugin configuration: auth.privateKey: must be a base64-encoded JSON Web Key of an ' +
          'ES256 private key (kty EC, crv P-256, with d), as the setup CLI writes it',
      );
    }
    auth = {
      mode: 'agent',
      agentId: c.auth.agentId,
      tokenAudience: c.auth.tokenAudience ?? baseUrl,
      privateKeyPem: pem,
    };
  } else {
    auth = { mode: 'bearer', token: new Secret(c.auth.token) };
  }
  return {
    baseUrl,
    auth,
    debugLevel: c.debugLevel,
    pollTimeoutMs: c.pollTimeoutMs,
    pollIntervalMs: c.pollIntervalMs,
    connectedProviders: c.connectedProviders,
  };
}

/**
 * Checks configuration as written, where the credential may still be a SecretRef: the
 * reference is taken as given and everything else is checked as usual. Undefined when valid,
 * else the ConfigError's message.
 */
export function checkSourceConfig(raw: unknown): string | undefined {
  const auth = (raw as { auth?: Record<string, unknown> } | undefined)?.auth;
  const refKey = auth && isSecretRef(auth.privateKey);
  const refToken = auth && isSecretRef(auth.token);
  try {
    if (!refKey && !refToken) {
      parseConfig(raw);
      return undefined;
    }
    // Stand-ins of the right shape where the host will put the resolved credentials.
    const standIn = {
      ...(raw as Record<string, unknown>),
      auth: {
        ...auth,
        ...(refKey && { privateKey: 'secret-ref' }),
        ...(refToken && { token: 'vltt_secret-ref' }),
      },
    };
    const parsed = PluginConfigSchema.safeParse(standIn);
    if (!parsed.success) {
      throw new ConfigError(
        `invalid vault plugin configuration: ${describeIssues(standIn, parsed.error.issues).join('; ')}`,
      );
    }
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The approval watcher's poll interval from `WATCHER_POLL_MS` (default 5000 ms). */
export function watcherPollMsFrom(env: Record<string, string | undefined>): number {
  const raw = env.WATCHER_POLL_MS?.trim();
  if (raw === undefined || raw === '') return DEFAULT_WATCHER_POLL_MS;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 100 || n > 600_000) {
    throw new ConfigError('WATCHER_POLL_MS must be a whole number of milliseconds between 100 and 600000');
  }
  return n;
}
