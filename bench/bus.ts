/**
 * Bus throughput on NATS: publish with each PubAck awaited alone, publish with 256 in flight,
 * and consume-with-ack. Then the same on the in-process bus for comparison.
 *   pnpm tsx bench/bus.ts            (NATS_URL or nats://127.0.0.1:4222)
 * Bounded to well under 20 s; uses its own stream prefix and deletes it afterwards.
 */
import { randomBytes } from 'node:crypto';
import {
  busNames,
  createInProcessBus,
  createNatsBus,
  destroyNatsBusState,
  type Bus,
  type BusNames,
} from '@vlt/bus';

const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const SEQUENTIAL_BUDGET_MS = 2_000;
const SEQUENTIAL_MAX = 30_000;
const WINDOWED_BUDGET_MS = 3_000;
const WINDOWED_MAX = 40_000;
const WINDOW = 256;
const CONSUME_BUDGET_MS = 4_000;

/** Shaped like an audit event, about 300 bytes of JSON. */
function event(i: number) {
  return {
    v: 1,
    auditId: `a_${i.toString(36).padStart(10, '0')}`,
    type: 'execution_requested',
    workspaceId: 'ws_0000000000000001',
    agentId: 'ag_0000000000000001',
    connectionId: 'cn_0000000000000001',
    request: { method: 'GET', url: 'https://api.example.com/v1/items?limit=10', fingerprint: 'f'.repeat(64) },
    at: new Date(1_700_000_000_000 + i).toISOString(),
  };
}

const rate = (n: number, ms: number) => Math.round((n * 1000) / ms);

async function run(label: string, bus: Bus, names: BusNames): Promise<Record<string, string>> {
  const subject = names.eventSubject('execution', 'requested');
  let n = 0;

  // 1. One at a time: what a caller that awaits each publish before answering sees.
  let t0 = performance.now();
  let seq = 0;
  while (seq < SEQUENTIAL_MAX && performance.now() - t0 < SEQUENTIAL_BUDGET_MS) {
    await bus.publish(subject, event(n), { msgId: `m${n}` });
    n++;
    seq++;
  }
  const seqMs = performance.now() - t0;

  // 2. 256 publishes in flight: many concurrent requests each awaiting their own publish.
  t0 = performance.now();
  let win = 0;
  const deadline = t0 + WINDOWED_BUDGET_MS;
  await Promise.all(
    Array.from({ length: WINDOW }, async () => {
      while (win < WINDOWED_MAX && performance.now() < deadline) {
        const i = n++;
        win++;
        await bus.publish(subject, event(i), { msgId: `m${i}` });
      }
    }),
  );
  const winMs = performance.now() - t0;

  // 3. Consume everything just published with a durable consumer, acking each message.
  const total = n;
  let got = 0;
  let done!: () => void;
  const all = new Promise<void>((r) => (done = r));
  t0 = performance.now();
  const consumer = await bus.consume(
    { durable: `${names.durable.audit}-bench`, filterSubject: subject },
    async () => {
      if (++got === total) done();
      return { type: 'ack' };
    },
  );
  await Promise.race([all, new Promise((r) => setTimeout(r, CONSUME_BUDGET_MS))]);
  const conMs = performance.now() - t0;
  await consumer.stop();

  return {
    transport: label,
    'publish, awaited one at a time': `${rate(seq, seqMs)} msg/s (${seq} msgs)`,
    [`publish, ${WINDOW} in flight`]: `${rate(win, winMs)} msg/s (${win} msgs)`,
    'consume + ack': `${rate(got, conMs)} msg/s (${got}/${total} msgs${got < total ? ', budget hit' : ''})`,
  };
}

async function main(): Promise<void> {
  const rows: Record<string, string>[] = [];
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  const names = busNames(prefix);
  const nats = await createNatsBus({ servers: natsUrl.split(','), names, name: 'bench-bus' });
  try {
    rows.push(await run(`nats (${natsUrl})`, nats, names));
  } finally {
    await nats.close();
    await destroyNatsBusState({ servers: natsUrl.split(','), names });
  }
  const mem = createInProcessBus({ names });
  try {
    rows.push(await run('in-process', mem, names));
  } finally {
    await mem.close();
  }
  for (const r of rows) {
    console.log(`\n${r.transport}`);
    for (const [k, v] of Object.entries(r)) if (k !== 'transport') console.log(`  ${k.padEnd(32)} ${v}`);
  }
}

await main();
