/**
 * Agent token issuance: private-key-JWT client authentication (spec, "Agent authentication").
 *
 * It is every agent's hot path, so it costs one round trip to PostgreSQL once the agent's key
 * is cached: a single statement that counts the hit against the caller's address, re-checks
 * the agent under its row lock, consumes the assertion's `jti` and stores the token,
 * atomically. The key cache only says which key to verify a signature with; the statement is
 * what decides, so a key cached before a re-bootstrap or a disable never outlives it. Every
 * refusal counts against the address too (one statement each), so the per-IP limit sees every
 * request, as it did when it was counted before the body was read (ADR 0066).
 *
 * A new token is not pushed to the data planes: each learns it on first use by asking the
 * control plane (one indexed read), and their caches let a revocation win over an answer in
 * flight. Pushing it cost a transactional outbox relay cycle per token, for nothing the
 * lookup does not already give (docs/decisions/0052-token-endpoint-cost.md).
 */
import { randomUUID, type webcrypto } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, importJWK, jwtVerify, type JWK } from 'jose';
import { generateToken, hashToken } from '@vlt/crypto';
import { Errors } from '@vlt/service-kit';
import type { Sql } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';
import { LIMITS } from '../../infra/rate-limiter.js';

/** Assertions may be at most this long-lived, and `iat` at most this far in the future. */
const MAX_ASSERTION_LIFETIME_S = 60;
const CLOCK_SKEW_S = 30;
type CryptoKey = webcrypto.CryptoKey;

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface EnrolledKey {
  workspaceId: string;
  /** The stored JWK as PostgreSQL renders it: handed back to the statement for its check. */
  jwkJson: string;
  key: CryptoKey;
  loadedAt: number;
}

export interface AgentKeyCache {
  /** The agent's enrolled key, from memory while fresh; null when not active or not enrolled. */
  get(agentId: string, opts?: { fresh?: boolean }): Promise<EnrolledKey | null>;
  forget(agentId: string): void;
}

/**
 * Bounded, short-lived memory of imported public keys (importing a P-256 key costs more CPU
 * than verifying a signature with it). Oldest entries go first when full.
 */
export function createAgentKeyCache(
  sql: Sql,
  opts: { maxEntries?: number; ttlMs?: number; now?: () => number } = {},
): AgentKeyCache {
  const maxEntries = opts.maxEntries ?? 10_000;
  const ttlMs = opts.ttlMs ?? 60_000;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, EnrolledKey>();

  async function load(agentId: string): Promise<EnrolledKey | null> {
    const rows = await sql<{ workspace_id: string; status: string; jwk: string | null }>`
      SELECT workspace_id, status, public_key_jwk::text AS jwk FROM agents WHERE id = ${agentId}::uuid`;
    const row = rows[0];
    if (!row || row.status !== 'active' || !row.jwk) return null;
    const key = (await importJWK(JSON.parse(row.jwk) as JWK, 'ES256')) as CryptoKey;
    return { workspaceId: row.workspace_id, jwkJson: row.jwk, key, loadedAt: now() };
  }

  return {
    async get(agentId, { fresh = false } = {}) {
      const cached = entries.get(agentId);
      if (cached && !fresh && now() - cached.loadedAt < ttlMs) return cached;
      entries.delete(agentId);
      const loaded = await load(agentId);
      if (loaded) {
        if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
        entries.set(agentId, loaded);
      }
      return loaded;
    },
    forget(agentId) {
      entries.delete(agentId);
    },
  };
}

type IssuanceDeps = Pick<ControlPlaneDeps, 'sql' | 'config' | 'now' | 'rateLimiter'>;

/** The one refusal for every broken rule, so a caller learns nothing about which it was. */
const invalidAssertion = () => Errors.unauthorized('invalid client assertion');

/**
 * Counts a request that will not reach the issuing statement against the caller's address:
 * over the limit it is answered 429 (as every request then is), otherwise `refusal`.
 */
export async function countRefusedTokenRequest(deps: IssuanceDeps, clientIp: string, refusal: Error) {
  await deps.rateLimiter.hit(LIMITS.agentToken, clientIp);
  return refusal;
}

/**
 * Checks the assertion (every rule of the spec) and issues an opaque agent token. Failures are
 * one generic 401, so a caller learns nothing about which rule it broke.
 */
