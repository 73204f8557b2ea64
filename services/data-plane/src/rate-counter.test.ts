import { busNames, createInProcessBus, type Bus } from '@vlt/bus';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRateCounter } from './rate-counter.js';

const names = busNames('ratetest');
const AGENT = '00000000-0000-4000-8000-00000000000a';
const CONN = '00000000-0000-4000-8000-00000000000c';
const NOW = new Date('2026-11-26T12:00:30Z');

describe('rate counter', () => {
  let bus: Bus;
  beforeEach(() => {
    bus = createInProcessBus({ names });
  });
  afterEach(async () => {
    await bus.close();
  });

  it('regression: a burst of 64 concurrent reservations on one key all succeed, each counted once', async () => {
    // Each reservation used to read, then compare-and-set on its own: all but one lost every
    // round, and past 20 rounds the rest failed (503 to the agent) though nothing was wrong.
    const counter = createRateCounter({ bus, names });
    const all = await Promise.all(Array.from({ length: 64 }, () => counter.reserve(AGENT, CONN, NOW)));
    // Serialised exactly: every count from 0 to 63 seen once.
    expect(all.map((r) => r.previous).sort((a, b) => a - b)).toEqual(Array.from({ length: 64 }, (_, i) => i));
    const next = await counter.reserve(AGENT, CONN, NOW);
    expect(next.previous).toBe(64);
  });

  it('two replicas sharing the bucket never hand out the same count', async () => {
    const a = createRateCounter({ bus, names });
    const b = createRateCounter({ bus, names });
    const all = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).reserve(AGENT, CONN, NOW)),
    );
    expect(new Set(all.map((r) => r.previous)).size).toBe(40);
    expect(Math.max(...all.map((r) => r.previous))).toBe(39);
  });

  it('a released slot is given back, once, even when releases race reservations', async () => {
    const counter = createRateCounter({ bus, names });
    const first = await Promise.all(Array.from({ length: 10 }, () => counter.reserve(AGENT, CONN, NOW)));
    await Promise.all([
      ...first.slice(0, 4).map((r) => r.release()),
      ...first.slice(0, 4).map((r) => r.release()), // a second release is a no-op
      counter.reserve(AGENT, CONN, NOW),
    ]);
    const after = await counter.reserve(AGENT, CONN, NOW);
    // 10 reserved, 4 given back, 1 more reserved: 7 counted before this one.
    expect(after.previous).toBe(7);
    expect(after.oldestAt).toEqual(new Date('2026-11-26T12:00:00Z'));
  });
});
