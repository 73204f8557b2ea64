import { describe, expect, it } from 'vitest';
import { cachedResolver } from './dns-cache.js';

/** A resolver that answers from `table`, counts queries, and can be held until released. */
function fakeDns(table: Record<string, string[]>) {
  const asked: string[] = [];
  let gate: Promise<void> | undefined;
  let open: (() => void) | undefined;
  return {
    asked,
    table,
    hold() {
      gate = new Promise((r) => (open = r));
    },
    release() {
      open?.();
      gate = undefined;
    },
    resolve: async (host: string): Promise<string[]> => {
      asked.push(host);
      if (gate) await gate;
      const answer = table[host];
      if (answer === undefined) throw new Error(`ENOTFOUND ${host}`);
      return [...answer];
    },
  };
}

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('cached DNS answers', () => {
  it('asks once while an answer is fresh, and again once it is older than its age', async () => {
    const dns = fakeDns({ 'api.example.com': ['93.184.216.34'] });
    const c = clock();
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000, now: c.now });

    for (let i = 0; i < 5; i++) expect(await resolve('api.example.com')).toEqual(['93.184.216.34']);
    expect(dns.asked).toHaveLength(1);

    c.advance(10_000);
    dns.table['api.example.com'] = ['93.184.216.35'];
    expect(await resolve('api.example.com')).toEqual(['93.184.216.35']);
    expect(dns.asked).toHaveLength(2);
  });

  it('shares one query among lookups of one name made at the same time', async () => {
    const dns = fakeDns({ 'api.example.com': ['93.184.216.34'], 'other.example.com': ['93.184.216.40'] });
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000 });
    dns.hold();
    const waiting = [1, 2, 3, 4].map(() => resolve('api.example.com'));
    const other = resolve('other.example.com');
    dns.release();
    expect(await Promise.all(waiting)).toEqual(Array(4).fill(['93.184.216.34']));
    expect(await other).toEqual(['93.184.216.40']);
    expect(dns.asked.sort()).toEqual(['api.example.com', 'other.example.com']);
  });

  it('keeps neither a failure nor an empty answer: the next lookup asks again', async () => {
    const dns = fakeDns({ 'empty.example.com': [] });
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000 });
    await expect(resolve('gone.example.com')).rejects.toThrow(/ENOTFOUND/);
    await expect(resolve('gone.example.com')).rejects.toThrow(/ENOTFOUND/);
    expect(await resolve('empty.example.com')).toEqual([]);
    expect(await resolve('empty.example.com')).toEqual([]);
    expect(dns.asked).toEqual([
      'gone.example.com',
      'gone.example.com',
      'empty.example.com',
      'empty.example.com',
    ]);
  });

  it('refreshes an answer in use near the end of its age without making the caller wait', async () => {
    const dns = fakeDns({ 'api.example.com': ['93.184.216.34'] });
    const c = clock();
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000, now: c.now });
    await resolve('api.example.com');

    c.advance(8_000);
    dns.table['api.example.com'] = ['93.184.216.35'];
    dns.hold(); // the DNS server is slow: the caller must not wait for it
    expect(await resolve('api.example.com')).toEqual(['93.184.216.34']);
    expect(await resolve('api.example.com')).toEqual(['93.184.216.34']);
    expect(dns.asked).toHaveLength(2); // one refresh, not one per use
    dns.release();
    await flush();
    expect(await resolve('api.example.com')).toEqual(['93.184.216.35']);
    expect(dns.asked).toHaveLength(2);
  });

  it('keeps using an answer whose refresh failed, but never past its age', async () => {
    const dns = fakeDns({ 'api.example.com': ['93.184.216.34'] });
    const c = clock();
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000, now: c.now });
    await resolve('api.example.com');

    delete dns.table['api.example.com'];
    c.advance(9_000);
    expect(await resolve('api.example.com')).toEqual(['93.184.216.34']);
    await flush();
    c.advance(1_000);
    await expect(resolve('api.example.com')).rejects.toThrow(/ENOTFOUND/);
  });

  it('treats a clock that went back as an expired answer', async () => {
    const dns = fakeDns({ 'api.example.com': ['93.184.216.34'] });
    const c = clock();
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000, now: c.now });
    await resolve('api.example.com');
    c.advance(-60_000);
    await resolve('api.example.com');
    expect(dns.asked).toHaveLength(2);
  });

  it('keeps at most maxEntries names, dropping the oldest answer first', async () => {
    const table: Record<string, string[]> = {};
    for (let i = 0; i < 5; i++) table[`h${i}.example.com`] = [`93.184.216.${i}`];
    const dns = fakeDns(table);
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000, maxEntries: 3 });
    for (let i = 0; i < 5; i++) await resolve(`h${i}.example.com`);
    dns.asked.length = 0;
    for (const i of [2, 3, 4]) await resolve(`h${i}.example.com`);
    expect(dns.asked).toEqual([]);
    await resolve('h0.example.com');
    expect(dns.asked).toEqual(['h0.example.com']);
  });

  it('hands every caller its own copy: changing one answer changes no other', async () => {
    const dns = fakeDns({ 'api.example.com': ['93.184.216.34', '93.184.216.35'] });
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 10_000 });
    const first = await resolve('api.example.com');
    first.splice(0, 2, '10.0.0.1');
    expect(await resolve('api.example.com')).toEqual(['93.184.216.34', '93.184.216.35']);
  });

  it('with an age of 0 asks for every lookup', async () => {
    const dns = fakeDns({ 'api.example.com': ['93.184.216.34'] });
    const resolve = cachedResolver(dns.resolve, { maxAgeMs: 0 });
    await resolve('api.example.com');
    await resolve('api.example.com');
    expect(dns.asked).toHaveLength(2);
  });
});
