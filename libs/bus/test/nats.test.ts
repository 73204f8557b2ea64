/**
 * The conformance suite against a real NATS server with JetStream (ADR 0005). The
 * vitest global setup finds the server; without one this file skips with the reason, and
 * with CI=true it fails instead.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, inject, it, vi } from 'vitest';
import { busNames, createBus, createNatsBus, type HandlerOutcome } from '../src/index.js';
import { describeBusConformance } from './conformance.js';
import { Inbox } from './support.js';

const natsUrl = inject('natsUrl');
const prefix = `t${randomBytes(4).toString('hex')}`;
const names = busNames(prefix);
const servers = natsUrl.split(',');

/** Deletes the events stream and every KV bucket stream this file created. */
async function removeRunState(): Promise<void> {
  const nc = await connect({ servers });
  try {
    const jsm = await jetstreamManager(nc);
    for await (const stream of jsm.streams.names()) {
      if (stream === names.eventsStream || stream.startsWith(`KV_${prefix}-`))
        await jsm.streams.delete(stream);
    }
  } finally {
    await nc.close();
  }
}

if (!natsUrl) {
  const reason = inject('servicesMissing') || 'NATS not reachable';
  if (process.env.CI === 'true') {
    describe('nats bus', () => {
      it('needs NATS when CI=true', () => {
        throw new Error(`CI=true but ${reason}`);
      });
    });
  } else {
    describe.skipIf(!natsUrl)(`nats bus (skipped: ${reason})`, () => {
      it('conformance', () => {});
    });
  }
} else {
  // File level, so it runs after every describe below has closed its buses.
  afterAll(removeRunState);

  describeBusConformance('nats', async () => ({
    bus: await createNatsBus({ servers, names, name: `bus-test-${prefix}` }),
    names,
  }));

  describe('nats bus: broker specifics', () => {
    const ack: HandlerOutcome = { type: 'ack' };

    it('creates the events stream with file storage and a 2 minute duplicate window', async () => {
      const bus = await createNatsBus({ servers, names });
      const nc = await connect({ servers });
      const info = await (await jetstreamManager(nc)).streams.info(names.eventsStream);
      await nc.close();
      await bus.close();
      expect(info.config).toMatchObject({
        subjects: [names.eventsWildcard],
        storage: 'file',
        duplicate_window: 120e9,
      });
    });

    it('a durable survives its process: a new connection resumes after the last ack', async () => {
      const subject = names.eventSubject('restart', 'x');
      const durable = `${prefix}-restart`;
      const one = await createBus({ natsServers: servers, names });
      for (let i = 1; i <= 3; i++) await one.publish(subject, i, { msgId: `restart-${i}` });
      const got = new Inbox<unknown>();
      await one.consume({ durable, filterSubject: subject }, async (m) => (got.push(m.data), ack));
      await got.count(3);
      await one.close();

      const two = await createBus({ natsServers: servers, names });
      await two.publish(subject, 4, { msgId: 'restart-4' });
      await two.consume({ durable, filterSubject: subject }, async (m) => (got.push(m.data), ack));
      await got.count(4);
      await two.close();
      expect(got.items).toEqual([1, 2, 3, 4]);
    });

    it('publishes made in one turn of the event loop leave in one socket write, in order, each acked', async () => {
      const bus = await createNatsBus({ servers, names, name: `bus-test-${prefix}-turn` });
      const subject = names.eventSubject('turn', 'x');
      const writes = vi.spyOn(net.Socket.prototype, 'write');
      try {
        // Ten callbacks of one turn, each a run of its own with microtasks between them (as ten
        // agents' requests handled in one poll phase are). Immediates, not timers: ten timers set
        // together may straddle a millisecond and fire in two turns.
        const published = await new Promise<Array<Promise<void>>>((resolve) => {
          const out: Array<Promise<void>> = [];
          for (let i = 0; i < 10; i++) {
            setImmediate(() => {
              out.push(bus.publish(subject, i, { msgId: `turn-${prefix}-${i}` }));
              if (out.length === 10) resolve(out);
            });
          }
        });
        await Promise.all(published);
        const carrying = writes.mock.calls.filter(([chunk]) =>
          Buffer.from(chunk as Uint8Array)
            .toString('latin1')
            .includes(subject),
        );
        expect(carrying).toHaveLength(1);
        const text = Buffer.from(carrying[0]![0] as Uint8Array).toString('latin1');
        expect(text.split(subject).length - 1).toBe(10);
      } finally {
        writes.mockRestore();
      }
      const got = new Inbox<unknown>();
      const c = await bus.consume({ durable: `${prefix}-turn`, filterSubject: subject }, async (m) => {
        got.push(m.data);
        return ack;
      });
      await got.count(10);
      await c.stop();
      await bus.close();
      expect(got.items).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });

    it('sent() resolves once what was published has been written to the socket, before its ack (ADR 0085)', async () => {
      const bus = await createNatsBus({ servers, names, name: `bus-test-${prefix}-sent` });
      const subject = names.eventSubject('sent', 'x');
      const writes = vi.spyOn(net.Socket.prototype, 'write');
      const carried = () =>
        writes.mock.calls.filter(([chunk]) =>
          Buffer.from(chunk as Uint8Array)
            .toString('latin1')
            .includes(subject),
        ).length;
      let acked = false;
      let atPublish = -1;
      let atSent = -1;
      try {
        const published = bus
          .publish(subject, 'one', { msgId: `sent-${prefix}-1` })
          .then(() => (acked = true));
        atPublish = carried();
        await bus.sent();
        atSent = carried();
        expect(acked).toBe(false);
        await published;
      } finally {
        writes.mockRestore();
      }
      expect(atPublish).toBe(0); // queued for the end of the turn (ADR 0082)
      expect(atSent).toBe(1);
      await bus.close();
    });

    it('fails to connect with a BusError when no server answers', async () => {
      await expect(createNatsBus({ servers: '127.0.0.1:1', names })).rejects.toThrow(
        /cannot connect to NATS/,
      );
    });
  });
}
