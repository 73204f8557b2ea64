/**
 * Notification latency: `pnpm tsx bench/notifications.ts` (needs NATS and PostgreSQL; bounded
 * to 90 s). The gateway (control plane with its SSE streams, and the notifier) runs in this
 * process over the real broker and a throw-away database. 200 SSE clients stay connected (20
 * members, each in a workspace of their own, 10 streams each, the per-user maximum). The bench
 * then publishes 1,000 `approval_requested` events to JetStream at a steady rate, round-robin
 * over the workspaces, and measures, per event, the time from the broker's publish ack to the
 * moment each of its member's 10 streams received the notification (rows written, broadcast,
 * fanned out). 200 warm-up events go first and are reported apart. Baseline, measured in the same run: a JetStream publish → durable consumer
 * round trip on the same broker. Target: p99 ≤ 250 ms. Prints; never fails on numbers.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { busNames, createNatsBus, destroyNatsBusState } from '@vlt/bus';
import * as api from '@vlt/test-support/api-client.js';
import { benchDatabase, installWatchdog, reachable, startBenchGateway } from './support.js';

const HARD_LIMIT_MS = 90_000;
const MEMBERS = Number(process.env.BENCH_MEMBERS ?? 20);
const STREAMS_PER_MEMBER = Number(process.env.BENCH_STREAMS_PER_MEMBER ?? 10);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000);
/** Published first at the same rate and reported apart: the first second warms JIT, pools and caches. */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 200);
const RATE_PER_S = Number(process.env.BENCH_RATE ?? 100);
const TARGET_P99_MS = 250;

let cleanup: () => Promise<void> = async () => {};
installWatchdog('notifications', HARD_LIMIT_MS, () => cleanup);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : NaN;
};

