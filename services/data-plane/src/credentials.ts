/**
 * Provider credentials fetched from the control plane over request/reply and kept for a
 * short time (VLT_CREDENTIAL_CACHE_MS). Concurrent misses share one request.
 */
import type { Bus, BusNames } from '@vlt/bus';
import { CredentialsResponse } from '@vlt/contracts';

/**
 * Longer than the control plane may take to answer: a provider refresh (at most 10 s) or the
 * wait for another replica's refresh (at most 10 s, token-refresh.ts). Shorter would turn a
 * slow but successful refresh into a 503 here.
 */
const CREDENTIALS_TIMEOUT_MS = 15_000;

export interface CredentialCache {
  get(req: { workspaceId: string; agentId: string; connectionId: string }): Promise<CredentialsResponse>;
  invalidate(connectionId: string): void;
}

export function createCredentialCache(deps: {
  bus: Bus;
  names: BusNames;
  ttlMs: number;
  timeoutMs?: number;
}): CredentialCache {
  const cache = new Map<string, { value: CredentialsResponse; until: number; connectionId: string }>();
  const inflight = new Map<string, Promise<CredentialsResponse>>();
  return {
    async get(req) {
      const key = `${req.agentId}:${req.connectionId}`;
      const hit = cache.get(key);
      if (hit && hit.until > Date.now()) return hit.value;
      const pending = inflight.get(key);
      if (pending) return pending;
      const p = deps.bus
        .request(
          deps.names.rpc.credentialsGet,
          { v: 1, ...req },
          { timeoutMs: deps.timeoutMs ?? CREDENTIALS_TIMEOUT_MS },
        )
        .then((raw) => {
          const value = CredentialsResponse.parse(raw);
          // Only successes are cached: a refusal is re-asked next time.
          if (value.ok && deps.ttlMs > 0) {
            cache.set(key, {
              value,
              until: Date.now() + Math.min(deps.ttlMs, value.ttlMs),
              connectionId: req.connectionId,
            });
          }
          return value;
        })
        .finally(() => inflight.delete(key));
      inflight.set(key, p);
      return p;
    },
    invalidate(connectionId) {
      for (const [k, v] of cache) if (v.connectionId === connectionId) cache.delete(k);
    },
  };
}
