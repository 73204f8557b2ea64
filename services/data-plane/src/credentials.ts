/**
 * Provider credentials fetched from the control plane over request/reply and kept for a
 * short time (VLT_CREDENTIAL_CACHE_MS). Concurrent misses share one request.
 *
 * Outage posture (ADR 0003): when the control plane gives no answer at all (no responders, a
 * timeout, an error reply, or "refresh unavailable"), a credential this replica already holds is
 * served for up to VLT_CREDENTIAL_STALE_MS past its fetch, never past an OAuth token's expiry.
 * A refusal (revoked, needs re-auth, forbidden, not found) is an answer: it drops the entry at once.
 * A control plane that hangs is no answer either: a caller with a servable entry waits at most
 * `standInAfterMs` (not the whole request timeout) and the request finishes in the background,
 * storing or dropping the entry when its answer comes.
 */
import type { Bus, BusNames } from '@vlt/bus';
import { CredentialsResponse } from '@vlt/contracts';
import { compileSecretForms, type SecretForms } from '@vlt/upstream';

/**
 * Longer than the control plane may take to answer: a provider refresh (at most 10 s) or the
 * wait for another replica's refresh (at most 10 s, token-refresh.ts). Shorter would turn a
 * slow but successful refresh into a 503 here.
 */
const CREDENTIALS_TIMEOUT_MS = 15_000;

/**
 * How long a caller holding a servable stale entry waits for the control plane before being
 * served from it. Long enough for a healthy answer (a cached lookup takes milliseconds, a
 * refusal is a database read); short enough that a hung control plane costs an agent call
 * little more than this once per request cycle.
 */
const STAND_IN_AFTER_MS = 2_000;

/** An OAuth token this close to its expiry is not handed out from a stale entry. */
const STALE_EXPIRY_SKEW_MS = 30_000;

type Granted = Extract<CredentialsResponse, { ok: true }>;

export interface CredentialCache {
  get(req: { workspaceId: string; agentId: string; connectionId: string }): Promise<CredentialsResponse>;
  invalidate(connectionId: string): void;
  /**
   * The searched forms (upstream scrubbing) of `secrets`, the values injected from `credentials`
   * as `get` returned them: derived once per cached credential and held by it alone, so they
   * are dropped with it (expiry, revocation, re-auth) and never outlive it.
   */
  secretForms(credentials: Granted['credentials'], secrets: readonly string[]): SecretForms;
}

interface Entry {
  value: Granted;
  /** Fresh until: served without asking. */
  until: number;
  /** Served while the control plane gives no answer, until this instant. */
  staleUntil: number;
  connectionId: string;
  /** The outage warning is logged once per entry, not once per call. */
  warned: boolean;
}

export interface CredentialCacheLogger {
  warn(obj: object, msg?: string): void;
}

export function createCredentialCache(deps: {
  bus: Bus;
  names: BusNames;
  ttlMs: number;
  /** How long past its fetch a credential may be served while the control plane is unreachable; 0 disables. */
  staleMs?: number;
  timeoutMs?: number;
  /** How long a caller with a servable stale entry waits for the answer before it is used. */
  standInAfterMs?: number;
  logger?: CredentialCacheLogger;
}): CredentialCache {
  const now = () => Date.now();
  const staleMs = deps.staleMs ?? 0;
  const standInAfterMs = deps.standInAfterMs ?? STAND_IN_AFTER_MS;
  const cache = new Map<string, Entry>();
  const formsByCredential = new WeakMap<Granted['credentials'], SecretForms>();
  const inflight = new Map<string, { answer: Promise<CredentialsResponse>; startedAt: number }>();

  /** The stale entry, when one may stand in for an answer the control plane could not give. */
  function standIn(key: string, reason: string): Granted | undefined {
    const entry = cache.get(key);
    if (!entry || entry.staleUntil <= now()) return undefined;
    if (!entry.warned) {
      entry.warned = true;
      deps.logger?.warn(
        { connectionId: entry.connectionId, reason, staleForMs: now() - (entry.until - deps.ttlMs) },
        'control plane gave no answer: serving a cached credential',
      );
    }
    return entry.value;
  }

  function store(key: string, connectionId: string, value: Granted): void {
    if (deps.ttlMs <= 0) return;
    const fetchedAt = now();
    const expiresAt = value.credentials.type === 'bearer' ? (value.credentials.expiresAt ?? null) : null;
    let staleUntil = fetchedAt + staleMs;
    if (expiresAt !== null) staleUntil = Math.min(staleUntil, expiresAt - STALE_EXPIRY_SKEW_MS);
    cache.set(key, {
      value,
      until: fetchedAt + Math.min(deps.ttlMs, value.ttlMs),
      staleUntil,
      connectionId,
      warned: false,
    });
  }

  function ask(key: string, req: { workspaceId: string; agentId: string; connectionId: string }) {
    return deps.bus
      .request(
        deps.names.rpc.credentialsGet,
        { v: 1, ...req },
        { timeoutMs: deps.timeoutMs ?? CREDENTIALS_TIMEOUT_MS },
      )
      .then(
        (raw) => {
          const value = CredentialsResponse.parse(raw);
          if (value.ok) {
            store(key, req.connectionId, value);
            return value;
          }
          if (value.code === 'unavailable') return standIn(key, 'refresh unavailable') ?? value;
          // A refusal is an answer: nothing cached may outlive it.
          cache.delete(key);
          return value;
        },
        (err: unknown) => {
          const stale = standIn(key, err instanceof Error ? err.name : 'request failed');
          if (stale) return stale;
          throw err;
        },
      )
      .finally(() => inflight.delete(key));
  }

  /**
   * The answer, or the stale entry once `standInAfterMs` has passed since the request started
   * without one. The entry is looked up when the wait ends: an invalidation meanwhile wins.
   */
  function answerOrStandIn(
    key: string,
    flight: { answer: Promise<CredentialsResponse>; startedAt: number },
  ): Promise<CredentialsResponse> {
    const servable = cache.get(key);
    if (standInAfterMs <= 0 || !servable || servable.staleUntil <= now()) return flight.answer;
    return new Promise<CredentialsResponse>((resolve, reject) => {
      const timer = setTimeout(
        () => {
          const stale = standIn(key, 'no answer yet');
          if (stale) resolve(stale);
        },
        Math.max(0, flight.startedAt + standInAfterMs - now()),
      );
      timer.unref?.();
      flight.answer.then(resolve, reject).finally(() => clearTimeout(timer));
    });
  }

  return {
    async get(req) {
      const key = `${req.agentId}:${req.connectionId}`;
      const hit = cache.get(key);
      if (hit && hit.until > now()) return hit.value;
      let flight = inflight.get(key);
      if (!flight) {
        flight = { answer: ask(key, req), startedAt: now() };
        inflight.set(key, flight);
      }
      return answerOrStandIn(key, flight);
    },
    invalidate(connectionId) {
      for (const [k, v] of cache) if (v.connectionId === connectionId) cache.delete(k);
    },
    secretForms(credentials, secrets) {
      let forms = formsByCredential.get(credentials);
      if (!forms) {
        forms = compileSecretForms(secrets);
        formsByCredential.set(credentials, forms);
      }
      return forms;
    },
  };
}