/** One SSE stream; calls `onNotification(approvalId)` per notification event. */
async function openStream(url: string, onNotification: (approvalId: string) => void): Promise<() => void> {
  const controller = new AbortController();
  const res = await fetch(url, { signal: controller.signal });
  if (res.status !== 200 || !res.body) throw new Error(`stream answered ${res.status}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let connected!: () => void;
  const ready = new Promise<void>((r) => (connected = r));
  void (async () => {
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) !== -1) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          if (block.startsWith('event: connected')) connected();
          else if (block.startsWith('event: notification')) {
            const data = JSON.parse(block.slice(block.indexOf('data: ') + 6)) as {
              metadata?: { approvalRequestId?: string };
            };
            if (data.metadata?.approvalRequestId) onNotification(data.metadata.approvalRequestId);
          }
        }
      }
    } catch {
      // aborted at the end
    }
  })();
  await ready;
  return () => controller.abort();
}

async function main(): Promise<void> {
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  const nats = new URL(natsUrl.replace(/^nats:/, 'http:'));
  const db = await benchDatabase('notify');
  if (!db || !(await reachable(nats.hostname, Number(nats.port || 4222)))) {
    console.log('notifications bench skipped: it needs PostgreSQL and NATS JetStream');
    await db?.drop();
    return;
  }
  const prefix = `bn${randomBytes(3).toString('hex')}`;
  const names = busNames(prefix);
  const gw = await startBenchGateway('notify', {
    DATABASE_URL: db.url,
    NATS_URL: natsUrl,
    VLT_NATS_PREFIX: prefix,
  });
  const bus = await createNatsBus({ servers: [natsUrl], names, name: 'bench-publisher' });
  const closers: (() => void)[] = [];
  cleanup = async () => {
    closers.forEach((c) => c());
    await bus.close().catch(() => undefined);
    await gw.close().catch(() => undefined);
    await destroyNatsBusState({ servers: [natsUrl], names }).catch(() => undefined);
    await db.drop().catch(() => undefined);
  };

  // Baseline: the broker's own publish → durable consumer round trip.
  const baseline: number[] = [];
  {
    const sentAt = new Map<string, number>();
    const consumer = await bus.consume(
      { durable: `${prefix}-baseline`, filterSubject: names.eventSubject('bench', '*') },
      async (m) => {
        const t = sentAt.get(m.msgId);
        if (t !== undefined) baseline.push(performance.now() - t);
        return { type: 'ack' };
      },
    );
    for (let i = 0; i < 200; i++) {
      const id = `b-${i}-${randomUUID()}`;
      sentAt.set(id, performance.now());
      await bus.publish(names.eventSubject('bench', 'ping'), { i }, { msgId: id });
      await new Promise((r) => setTimeout(r, 5));
    }
    const deadline = Date.now() + 5_000;
    while (baseline.length < 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await consumer.stop();
  }

  // Members, each with a workspace of their own and 10 open streams.
  const members: { workspaceId: string }[] = [];
  const pending = new Map<string, { at: number; left: number; first?: number; all?: number }>();
  for (let m = 0; m < MEMBERS; m++) {
    const ip = { 'x-forwarded-for': `10.9.${m >> 8}.${m & 255}` };
    const { user } = await api.signUp(
      gw.base,
      `bench-notify-${m}-${randomBytes(3).toString('hex')}@bench.test`,
      `pw-${randomBytes(8).toString('hex')}`,
      'Reviewer',
      ip,
    );
    const jwt = (await api.apiJwt(gw.base, user.session)).token;
    members.push({ workspaceId: user.workspaceId });
    for (let s = 0; s < STREAMS_PER_MEMBER; s++) {
      closers.push(
        await openStream(
          `${gw.base}/v1/notifications/stream?access_token=${encodeURIComponent(jwt)}`,
          (id) => {
            const p = pending.get(id);
            if (!p) return;
            const now = performance.now();
            p.first ??= now - p.at;
            if (--p.left === 0) p.all = now - p.at;
          },
        ),
      );
    }
  }
  const streams = MEMBERS * STREAMS_PER_MEMBER;

  // The events, at a steady rate.
  const gapMs = 1000 / RATE_PER_S;
  const t0 = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < WARMUP + EVENTS; i++) {
    const due = t0 + i * gapMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const member = members[i % members.length]!;
    const approvalId = randomUUID();
    const auditId = randomUUID();
    ids.push(approvalId);
    const event = {
      v: 1,
      auditId,
      action: 'approval_requested',
      timestamp: new Date().toISOString(),
      actor: `agent:${randomUUID()}`,
      workspaceId: member.workspaceId,
      agentId: randomUUID(),
      connectionId: randomUUID(),
      decision: 'info',
      metadata: {
        approvalRequestId: approvalId,
        method: 'POST',
        url: 'https://tracker.example/rest/api/3/issue',
        agentName: 'bench-agent',
        connectionLabel: 'Tracker',
      },
    };
    // Timed from the broker's ack: the moment the event exists.
    void bus.publish(names.eventSubject('approval', 'requested'), event, { msgId: auditId }).then(() => {
      pending.set(approvalId, { at: performance.now(), left: STREAMS_PER_MEMBER });
    });
  }
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && ids.some((id) => pending.get(id)?.all === undefined)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  const warm = ids.slice(0, WARMUP);
  const measured = ids.slice(WARMUP);
  const seen = (xs: string[], k: 'first' | 'all') =>
    xs.flatMap((id) => (pending.get(id)?.[k] !== undefined ? [pending.get(id)![k]!] : []));
  const first = seen(measured, 'first');
  const all = seen(measured, 'all');
  const coldAll = seen(warm, 'all');
  const missing = ids.length - all.length - coldAll.length;
  if (process.env.BENCH_DEBUG) {
    const slow = ids.map((id, i) => [i, pending.get(id)?.all ?? -1] as const).filter(([, v]) => v > 100);
    console.log('slow events (index, ms):', JSON.stringify(slow.map(([i, v]) => [i, Math.round(v)])));
  }

  const f = (n: number) => n.toFixed(1).padStart(8);
  console.log(
    `\n${EVENTS} approval_requested events at ${RATE_PER_S}/s, ${streams} SSE clients (${MEMBERS} members × ${STREAMS_PER_MEMBER})`,
  );
  console.log('                                         p50 ms   p99 ms   × baseline p99');
  console.log(`baseline: JetStream publish → consumer ${f(pct(baseline, 50))} ${f(pct(baseline, 99))}`);
  console.log(
    `publish ack → first stream of the member ${f(pct(first, 50))} ${f(pct(first, 99))} ${(pct(first, 99) / pct(baseline, 99)).toFixed(1).padStart(10)}×`,
  );
  console.log(
    `publish ack → all 10 streams of the member ${f(pct(all, 50))} ${f(pct(all, 99))} ${(pct(all, 99) / pct(baseline, 99)).toFixed(1).padStart(8)}×`,
  );
  console.log(
    `warm-up (first ${WARMUP} events, not in the rows above): p50 ${pct(coldAll, 50).toFixed(1)} ms, p99 ${pct(coldAll, 99).toFixed(1)} ms`,
  );
  console.log(
    `target p99 ≤ ${TARGET_P99_MS} ms: ${pct(all, 99) <= TARGET_P99_MS ? 'met' : 'NOT met'}; events never seen on every stream: ${missing}`,
  );
}

main()
  .then(() => cleanup())
  .then(() => process.exit(0))
  .catch(async (err: unknown) => {
    console.error(err);
    await cleanup();
    process.exit(1);
  });
