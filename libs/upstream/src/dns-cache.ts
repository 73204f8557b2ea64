/**
 * Host name answers kept for a short time. Node resolves every name afresh through
 * getaddrinfo, and most container images have no local DNS cache, so without this every
 * brokered call asked the cluster's DNS server before the policy engine could judge its
 * address: half a millisecond at best, and 5 s whenever one UDP answer was lost (glibc's
 * retry timeout). See ADR 0079.
 *
 * Nothing here decides what is reachable: every answer, cached or not, still passes the SSRF
 * check at decision time and again at connect time. A cached answer only means both checks
 * (and the connection) see the same addresses for a while, as they would under the record's
 * own TTL at any caching resolver.
 */

export type Resolve = (host: string) => Promise<string[]>;

export interface DnsCacheOptions {
  /** How long an answer is used, milliseconds; 0 resolves every time. */
  maxAgeMs: number;
  /** Most host names kept; the oldest answer goes first. */
  maxEntries?: number;
  /** Test seam: the clock, milliseconds. */
  now?: () => number;
}

/** Past this share of its age, a use of an answer also fetches the next one in the background. */
const REFRESH_AHEAD_AT = 0.75;

interface Entry {
  addresses: readonly string[];
  fetchedAt: number;
}

/**
 * Wraps a resolver with a bounded, short-lived cache. Concurrent lookups of one name share one
 * query; failed and empty answers are never kept. An answer in use near the end of its age is
 * refreshed ahead, so a busy host never waits on its DNS server (nor on a lost packet).
 */
export function cachedResolver(resolve: Resolve, opts: DnsCacheOptions): Resolve {
  if (opts.maxAgeMs <= 0) return resolve;
  const maxAgeMs = opts.maxAgeMs;
  const maxEntries = opts.maxEntries ?? 1_000;
  const now = opts.now ?? Date.now;
  const answers = new Map<string, Entry>();
  const inFlight = new Map<string, Promise<readonly string[]>>();

  function fetch(host: string): Promise<readonly string[]> {
    const pending = inFlight.get(host);
    if (pending) return pending;
    const query = resolve(host).then(
      (addresses) => {
        inFlight.delete(host);
        if (addresses.length > 0) {
          answers.delete(host); // re-inserted last: the Map's order is the eviction order
          answers.set(host, { addresses: [...addresses], fetchedAt: now() });
          if (answers.size > maxEntries) answers.delete(answers.keys().next().value!);
        }
        return addresses;
      },
      (err: unknown) => {
        inFlight.delete(host);
        throw err;
      },
    );
    inFlight.set(host, query);
    return query;
  }

  return async (host) => {
    const entry = answers.get(host);
    const age = entry ? now() - entry.fetchedAt : Infinity;
    if (entry && age >= 0 && age < maxAgeMs) {
      // A failed refresh leaves the current answer in use until it expires.
      if (age >= maxAgeMs * REFRESH_AHEAD_AT) fetch(host).catch(() => undefined);
      return [...entry.addresses];
    }
    if (entry) answers.delete(host);
    return [...(await fetch(host))];
  };
}
