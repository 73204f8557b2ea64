import { createHook } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { busNames, createBus, createInProcessBus, type HandlerOutcome } from '../src/index.js';
import { describeBusConformance } from './conformance.js';
import { Inbox, sleep } from './support.js';

const names = busNames(`t${randomBytes(4).toString('hex')}`);

describeBusConformance('in-process', async () => ({ bus: createInProcessBus({ names }), names }));

describe('in-process bus: its own limits', () => {
  const ack: HandlerOutcome = { type: 'ack' };

  it('forgets a msgId once the duplicate window has passed', async () => {
    const bus = createInProcessBus({ names, stream: { duplicateWindowMs: 30 } });
    const subject = names.eventSubject('dw', 'x');
    await bus.publish(subject, 1, { msgId: 'same' });
    await bus.publish(subject, 2, { msgId: 'same' });
    await sleep(40);
    await bus.publish(subject, 3, { msgId: 'same' });
    const got = new Inbox<unknown>();
    await bus.consume({ durable: 'dw' }, async (m) => (got.push(m.data), ack));
    await got.count(2);
    await bus.close();
    expect(got.items).toEqual([1, 3]);
  });

  it('keeps at most maxMessages events; a new durable starts at the oldest kept', async () => {
    const bus = createInProcessBus({ names, stream: { maxMessages: 3 } });
    const subject = names.eventSubject('cap', 'x');
    for (let i = 1; i <= 5; i++) await bus.publish(subject, i, { msgId: `m${i}` });
    const got = new Inbox<unknown>();
    await bus.consume({ durable: 'cap' }, async (m) => (got.push(m.data), ack));
    await got.count(3);
    await bus.close();
    expect(got.items).toEqual([3, 4, 5]);
  });

  it('events outside a stopped durable filter do not hold the stream full', async () => {
    // A filtered durable (the notifier's) whose consumer is not running: events it will never
    // take are finished for it as they are stored, so they do not count against the limit.
    const bus = createInProcessBus({ names, stream: { maxMessages: 3 } });
    const alerts = await bus.consume(
      { durable: 'alerts', filterSubject: names.eventSubject('alert', '*') },
      async () => ack,
    );
    await alerts.stop();
    for (let i = 1; i <= 10; i++) await bus.publish(names.eventSubject('other', 'x'), i, { msgId: `o${i}` });
    // What it does filter still waits for it, and still fills the stream.
    for (let i = 1; i <= 3; i++) await bus.publish(names.eventSubject('alert', 'x'), i, { msgId: `a${i}` });
    await expect(bus.publish(names.eventSubject('alert', 'x'), 4, { msgId: 'a4' })).rejects.toMatchObject({
      code: 'BUS_PUBLISH_FAILED',
    });
    const got = new Inbox<unknown>();
    await bus.consume({ durable: 'alerts', filterSubject: names.eventSubject('alert', '*') }, async (m) => {
      got.push(m.data);
      return ack;
    });
    await got.count(3);
    await bus.close();
    expect(got.items).toEqual([1, 2, 3]);
  });

  it('never drops an event a durable has not finished: a full stream refuses the publish instead', async () => {
    const bus = createInProcessBus({ names, stream: { maxMessages: 3 } });
    const subject = names.eventSubject('full', 'x');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const got = new Inbox<unknown>();
    // A durable that is behind (like the audit writer under load).
    await bus.consume({ durable: 'slow' }, async (m) => {
      await gate;
      got.push(m.data);
      return ack;
    });
    for (let i = 1; i <= 3; i++) await bus.publish(subject, i, { msgId: `f${i}` });
    await expect(bus.publish(subject, 4, { msgId: 'f4' })).rejects.toMatchObject({
      code: 'BUS_PUBLISH_FAILED',
    });
    release();
    await got.count(3);
    // Once the consumer caught up, the oldest finished events make room again.
    await bus.publish(subject, 5, { msgId: 'f5' });
    await got.count(4);
    await bus.close();
    expect(got.items).toEqual([1, 2, 3, 5]);
  });

  it('createBus picks the in-process transport without NATS servers', async () => {
    const bus = await createBus({ natsServers: [], names });
    await bus.publish(names.eventSubject('cb', 'x'), 1, { msgId: 'cb' });
    await bus.close();
  });
});

describe('in-process bus: consumer loop cost', () => {
  it('regression: taking a message costs the same however many handlers are running', async () => {
    // The loop raced every running handler each time it waited, attaching a reaction to each:
    // the audit writer, which holds up to 64 handlers for one insert, paid for all of them on
    // every event. Counted in promises created (work, not time): the last events of a fill cost
    // what the first ones did.
    const bus = createInProcessBus({ names });
    const subject = names.eventSubject('loop', 'x');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = 0;
    const consumer = await bus.consume({ durable: 'loop', concurrency: 64 }, async () => {
      started++;
      await gate;
      return { type: 'ack' };
    });
    let promises = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === 'PROMISE') promises++;
      },
    });
    const publishOne = async (i: number) => {
      await bus.publish(subject, i, { msgId: `l${i}` });
      await new Promise<void>((r) => setImmediate(r));
    };
    const costOf = async (from: number, to: number) => {
      hook.enable();
      promises = 0;
      for (let i = from; i < to; i++) await publishOne(i);
      hook.disable();
      return promises;
    };
    const first = await costOf(0, 8); // 0 to 8 handlers running
    await costOf(8, 48);
    const last = await costOf(48, 56); // 48 to 56 running
    expect(started).toBe(56);
    release();
    await consumer.stop();
    await bus.close();
    // The old loop made about 48 more promises per event here, so 380 more over these eight.
    expect(last).toBeLessThanOrEqual(first + 16);
  });
});

describe('in-process bus: close', () => {
  it('lets running consumers finish the backlog before stopping them', async () => {
    const bus = createInProcessBus({ names });
    const subject = names.eventSubject('drain', 'x');
    const got = new Inbox<unknown>();
    await bus.consume({ durable: 'drain' }, async (m) => {
      await sleep(5);
      got.push(m.data);
      return { type: 'ack' };
    });
    for (let i = 1; i <= 20; i++) await bus.publish(subject, i, { msgId: `d${i}` });
    await bus.close();
    expect(got.items).toHaveLength(20);
  });
});
