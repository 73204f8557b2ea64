/**
 * Fixed-window counters in PostgreSQL, so every control-plane replica sees the same count
 * (per-IP limits on the agent-authentication endpoints, sign-in failures).
 *
 * A replica also remembers the windows it has seen go over their maximum, and refuses those
 * subjects from memory until the window ends: a flood past the limit costs no round trip.
 * That is exact across replicas, because a count only grows within its window while it is over
 * (`refund` gives back a hit that passed, and forgets the memory).
 */
import type { Sql } from '@vlt/db';
import { Errors } from '@vlt/service-kit';

export interface RateLimit {
  /** e.g. `bootstrap`, `token`, `sign-in:ip`. */
  name: string;
  max: number;
  windowSeconds: number;
}

export interface RateLimiter {
  /** Counts one hit; throws 429 with Retry-After when the window is already full. */
  hit(limit: RateLimit, subject: string): Promise<void>;
  /** Throws 429 when the window is full, without counting (e.g. before checking a password). */
  check(limit: RateLimit, subject: string): Promise<void>;
  /** Counts without enforcing. */
  count(limit: RateLimit, subject: string): Promise<number>;
  /** Gives one hit back (e.g. a sign-in that turned out to be correct). */
  refund(limit: RateLimit, subject: string): Promise<void>;
  /** Throws 429 when this replica already saw the window over its maximum; no round trip. */
  refuseKnownOver(limit: RateLimit, subject: string): void;
  /**
   * For a statement that counts the hit itself, in the same round trip as its own work: the
   * `rate_limit_counters` row it must upsert as `increment` does. It then hands the count it
   * got back to {@link RateLimiter.settle}.
   */
  counterRow(limit: RateLimit, subject: string): CounterRow;
  /** Throws 429 when `count` (the row's count with this hit) is over the maximum. */
  settle(limit: RateLimit, row: CounterRow, count: number): Promise<void>;
}

/** One window's counter: the primary key of `rate_limit_counters`. */
export interface CounterRow {
  key: string;
  windowStart: Date;
}

/** Windows remembered as over, per replica; the oldest go first. */
const MAX_KNOWN_OVER = 10_000;

export function createRateLimiter(sql: Sql, now: () => Date): RateLimiter {
  const window = (limit: RateLimit) => {
    const ms = limit.windowSeconds * 1000;
    const t = now().getTime();
    const start = t - (t % ms);
    return { start: new Date(start), retryAfter: retryAfter(limit, start) };
  };
  const retryAfter = (limit: RateLimit, windowStartMs: number) =>
    Math.max(1, Math.ceil((windowStartMs + limit.windowSeconds * 1000 - now().getTime()) / 1000));
  const key = (limit: RateLimit, subject: string) => `${limit.name}:${subject}`;
  /** key → start (ms) of the window seen over its maximum. */
  const knownOver = new Map<string, number>();

  function counterRow(limit: RateLimit, subject: string): CounterRow {
    return { key: key(limit, subject), windowStart: window(limit).start };
  }

  async function increment(row: CounterRow): Promise<number> {
    const rows = await sql<{ count: number }>`
      INSERT INTO rate_limit_counters (key, window_start, count) VALUES (${row.key}, ${row.windowStart}, 1)
      ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_counters.count + 1
      RETURNING count`;
    await pruneNowAndThen(row.windowStart);
    return Number(rows[0]?.count ?? 0);
  }

  /** Old windows are garbage; prune now and then rather than on a timer. */
  async function pruneNowAndThen(windowStart: Date): Promise<void> {
    if (Math.random() < 0.01) {
      await sql`DELETE FROM rate_limit_counters WHERE window_start < ${new Date(windowStart.getTime() - 3600_000)}`;
    }
  }

  function enforce(limit: RateLimit, row: CounterRow, count: number): void {
    if (count <= limit.max) return;
    const start = row.windowStart.getTime();
    knownOver.delete(row.key);
    if (knownOver.size >= MAX_KNOWN_OVER) knownOver.delete(knownOver.keys().next().value!);
    knownOver.set(row.key, start);
    throw tooMany(limit, retryAfter(limit, start));
  }

  function tooMany(limit: RateLimit, retryAfter: number) {
    return Errors.rateLimited(`too many requests; retry in ${retryAfter} s`, {
      retryAfter,
      headers: { 'retry-after': String(retryAfter) },
    });
  }

  return {
    async hit(limit, subject) {
      const row = counterRow(limit, subject);
      enforce(limit, row, await increment(row));
    },
    async check(limit, subject) {
      const w = window(limit);
      const rows = await sql<{ count: number }>`
        SELECT count FROM rate_limit_counters WHERE key = ${key(limit, subject)} AND window_start = ${w.start}`;
      if (rows[0] && rows[0].count >= limit.max) throw tooMany(limit, w.retryAfter);
    },
    count: (limit, subject) => increment(counterRow(limit, subject)),
    async refund(limit, subject) {
      const w = window(limit);
      knownOver.delete(key(limit, subject));
      await sql`
        UPDATE rate_limit_counters SET count = count - 1
        WHERE key = ${key(limit, subject)} AND window_start = ${w.start} AND count > 0`;
    },
    refuseKnownOver(limit, subject) {
      const k = key(limit, subject);
      const over = knownOver.get(k);
      if (over === undefined) return;
      const w = window(limit);
      if (over === w.start.getTime()) throw tooMany(limit, w.retryAfter);
      knownOver.delete(k); // that window has ended
    },
    counterRow,
    async settle(limit, row, count) {
      await pruneNowAndThen(row.windowStart);
      enforce(limit, row, count);
    },
  };
}

export const LIMITS = {
  bootstrap: { name: 'bootstrap', max: 5, windowSeconds: 60 },
  agentToken: { name: 'agent-token', max: 30, windowSeconds: 60 },
  signInIp: { name: 'sign-in-ip', max: 20, windowSeconds: 300 },
  /** Failures of one account from one address: that pair is blocked (the attacker's address). */
  signInAccountAddress: { name: 'sign-in-account-address', max: 5, windowSeconds: 900 },
  /** Attempts on one account from anywhere: past `max`, a slow-down, never a block (ADR 0041). */
  signInAccount: { name: 'sign-in-account', max: 10, windowSeconds: 900 },
  signUpIp: { name: 'sign-up-ip', max: 30, windowSeconds: 600 },
} as const satisfies Record<string, RateLimit>;
