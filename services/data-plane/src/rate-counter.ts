/**
 * Requests per agent+connection in the last hour, shared by every data-plane replica through
 * a NATS KV entry updated with compare-and-set. The hour is kept as per-minute slots, so the
 * window is 60 to 61 minutes: it may refuse a little early, never late.
 *
 * A slot is taken before the policy decides and given back when the request does not run,
 * so two replicas racing for the last slot cannot both get it.
 */
import { BusConflictError, type Bus, type BusNames } from '@vlt/bus';

interface Slots {
  v: 1;
  /** minute (epoch ms / 60 000) → requests counted in that minute */
  m: Record<string, number>;
}

export interface Reservation {
  /** Requests counted in the window before this one. */
  previous: number;
  /** Start of the oldest minute that still counts (for Retry-After). */
  oldestAt: Date | undefined;
  release(): Promise<void>;
}

export interface RateCounter {
  reserve(agentId: string, connectionId: string, now: Date): Promise<Reservation>;
}

const WINDOW_MINUTES = 60;
const MAX_ATTEMPTS = 20;

/** The minutes of `m` still inside the window that ends at `minute`, as a new map. */
function live(m: Readonly<Record<string, number>>, minute: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, n] of Object.entries(m)) {
    if (Number(k) > minute - WINDOW_MINUTES && n > 0) out[k] = n;
  }
  return out;
}

/** One change a caller asked for, waiting for the next write of its key. */
interface SlotChange {
  minute: number;
  delta: 1 | -1;
  done(before: Record<string, number>): void;
  failed(err: unknown): void;
}

export function createRateCounter(deps: { bus: Bus; names: BusNames }): RateCounter {
  const bucket = deps.bus.kv(deps.names.buckets.rateCounters);
  /**
   * Changes of one key made while a write of that key is in flight wait and go out together
   * in the next one. Each caller racing its own compare-and-set lost to the others every round:
   * a burst of N calls took O(N^2) round trips and, past MAX_ATTEMPTS, failed calls that were
   * within the limit. Across replicas the compare-and-set still keeps the count exact.
   */
  const waiting = new Map<string, SlotChange[]>();
  const writing = new Set<string>();

  /** Applies the changes in order to the stored slots; resolves with what each one saw before it. */
  async function write(key: string, changes: readonly SlotChange[]): Promise<Record<string, number>[]> {
    const kv = await bucket;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await kv.get(key);
      let m = (current?.value as Slots | undefined)?.m ?? {};
      const befores: Record<string, number>[] = [];
      for (const c of changes) {
        m = live(m, c.minute);
        befores.push({ ...m });
        const slot = String(c.minute);
        m[slot] = Math.max(0, (m[slot] ?? 0) + c.delta);
      }
      try {
        await kv.compareAndSet(key, { v: 1, m } satisfies Slots, current?.revision ?? 0);
        return befores;
      } catch (err) {
        if (!(err instanceof BusConflictError)) throw err;
        // Another replica wrote first: read again.
      }
    }
    throw new Error('rate counter is too contended');
  }

  async function drain(key: string): Promise<void> {
    writing.add(key);
    try {
      for (let batch = waiting.get(key); batch; batch = waiting.get(key)) {
        waiting.delete(key);
        try {
          const befores = await write(key, batch);
          batch.forEach((c, i) => c.done(befores[i]!));
        } catch (err) {
          for (const c of batch) c.failed(err);
        }
      }
    } finally {
      writing.delete(key);
    }
  }

  function change(key: string, minute: number, delta: 1 | -1): Promise<Record<string, number>> {
    return new Promise((done, failed) => {
      const batch = waiting.get(key);
      if (batch) batch.push({ minute, delta, done, failed });
      else waiting.set(key, [{ minute, delta, done, failed }]);
      if (!writing.has(key)) void drain(key);
    });
  }

  return {
    async reserve(agentId, connectionId, now) {
      const key = `${agentId}.${connectionId}`;
      const minute = Math.floor(now.getTime() / 60_000);
      const before = await change(key, minute, 1);
      const minutes = Object.keys(before).map(Number);
      let released = false;
      return {
        previous: Object.values(before).reduce((a, b) => a + b, 0),
        oldestAt: minutes.length ? new Date(Math.min(...minutes) * 60_000) : undefined,
        async release() {
          if (released) return;
          released = true;
          await change(key, minute, -1);
        },
      };
    },
  };
}
