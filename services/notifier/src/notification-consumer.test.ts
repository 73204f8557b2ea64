/**
 * The notifier's subscriptions (ADR 0065): the broker hands it only the events it acts on, and
 * a notifier upgraded from the single whole-stream durable carries on exactly where that one
 * stopped. The in-process bus stands in for JetStream; the bus conformance suite shows both
 * transports behave alike for startSequence, durableAckFloor and deleteDurable.
 */
import { randomUUID } from 'node:crypto';
import { createLogger } from '@vlt/telemetry';
import { describe, expect, it } from 'vitest';
import {
  busNames,
  createInProcessBus,
  type Bus,
  type BusNames,
  type HandlerOutcome,
  type StreamMessage,
} from '@vlt/bus';
import { AuditAction, eventCategory, type AuditEventMessage } from '@vlt/contracts';
import type { PrismaClient } from '@vlt/db';
import { notifierSubscriptions, startNotifier } from './notification-consumer.js';
import { NOTIFIER_ACTIONS } from './plan.js';

/** Events with no workspace: the handler acks them without touching the database. */
function event(action: AuditAction): AuditEventMessage {
  return {
    v: 1,
    auditId: randomUUID(),
    action,
    timestamp: new Date().toISOString(),
    actor: 'user-1',
    workspaceId: null,
    agentId: null,
    connectionId: null,
    decision: 'info',
    metadata: {},
  };
}

async function publish(bus: Bus, names: BusNames, action: AuditAction): Promise<string> {
  const e = event(action);
  await bus.publish(names.eventSubject(eventCategory(action), action), e, { msgId: e.auditId });
  return e.auditId;
}

/** The bus, recording every message any consumer on it is handed. */
function recording(bus: Bus): { bus: Bus; delivered: StreamMessage[] } {
  const delivered: StreamMessage[] = [];
  return {
    delivered,
    bus: {
      ...bus,
      consume: (opts, handler) =>
        bus.consume(opts, async (m): Promise<HandlerOutcome> => {
          delivered.push(m);
          return handler(m);
        }),
    },
  };
}

const noDatabase = new Proxy({} as PrismaClient, {
  get() {
    throw new Error('these events must not reach the database');
  },
});

function start(bus: Bus, names: BusNames) {
  return startNotifier({
    bus,
    names,
    logger: createLogger({ service: 'notifier', level: 'silent' }),
    prisma: noDatabase,
    publicBaseUrl: 'https://vault.test',
    pushApiUrl: 'https://push.test',
  });
}

async function drained(consumer: { pending(): Promise<number> }): Promise<void> {
  const deadline = Date.now() + 5_000;
  while ((await consumer.pending()) > 0) {
    if (Date.now() > deadline) throw new Error('the notifier did not drain');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Whether a subscription's filter (one subject, or `category.>`) takes this subject. */
const matches = (filter: string, subject: string) =>
  filter.endsWith('.>') ? subject.startsWith(filter.slice(0, -1)) : filter === subject;

describe('notifier subscriptions', () => {
  it('cover exactly the actions the notifier acts on', () => {
    const names = busNames('t');
    const subs = notifierSubscriptions(names);
    for (const action of AuditAction.options) {
      const subject = names.eventSubject(eventCategory(action), action);
      expect(
        subs.some((s) => matches(s.filterSubject, subject)),
        action,
      ).toBe(NOTIFIER_ACTIONS.has(action));
    }
    expect(new Set(subs.map((s) => s.durable)).size).toBe(subs.length);
  });

  it('the broker never hands the notifier the execution traffic', async () => {
    const names = busNames(`n${randomUUID().slice(0, 8)}`);
    const rec = recording(createInProcessBus({ names }));
    const wanted = [
      await publish(rec.bus, names, 'approval_requested'),
      await publish(rec.bus, names, 'execution_denied'),
    ];
    for (const action of [
      'execution_requested',
      'execution_completed',
      'execution_error',
      'token_vended',
    ] as const)
      for (let i = 0; i < 5; i++) await publish(rec.bus, names, action);
    const notifier = await start(rec.bus, names);
    await drained(notifier);
    await notifier.stop();
    expect(rec.delivered.map((m) => m.msgId).sort()).toEqual([...wanted].sort());
    await rec.bus.close();
  });

  it('a subscription a later release adds starts with the events published from then on', async () => {
    const names = busNames(`n${randomUUID().slice(0, 8)}`);
    const bus = createInProcessBus({ names });
    const subOf = (action: AuditAction) => {
      const subject = names.eventSubject(eventCategory(action), action);
      return notifierSubscriptions(names).find((s) => matches(s.filterSubject, subject))!;
    };
    expect(subOf('agent_disabled').durable).not.toBe(subOf('approval_requested').durable);
    const earlier = await start(bus, names);
    await drained(earlier);
    await earlier.stop();
    // The release before did not subscribe to agent_disabled: no durable of it exists yet, and
    // the stream holds such events from before the upgrade that nobody was ever notified of.
    await bus.deleteDurable(subOf('agent_disabled').durable);
    await publish(bus, names, 'agent_disabled');
    const duringUpgrade = await publish(bus, names, 'approval_requested');

    const rec = recording(bus);
    const notifier = await start(rec.bus, names);
    const afterUpgrade = await publish(bus, names, 'agent_disabled');
    await drained(notifier);
    await new Promise((r) => setTimeout(r, 50));
    await notifier.stop();
    expect(rec.delivered.map((m) => m.msgId).sort()).toEqual([duringUpgrade, afterUpgrade].sort());
    await bus.close();
  });

  it('takes over from the single durable of an earlier release where it stopped, and removes it', async () => {
    const names = busNames(`n${randomUUID().slice(0, 8)}`);
    const bus = createInProcessBus({ names });
    const before = [
      await publish(bus, names, 'approval_requested'),
      await publish(bus, names, 'agent_disabled'),
    ];
    const legacySeen: string[] = [];
    const legacy = await bus.consume(
      { durable: names.durable.notifier, filterSubject: names.eventsWildcard },
      async (m) => (legacySeen.push(m.msgId), { type: 'ack' }),
    );
    while (legacySeen.length < 2) await new Promise((r) => setTimeout(r, 5));
    await legacy.stop();
    // Published during the upgrade, while no notifier runs.
    const during = [
      await publish(bus, names, 'approval_approved'),
      await publish(bus, names, 'connection_needs_reauth'),
    ];
    await publish(bus, names, 'execution_completed');

    const rec = recording(bus);
    const notifier = await start(rec.bus, names);
    await drained(notifier);
    await notifier.stop();
    expect(legacySeen.sort()).toEqual([...before].sort());
    expect(rec.delivered.map((m) => m.msgId).sort()).toEqual([...during].sort());
    expect(await bus.durableAckFloor(names.durable.notifier)).toBeNull();

    // A restart resumes each new durable where it stopped: nothing is handed over twice.
    const later = await publish(bus, names, 'permission_requested');
    const again = recording(bus);
    const restarted = await start(again.bus, names);
    await drained(restarted);
    await restarted.stop();
    expect(again.delivered.map((m) => m.msgId)).toEqual([later]);
    await bus.close();
  });
});
