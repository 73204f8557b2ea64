/**
 * The one behavioural contract of @vlt/bus, run against every transport. A transport passes
 * when services cannot tell it apart from another one through the Bus interface.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BusClosedError,
  BusConflictError,
  BusError,
  BusNoRespondersError,
  BusPublishError,
  BusReplyError,
  BusTimeoutError,
  type Bus,
  type BusNames,
  type HandlerOutcome,
  type KvEntry,
  type StreamMessage,
} from '../src/index.js';
import { activeTraceId, deferred, Inbox, installTestTracing, sleep, withSpanContext } from './support.js';

export interface ConformanceTarget {
  bus: Bus;
  names: BusNames;
  /** Removes whatever the run left on the broker. */
  cleanup?: () => Promise<void>;
}

const ack: HandlerOutcome = { type: 'ack' };

export function describeBusConformance(label: string, open: () => Promise<ConformanceTarget>): void {
  describe(`bus conformance: ${label}`, () => {
    let t: ConformanceTarget;
    let bus: Bus;
    let names: BusNames;
    let n = 0;
    /** A fresh token per use, so tests never see each other's subjects, durables or buckets. */
    const uid = () => `u${++n}`;
    const bucketName = () => `${names.buckets.policies}-${uid()}`;
    const topic = () => {
      const cat = uid();
      return {
        cat,
        subject: names.eventSubject(cat, 'happened'),
        filter: names.eventSubject(cat, '>'),
        durable: `${cat}-${names.durable.audit}`,
      };
    };

    beforeAll(async () => {
      t = await open();
      bus = t.bus;
      names = t.names;
    });
    afterAll(async () => {
      await bus?.close();
      await t?.cleanup?.();
    });

    describe('kv', () => {
      it('puts, gets, deletes and lists keys with increasing revisions', async () => {
        const kv = await bus.kv(bucketName());
        const r1 = await kv.put('a', { n: 1, nested: { list: [1, 'x', null] } });
        const r2 = await kv.put('b', 'two');
        expect(r1).toBeGreaterThan(0);
        expect(r2).toBeGreaterThan(r1);
        expect(await kv.get('a')).toEqual({
          value: { n: 1, nested: { list: [1, 'x', null] } },
          revision: r1,
        });
        expect(await kv.get('missing')).toBeNull();

        const r3 = await kv.put('a', { n: 3 });
        expect(r3).toBeGreaterThan(r2);
        expect(await kv.get('a')).toEqual({ value: { n: 3 }, revision: r3 });
        expect((await kv.keys()).sort()).toEqual(['a', 'b']);

        await kv.delete('a');
        expect(await kv.get('a')).toBeNull();
        expect(await kv.keys()).toEqual(['b']);
        expect(await bus.kv(kv.name)).toBe(kv); // one handle per bucket
      });

      it('compare-and-set writes only from the expected revision, so concurrent writers cannot both win', async () => {
        const kv = await bus.kv(bucketName());
        const r1 = await kv.compareAndSet('c', { n: 1 }, 0);
        await expect(kv.compareAndSet('c', { n: 9 }, 0)).rejects.toBeInstanceOf(BusConflictError);
        const r2 = await kv.compareAndSet('c', { n: 2 }, r1);
        expect(r2).toBeGreaterThan(r1);
        await expect(kv.compareAndSet('c', { n: 9 }, r1)).rejects.toBeInstanceOf(BusConflictError);
        expect(await kv.get('c')).toEqual({ value: { n: 2 }, revision: r2 });
        // Ten racing increments from the same revision: exactly one lands.
        const results = await Promise.allSettled(
          Array.from({ length: 10 }, (_, i) => kv.compareAndSet('c', { n: 100 + i }, r2)),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      });

      it('stores a copy: later mutation of the caller object does not leak in', async () => {
        const kv = await bus.kv(bucketName());
        const value = { list: [1] };
        await kv.put('k', value);
        value.list.push(2);
        const got = await kv.get('k');
        expect(got?.value).toEqual({ list: [1] });
        (got!.value as { list: number[] }).list.push(3);
        expect((await kv.get('k'))?.value).toEqual({ list: [1] });
      });

      it('rejects invalid keys and bucket names with BusError', async () => {
        const kv = await bus.kv(bucketName());
        await expect(kv.put('bad key', 1)).rejects.toBeInstanceOf(BusError);
        await expect(kv.put('.lead', 1)).rejects.toBeInstanceOf(BusError);
        await expect(bus.kv('no.dots')).rejects.toBeInstanceOf(BusError);
      });

      it('watch delivers the current snapshot, resolves ready, then live changes incl. deletes', async () => {
        const kv = await bus.kv(bucketName());
        await kv.put('a', 1);
        const rb = await kv.put('b', 2);
        const ra = await kv.put('a', 3);
        await kv.put('gone', 0);
        await kv.delete('gone');

        const seen = new Inbox<KvEntry>();
        const w = await kv.watch((e) => seen.push(e));
        await w.ready;
        // Current values only, oldest revision first; the deleted key is not in the snapshot.
        expect(seen.items).toEqual([
          { key: 'b', value: 2, operation: 'put', revision: rb },
          { key: 'a', value: 3, operation: 'put', revision: ra },
        ]);

        const rc = await kv.put('c', { deep: true });
        await kv.delete('b');
        await seen.count(4);
        expect(seen.items[2]).toEqual({ key: 'c', value: { deep: true }, operation: 'put', revision: rc });
        expect(seen.items[3]).toMatchObject({ key: 'b', value: null, operation: 'delete' });
        expect(seen.items[3]!.revision).toBeGreaterThan(rc);

        await w.stop();
        await kv.put('after-stop', 1);
        const probe = new Inbox<KvEntry>();
        const w2 = await kv.watch((e) => probe.push(e));
        await w2.ready; // by now a still-running first watch would have had the change too
        await w2.stop();
        expect(probe.items.map((e) => e.key)).toContain('after-stop');
        expect(seen.items).toHaveLength(4);
      });

      it('watch on an empty bucket is ready at once and then delivers updates', async () => {
        const kv = await bus.kv(bucketName());
        const seen = new Inbox<KvEntry>();
        const w = await kv.watch((e) => seen.push(e));
        await w.ready;
        expect(seen.items).toEqual([]);
        expect(await kv.keys()).toEqual([]);
        await kv.put('first', 'v');
        await seen.count(1);
        expect(seen.items[0]).toMatchObject({ key: 'first', value: 'v', operation: 'put' });
        await w.stop();
      });
    });

    describe('events stream', () => {
      it('publishes and consumes in order with data, subject, msgId, headers and deliveryCount', async () => {
        const { subject, filter, durable } = topic();
        for (let i = 1; i <= 3; i++) {
          await bus.publish(subject, { i }, { msgId: `${durable}-${i}`, headers: { 'x-test': `h${i}` } });
        }
        const got = new Inbox<StreamMessage>();
        const c = await bus.consume({ durable, filterSubject: filter }, async (m) => (got.push(m), ack));
        await got.count(3);
        await c.stop();
        expect(got.items.map((m) => m.data)).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }]);
        expect(got.items[0]).toMatchObject({ subject, msgId: `${durable}-1`, deliveryCount: 1 });
        expect(got.items[0]!.headers['x-test']).toBe('h1');
        // Broker headers are not passed through as caller headers.
        expect(Object.keys(got.items[0]!.headers).some((k) => /^nats-/i.test(k))).toBe(false);
      });

      it('concurrency N runs up to N handlers at once; each message is acked once; default is one at a time', async () => {
        const { subject, filter, durable } = topic();
        for (let i = 1; i <= 8; i++) await bus.publish(subject, { i }, { msgId: `${durable}-c${i}` });
        let running = 0;
        let peak = 0;
        const gate = deferred<void>();
        const got = new Inbox<number>();
        const c = await bus.consume({ durable, filterSubject: filter, concurrency: 4 }, async (m) => {
          running++;
          peak = Math.max(peak, running);
          if (peak >= 4) gate.resolve();
          await gate.promise;
          running--;
          got.push((m.data as { i: number }).i);
          return ack;
        });
        await got.count(8);
        await c.stop();
        expect(peak).toBe(4);
        expect([...got.items].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);

        // Acked: a new consumer on the same durable gets nothing again.
        const again = new Inbox<unknown>();
        const c2 = await bus.consume(
          { durable, filterSubject: filter },
          async (m) => (again.push(m.data), ack),
        );
        await sleep(300);
        await c2.stop();
        expect(again.items).toEqual([]);

        const { subject: s2, filter: f2, durable: d2 } = topic();
        for (let i = 1; i <= 4; i++) await bus.publish(s2, { i }, { msgId: `${d2}-s${i}` });
        let one = 0;
        let onePeak = 0;
        const seq = new Inbox<number>();
        const c3 = await bus.consume({ durable: d2, filterSubject: f2 }, async (m) => {
          one++;
          onePeak = Math.max(onePeak, one);
          await sleep(5);
          one--;
          seq.push((m.data as { i: number }).i);
          return ack;
        });
        await seq.count(4);
        await c3.stop();
        expect(onePeak).toBe(1);
        expect(seq.items).toEqual([1, 2, 3, 4]);
      });

      it('stores a msgId published twice only once', async () => {
        const { subject, filter, durable } = topic();
        await bus.publish(subject, 'first', { msgId: `${durable}-dup` });
        await bus.publish(subject, 'second', { msgId: `${durable}-dup` });
        await bus.publish(subject, 'sentinel', { msgId: `${durable}-end` });
        const got = new Inbox<unknown>();
        const c = await bus.consume({ durable, filterSubject: filter }, async (m) => (got.push(m.data), ack));
        await got.until((xs) => xs.includes('sentinel'), 'sentinel');
        await c.stop();
        expect(got.items).toEqual(['first', 'sentinel']);
      });

      it('filters by subject and gives every durable its own copy of each event', async () => {
        const a = topic();
        const b = topic();
        await bus.publish(a.subject, 'for-a', { msgId: `${a.durable}-1` });
        await bus.publish(b.subject, 'for-b', { msgId: `${b.durable}-1` });
        const gotA = new Inbox<unknown>();
        const gotA2 = new Inbox<unknown>();
        const gotB = new Inbox<unknown>();
        const cs = await Promise.all([
          bus.consume({ durable: a.durable, filterSubject: a.filter }, async (m) => (gotA.push(m.data), ack)),
          bus.consume(
            { durable: `${a.durable}-second`, filterSubject: a.filter },
            async (m) => (gotA2.push(m.data), ack),
          ),
          bus.consume({ durable: b.durable, filterSubject: b.filter }, async (m) => (gotB.push(m.data), ack)),
        ]);
        await Promise.all([gotA.count(1), gotA2.count(1), gotB.count(1)]);
        await bus.publish(a.subject, 'later', { msgId: `${a.durable}-2` });
        await Promise.all([gotA.count(2), gotA2.count(2)]);
        await Promise.all(cs.map((c) => c.stop()));
        expect(gotA.items).toEqual(['for-a', 'later']);
        expect(gotA2.items).toEqual(['for-a', 'later']);
        expect(gotB.items).toEqual(['for-b']);
      });

      it('retry redelivers after the requested delay with a higher deliveryCount', async () => {
        const { subject, filter, durable } = topic();
        await bus.publish(subject, 'x', { msgId: `${durable}-1` });
        const got = new Inbox<{ count: number; at: number }>();
        const c = await bus.consume({ durable, filterSubject: filter }, async (m) => {
          got.push({ count: m.deliveryCount, at: Date.now() });
          return m.deliveryCount === 1 ? { type: 'retry', delayMs: 150 } : ack;
        });
        await got.count(2);
        await c.stop();
        expect(got.items.map((d) => d.count)).toEqual([1, 2]);
        expect(got.items[1]!.at - got.items[0]!.at).toBeGreaterThanOrEqual(130);
      });

      it('drop never redelivers, and the stream moves on', async () => {
        const { subject, filter, durable } = topic();
        await bus.publish(subject, 'poison', { msgId: `${durable}-1` });
        await bus.publish(subject, 'next', { msgId: `${durable}-2` });
        const got = new Inbox<unknown>();
        const c = await bus.consume({ durable, filterSubject: filter, ackWaitMs: 1_000 }, async (m) => {
          got.push(m.data);
          return m.data === 'poison' ? { type: 'drop', reason: 'test' } : ack;
        });
        await got.count(2);
        await sleep(300); // a nak instead of a term would come back well within this
        await c.stop();
        expect(got.items).toEqual(['poison', 'next']);
      });

      it('redelivers after a handler throws, with backoff', async () => {
        const { subject, filter, durable } = topic();
        await bus.publish(subject, 'x', { msgId: `${durable}-1` });
        const got = new Inbox<number>();
        const c = await bus.consume({ durable, filterSubject: filter }, async (m) => {
          got.push(m.deliveryCount);
          if (m.deliveryCount === 1) throw new Error('transient');
          return ack;
        });
        await got.count(2);
        await c.stop();
        expect(got.items).toEqual([1, 2]);
      });

      it('retries a handler that answers no outcome', async () => {
        const { subject, filter, durable } = topic();
        await bus.publish(subject, 'x', { msgId: `${durable}-1` });
        const got = new Inbox<number>();
        const c = await bus.consume({ durable, filterSubject: filter }, async (m) => {
          got.push(m.deliveryCount);
          return (m.deliveryCount === 1 ? undefined : ack) as HandlerOutcome;
        });
        await got.count(2);
        await c.stop();
        expect(got.items).toEqual([1, 2]);
      });

      it('stops redelivering after maxDeliver', async () => {
        const { subject, filter, durable } = topic();
        await bus.publish(subject, 'always-fails', { msgId: `${durable}-1` });
        const got = new Inbox<number>();
        const c = await bus.consume(
          { durable, filterSubject: filter, maxDeliver: 2, ackWaitMs: 1_000 },
          async (m) => {
            got.push(m.deliveryCount);
            return { type: 'retry', delayMs: 20 };
          },
        );
        await got.count(2);
        await sleep(300);
        await c.stop();
        expect(got.items).toEqual([1, 2]);
      });

      it('a durable resumes where it left off: nothing lost, nothing acked delivered twice', async () => {
        const { subject, filter, durable } = topic();
        const ackWaitMs = 500;
        for (let i = 1; i <= 5; i++) await bus.publish(subject, i, { msgId: `${durable}-${i}` });
        const handled = new Inbox<number>();
        const reached3 = deferred();
        const handler = async (m: StreamMessage) => {
          handled.push(m.data as number);
          if (m.data === 3) reached3.resolve();
          return ack;
        };
        const first = await bus.consume({ durable, filterSubject: filter, ackWaitMs }, handler);
        await reached3.promise;
        await first.stop();
        const handledByFirst = handled.items.length;
        expect(handledByFirst).toBeGreaterThanOrEqual(3);

        for (let i = 6; i <= 8; i++) await bus.publish(subject, i, { msgId: `${durable}-${i}` });
        const second = await bus.consume({ durable, filterSubject: filter, ackWaitMs }, handler);
        await handled.until((xs) => xs.includes(8), 'event 8');
        await sleep(ackWaitMs + 200); // an ack the broker missed would be redelivered by now
        await second.stop();
        expect(handled.items).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      });

      it('stop() waits for the in-flight handler, whose ack then sticks', async () => {
        const { subject, filter, durable } = topic();
        await bus.publish(subject, 'slow', { msgId: `${durable}-1` });
        const started = deferred();
        let finished = false;
        let calls = 0;
        const c = await bus.consume({ durable, filterSubject: filter, ackWaitMs: 500 }, async () => {
          calls++;
          started.resolve();
          await sleep(150);
          finished = true;
          return ack;
        });
        await started.promise;
        await c.stop();
        expect(finished).toBe(true);

        await bus.publish(subject, 'sentinel', { msgId: `${durable}-2` });
        const got = new Inbox<unknown>();
        const again = await bus.consume(
          { durable, filterSubject: filter, ackWaitMs: 500 },
          async (m) => (got.push(m.data), ack),
        );
        await got.until((xs) => xs.includes('sentinel'), 'sentinel');
        await again.stop();
        expect(got.items).toEqual(['sentinel']);
        expect(calls).toBe(1);
      });

      it('rejects what cannot be stored with BusPublishError', async () => {
        const { durable } = topic();
        await expect(bus.publish('elsewhere.subject', 1, { msgId: `${durable}-x` })).rejects.toBeInstanceOf(
          BusPublishError,
        );
        await expect(bus.publish(names.eventSubject('c', 'a'), 1, { msgId: '' })).rejects.toBeInstanceOf(
          BusPublishError,
        );
        await expect(
          bus.publish(names.eventSubject('c', 'a'), 1, {
            msgId: `${durable}-y`,
            headers: { 'Nats-Expected-Stream': 'X' },
          }),
        ).rejects.toBeInstanceOf(BusPublishError);
      });

      it('a new durable can take over where a retired one stopped (startSequence, durableAckFloor, deleteDurable)', async () => {
        const { subject, filter, durable } = topic();
        expect(await bus.durableAckFloor(durable)).toBeNull();
        for (let i = 1; i <= 3; i++) await bus.publish(subject, i, { msgId: `${durable}-${i}` });
        const old = new Inbox<unknown>();
        const c = await bus.consume({ durable, filterSubject: filter }, async (m) => (old.push(m.data), ack));
        await old.count(3);
        await c.stop();
        const floor = await bus.durableAckFloor(durable);
        expect(floor).toEqual(expect.any(Number));
        // Published while nobody consumes: the successor must get exactly these.
        for (let i = 4; i <= 5; i++) await bus.publish(subject, i, { msgId: `${durable}-${i}` });
        const next = new Inbox<unknown>();
        const successor = `${durable}-next`;
        const s = await bus.consume(
          { durable: successor, filterSubject: filter, startSequence: floor! + 1 },
          async (m) => (next.push(m.data), ack),
        );
        await next.count(2);
        await sleep(100);
        await s.stop();
        expect(next.items).toEqual([4, 5]);
        await bus.deleteDurable(durable);
        expect(await bus.durableAckFloor(durable)).toBeNull();
        await bus.deleteDurable(durable); // deleting what is gone is not an error
        // An existing durable keeps its own position: startSequence applies only on creation.
        const again = new Inbox<unknown>();
        await bus.publish(subject, 6, { msgId: `${durable}-6` });
        const s2 = await bus.consume(
          { durable: successor, filterSubject: filter, startSequence: 1 },
          async (m) => (again.push(m.data), ack),
        );
        await again.count(1);
        await sleep(100);
        await s2.stop();
        expect(again.items).toEqual([6]);
        // A durable created afresh without startSequence still gets everything kept.
        const all = new Inbox<unknown>();
        const s3 = await bus.consume(
          { durable, filterSubject: filter },
          async (m) => (all.push(m.data), ack),
        );
        await all.count(6);
        await s3.stop();
        expect(all.items).toEqual([1, 2, 3, 4, 5, 6]);
      });

      it('lastEventSequence: a durable started one above it takes only what is published after', async () => {
        const { subject, filter, durable } = topic();
        const first = await bus.lastEventSequence();
        for (let i = 1; i <= 3; i++) await bus.publish(subject, i, { msgId: `${durable}-${i}` });
        // Other tests of the suite may publish meanwhile: at least these three were stored.
        const last = await bus.lastEventSequence();
        expect(last).toBeGreaterThanOrEqual(first + 3);
        const got = new Inbox<unknown>();
        const c = await bus.consume(
          { durable, filterSubject: filter, startSequence: last + 1 },
          async (m) => (got.push(m.data), ack),
        );
        await bus.publish(subject, 4, { msgId: `${durable}-4` });
        await got.count(1);
        await sleep(100);
        await c.stop();
        expect(got.items).toEqual([4]);
      });

      it('replicas creating one durable at once all bind to it, whatever start each asked for', async () => {
        const { subject, filter, durable } = topic();
        for (let i = 1; i <= 3; i++) await bus.publish(subject, i, { msgId: `${durable}-${i}` });
        const last = await bus.lastEventSequence();
        const got = new Inbox<unknown>();
        // Five starting replicas, each with its own start (as notifiers upgrading together): one
        // creates the durable, the others find it created under them and bind to it.
        const consumers = await Promise.all(
          [0, 1, 2, 3, 4].map((k) =>
            bus.consume(
              { durable, filterSubject: filter, startSequence: last + 1 - k },
              async (m) => (got.push(m.data), ack),
            ),
          ),
        );
        await bus.publish(subject, 4, { msgId: `${durable}-4` });
        await got.count(1);
        await sleep(100);
        for (const c of consumers) await c.stop();
        // One durable: each event went to one of them, once.
        expect(got.items.filter((x) => x === 4)).toEqual([4]);
        expect(new Set(got.items).size).toBe(got.items.length);
      });

      it('refuses to re-create a durable with a different filter', async () => {
        const a = topic();
        const c = await bus.consume({ durable: a.durable, filterSubject: a.filter }, async () => ack);
        await c.stop();
        await expect(
          bus.consume(
            { durable: a.durable, filterSubject: names.eventSubject('other', '>') },
            async () => ack,
          ),
        ).rejects.toBeInstanceOf(BusError);
      });
    });

    describe('request/reply', () => {
      it('answers a request and passes headers', async () => {
        const subject = `${names.rpc.credentialsGet}.${uid()}`;
        const r = await bus.reply(subject, async (data, headers) => ({ echo: data, h: headers['x-req'] }));
        expect(await bus.request(subject, { q: 1 }, { headers: { 'x-req': 'yes' } })).toEqual({
          echo: { q: 1 },
          h: 'yes',
        });
        await r.stop();
      });

      it('shares load between two repliers in one queue group; each request is answered once', async () => {
        const subject = `${names.rpc.approvalsCreate}.${uid()}`;
        const calls = { a: 0, b: 0 };
        const ra = await bus.reply(subject, async () => (calls.a++, 'a'), { queue: 'svc' });
        const rb = await bus.reply(subject, async () => (calls.b++, 'b'), { queue: 'svc' });
        const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => bus.request(subject, i)));
        await Promise.all([ra.stop(), rb.stop()]);
        expect(calls.a + calls.b).toBe(40);
        expect(calls.a).toBeGreaterThan(0);
        expect(calls.b).toBeGreaterThan(0);
        expect(answers.filter((x) => x === 'a')).toHaveLength(calls.a);
      });

      it('times out with BusTimeoutError', async () => {
        const subject = `${names.rpc.approvalsRedeem}.${uid()}`;
        const r = await bus.reply(subject, async () => (await sleep(200), 'late'));
        const started = Date.now();
        await expect(bus.request(subject, null, { timeoutMs: 80 })).rejects.toBeInstanceOf(BusTimeoutError);
        expect(Date.now() - started).toBeLessThan(190);
        await r.stop();
      });

      it('rejects with BusNoRespondersError when nobody serves the subject (also after stop)', async () => {
        const subject = `${names.rpc.credentialsGet}.${uid()}`;
        await expect(bus.request(subject, null, { timeoutMs: 2_000 })).rejects.toBeInstanceOf(
          BusNoRespondersError,
        );
        const r = await bus.reply(subject, async () => 'ok');
        expect(await bus.request(subject, null)).toBe('ok');
        await r.stop();
        await expect(bus.request(subject, null, { timeoutMs: 2_000 })).rejects.toBeInstanceOf(
          BusNoRespondersError,
        );
      });

      it('turns a throwing reply handler into a BusReplyError with its message and code, no stack', async () => {
        const subject = `${names.rpc.credentialsGet}.${uid()}`;
        const r = await bus.reply(subject, async () => {
          throw Object.assign(new Error('connection needs reauth'), { code: 'NEEDS_REAUTH' });
        });
        const err = await bus.request(subject, null).catch((e: unknown) => e);
        await r.stop();
        expect(err).toBeInstanceOf(BusReplyError);
        expect(err).toBeInstanceOf(BusError);
        expect((err as BusReplyError).message).toBe('connection needs reauth');
        expect((err as BusReplyError).remoteCode).toBe('NEEDS_REAUTH');
        expect(JSON.stringify(err) + String((err as Error).message)).not.toMatch(/\bat .*\.ts:\d+/);
      });

      it('returns null for a handler that returns nothing', async () => {
        const subject = `${names.rpc.credentialsGet}.${uid()}`;
        const r = await bus.reply(subject, async () => undefined);
        expect(await bus.request(subject, 1)).toBeNull();
        await r.stop();
      });
    });

    describe('trace context', () => {
      let uninstall: () => void;
      beforeAll(() => {
        uninstall = installTestTracing();
      });
      afterAll(() => uninstall());

      const traceId = '0af7651916cd43dd8448eb211c80319c';
      const spanId = 'b7ad6b7169203331';

      it('carries traceparent from publish to the consumer handler', async () => {
        const { subject, filter, durable } = topic();
        await withSpanContext(traceId, spanId, () => bus.publish(subject, 1, { msgId: `${durable}-1` }));
        const got = new Inbox<{ active?: string; header?: string }>();
        const c = await bus.consume({ durable, filterSubject: filter }, async (m) => {
          got.push({ active: activeTraceId(), header: m.headers.traceparent });
          return ack;
        });
        await got.count(1);
        await c.stop();
        expect(got.items[0]!.active).toBe(traceId);
        expect(got.items[0]!.header).toMatch(new RegExp(`^00-${traceId}-${spanId}-`));
      });

      it('carries traceparent from request to the reply handler', async () => {
        const subject = `${names.rpc.credentialsGet}.${uid()}`;
        const r = await bus.reply(subject, async () => activeTraceId() ?? 'none');
        expect(await withSpanContext(traceId, spanId, () => bus.request(subject, null))).toBe(traceId);
        expect(await bus.request(subject, null)).toBe('none');
        await r.stop();
      });
    });

    describe('consumer lag', () => {
      it('pending() counts events waiting or in flight, and reaches 0 once all are acked', async () => {
        const { subject, filter, durable } = topic();
        for (let i = 0; i < 3; i++) await bus.publish(subject, i, { msgId: `${durable}-lag-${i}` });
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const c = await bus.consume({ durable, filterSubject: filter }, async () => (await gate, ack));
        const until = async (want: (n: number) => boolean) => {
          const deadline = Date.now() + 10_000;
          let n = await c.pending();
          while (!want(n) && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 50));
            n = await c.pending();
          }
          return n;
        };
        expect(await until((n) => n === 3)).toBe(3);
        release();
        expect(await until((n) => n === 0)).toBe(0);
        await c.stop();
      });
    });

    describe('broadcast', () => {
      it('delivers to every subscriber (no queue group), wildcards included, and not after stop', async () => {
        const base = `${names.broadcast.notificationsWildcard.slice(0, -2)}.${uid()}`;
        const a = new Inbox<unknown>();
        const b = new Inbox<unknown>();
        const subA = await bus.subscribe(`${base}.*`, (d) => a.push(d));
        const subB = await bus.subscribe(`${base}.one`, (d) => b.push(d));
        // NATS: a subscription is live once the server has seen it; a round trip makes sure.
        await bus.request(names.rpc.credentialsGet + '.' + uid(), {}).catch(() => undefined);
        await bus.broadcast(`${base}.one`, { n: 1 });
        await a.count(1);
        await b.count(1);
        expect(a.items).toEqual([{ n: 1 }]);
        expect(b.items).toEqual([{ n: 1 }]);
        await subB.stop();
        await bus.broadcast(`${base}.one`, { n: 2 });
        await a.count(2);
        expect(b.items).toHaveLength(1);
        await subA.stop();
      });
    });

    describe('close', () => {
      it('stops everything and then refuses work with BusClosedError', async () => {
        const extra = await open();
        const { subject, filter, durable } = topic();
        const got = new Inbox<unknown>();
        await extra.bus.consume({ durable, filterSubject: filter }, async (m) => (got.push(m.data), ack));
        await extra.bus.reply(`${names.rpc.credentialsGet}.${uid()}`, async () => 1);
        expect(extra.bus.isConnected()).toBe(true);
        await extra.bus.close();
        expect(extra.bus.isConnected()).toBe(false);
        await expect(extra.bus.publish(subject, 1, { msgId: `${durable}-1` })).rejects.toBeInstanceOf(
          BusClosedError,
        );
        await expect(extra.bus.kv('x')).rejects.toBeInstanceOf(BusClosedError);
        // Its broker state belongs to the suite's names and goes with the suite's cleanup.
      });
    });
  });
}