export async function issueAgentToken(
  deps: IssuanceDeps,
  keys: AgentKeyCache,
  assertion: string,
  clientIp: string,
) {
  const fail = () => countRefusedTokenRequest(deps, clientIp, invalidAssertion());
  let header, unverified;
  try {
    header = decodeProtectedHeader(assertion);
    unverified = decodeJwt(assertion);
  } catch {
    throw await fail();
  }
  // Only ES256; key-carrying headers (jku, jwk, x5u…) are ignored: the key is the enrolled one.
  if (header.alg !== 'ES256') throw await fail();
  const agentId = unverified.iss;
  if (typeof agentId !== 'string' || !UUID_RE.test(agentId) || unverified.sub !== agentId) throw await fail();

  let enrolled = await keys.get(agentId);
  if (!enrolled) throw await fail();
  let payload = await verifyAssertion(deps, enrolled.key, agentId, assertion);
  if (!payload) {
    // The cached key may predate a re-bootstrap: look once more before refusing.
    enrolled = await keys.get(agentId, { fresh: true });
    payload = enrolled && (await verifyAssertion(deps, enrolled.key, agentId, assertion));
    if (!enrolled || !payload) throw await fail();
  }

  const nowS = Math.floor(deps.now().getTime() / 1000);
  const { iat, exp, jti } = payload as { iat: number; exp: number; jti: unknown };
  if (typeof jti !== 'string' || jti.length === 0 || jti.length > 256) throw await fail();
  if (exp - iat > MAX_ASSERTION_LIFETIME_S || exp <= iat) throw await fail();
  if (iat > nowS + CLOCK_SKEW_S) throw await fail();

  const token = generateToken('vltt_');
  const ttl = deps.config.agentTokenTtlSeconds;
  const expiresAt = new Date(deps.now().getTime() + ttl * 1000);
  const tokenHash = hashToken(token);

  // One statement, so one atomic step: the hit is counted against the caller's address, and
  // past the limit nothing else happens (the assertion stays unused). The agent must still be
  // active with the very key the signature was verified against (a concurrent disable or
  // re-bootstrap takes the same row lock), and the (agent, jti) primary key makes the
  // assertion single-use across replicas.
  const limit = LIMITS.agentToken;
  const counter = deps.rateLimiter.counterRow(limit, clientIp);
  const rows = await deps.sql<{ hits: number; issued: number }>`
    WITH hit AS (
      INSERT INTO rate_limit_counters (key, window_start, count) VALUES (${counter.key}, ${counter.windowStart}, 1)
      ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_counters.count + 1
      RETURNING count
    ), agent AS (
      SELECT id, workspace_id FROM agents
      WHERE id = ${agentId}::uuid AND status = 'active' AND public_key_jwk = ${enrolled.jwkJson}::jsonb
        AND (SELECT count FROM hit) <= ${limit.max}
      FOR UPDATE
    ), used_jti AS (
      INSERT INTO assertion_jtis (agent_id, jti, expires_at)
      SELECT id, ${jti}, ${new Date((exp + CLOCK_SKEW_S) * 1000)} FROM agent
      ON CONFLICT DO NOTHING
      RETURNING agent_id
    ), token AS (
      INSERT INTO agent_access_tokens (id, agent_id, workspace_id, token_hash, expires_at)
      SELECT ${randomUUID()}::uuid, agent.id, agent.workspace_id, ${tokenHash}, ${expiresAt}
      FROM used_jti JOIN agent ON agent.id = used_jti.agent_id
      RETURNING id
    )
    SELECT (SELECT count FROM hit)::int AS hits, (SELECT count(*) FROM token)::int AS issued`;
  await deps.rateLimiter.settle(limit, counter, rows[0]?.hits ?? 0);
  if (rows[0]?.issued !== 1) {
    keys.forget(agentId);
    throw invalidAssertion();
  }
  return { access_token: token, token_type: 'Bearer' as const, expires_in: ttl };
}

async function verifyAssertion(deps: IssuanceDeps, key: CryptoKey, agentId: string, assertion: string) {
  try {
    const { payload } = await jwtVerify(assertion, key, {
      algorithms: ['ES256'],
      issuer: agentId,
      subject: agentId,
      audience: deps.config.agentTokenAudience,
      requiredClaims: ['iss', 'sub', 'aud', 'iat', 'exp', 'jti'],
      clockTolerance: 5,
      currentDate: deps.now(),
    });
    return payload;
  } catch {
    return null;
  }
}
