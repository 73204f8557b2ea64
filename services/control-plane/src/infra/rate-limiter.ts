/**
 * Fixed-window counters in PostgreSQL, so every control-plane replica sees the same count
 * (per-IP limits on the agent-authentication endpoints, sign-in failures).
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
}

export function createRateLimiter(sql: Sql, now: () => Date): RateLimiter {
  const window = (limit: RateLimit) => {
    const ms = limit.windowSeconds * 1000;
    const t = now().getTime();
    const start = t - (t % ms);
    return { start: new Date(start), retryAfter: Math.max(1, Math.ceil((start + ms - t) / 1000)) };
  };
  const key = (limit: RateLimit, subject: string) => `${limit.name}:${subject}`;

  async function increment(limit: RateLimit, subject: string): Promise<number> {
    const w = window(limit);
    const rows = await sql<{ count: number }>`
      INSERT INTO rate_limit_counters (key, window_start, count) VALUES (${key(limit, subject)}, ${w.start}, 1)
      ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_counters.count + 1
      RETURNING count`;
    // Old windows are garbage; prune now and then rather than on a timer.
    if (Math.random() < 0.01) {
      await sql`DELETE FROM rate_limit_counters WHERE window_start < ${new Date(w.start.getTime() - 3600_000)}`;
    }
    return Number(rows[0]?.count ?? 0);
  }

  function tooMany(limit: RateLimit, retryAfter: number) {
    return Errors.rateLimited(`too many requests; retry in ${retryAfter} s`, {
      retryAfter,
      headers: { 'retry-after': String(retryAfter) },
    });
  }

  return {
    async hit(limit, subject) {
      const n = await increment(limit, subject);
      if (n > limit.max) throw tooMany(limit, window(limit).retryAfter);
    },
    async check(limit, subject) {
      const w = window(limit);
      const rows = await sql<{ count: number }>`
        SELECT count FROM rate_limit_counters WHERE key = ${key(limit, subject)} AND window_start = ${w.start}`;
      if (rows[0] && rows[0].count >= limit.max) throw tooMany(limit, w.retryAfter);
    },
    count: increment,
    async refund(limit, subject) {
      const w = window(limit);
      await sql`
        UPDATE rate_limit_counters SET count = count - 1
        WHERE key = ${key(limit, subject)} AND window_start = ${w.start} AND count > 0`;
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
