/**
 * The bus inside one process, for the all-in-one embedded default (no NATS server).
 * Same semantics as the NATS transport: KV with revisions and snapshot-then-live watches,
 * an events stream with msgId de-duplication, durable consumers that resume where they
 * left off, retry with delay and maxDeliver, request/reply with queue groups.
 * Values cross as JSON text, so callers never share object references (as on the wire).
 * Nothing here survives the process: see docs/decisions/*-bus-in-process-durability.md.
 */
import {
  BusClosedError,
  BusConflictError,
  BusError,
  BusNoRespondersError,
  BusPublishError,
  BusTimeoutError,
  type Bus,
  type BusLogger,
  type Consumer,
  type HandlerOutcome,
  type Headers,
  type KvBucket,
  type KvEntry,
  type KvWatch,
  type ReplyHandle,
  type StreamMessage,
} from './bus.js';
import type { BusNames } from './names.js';
import {
  assertBucketName,
  assertDurableName,
  assertFilter,
  assertKvKey,
  assertMsgId,
  assertSubject,
  checkHeaders,
  decideDisposition,
  errorMessage,
  fromJsonText,
  InFlight,
  noopLogger,
  openReply,
  replyFailed,
  replyOk,
  runInTraceContext,
  settle,
  subjectMatches,
  toJsonText,
  withTraceContext,
} from './wire.js';
import { withSpans } from './spans.js';

export interface InProcessBusOptions {
  names: BusNames;
  logger?: BusLogger;
  /**
   * Events stream limits. Memory is the store here, so it is bounded by count as well as age.
   * Defaults: 7 days, 100 000 messages, 2 minute duplicate window. The count limit never
   * evicts an event a durable consumer has not finished: a full stream refuses new events.
   */
  stream?: { maxAgeMs?: number; maxMessages?: number; duplicateWindowMs?: number };
  /** Default request timeout when the caller gives none (default 5 s). */
  requestTimeoutMs?: number;
  /** How long close() lets running consumers work off the backlog first (default 5 s). */
  closeDrainMs?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

export function createInProcessBus(opts: InProcessBusOptions): Bus {
  const names = opts.names;
  const log = opts.logger ?? noopLogger;
  const requestTimeoutMs = opts.requestTimeoutMs ?? 5_000;
  const closeDrainMs = opts.closeDrainMs ?? 5_000;
  const stream = new MemoryStream({
    maxAgeMs: opts.stream?.maxAgeMs ?? 7 * DAY_MS,
    maxMessages: opts.stream?.maxMessages ?? 100_000,
    duplicateWindowMs: opts.stream?.duplicateWindowMs ?? 2 * 60_000,
  });
  const buckets = new Map<string, MemoryBucket>();
  const repliers = new Set<Replier>();
  const subscribers = new Set<{ subject: string; handler: (data: unknown) => void }>();
  const queueTurn = new Map<string, number>();
  const stoppables = new Set<{ stop(): Promise<void> }>();
  let closed = false;

  const assertOpen = () => {
    if (closed) throw new BusClosedError('bus is closed');
  };
  const track = <T extends { stop(): Promise<void> }>(s: T): T => {
    const original = s.stop.bind(s);
    let stopping: Promise<void> | undefined;
    s.stop = () => {
      stopping ??= original().finally(() => stoppables.delete(s));
      return stopping;
    };
    stoppables.add(s);
    return s;
  };

  return withSpans({
    async kv(bucket) {
      assertOpen();
      assertBucketName(bucket);
      let b = buckets.get(bucket);
      if (!b) {
        b = new MemoryBucket(bucket, log, track);
        buckets.set(bucket, b);
      }
      return b;
    },

    async publish(subject, data, { msgId, headers }) {
      assertOpen();
      try {
        assertSubject(subject);
        assertMsgId(msgId);
        // Same failure as NATS: a subject no stream captures cannot be stored.
        if (!subjectMatches(names.eventsWildcard, subject)) {
          throw new BusError(`no stream captures ${subject}`);
        }
        stream.append(subject, toJsonText(data), withTraceContext(checkHeaders(headers)), msgId);
      } catch (err) {
        throw new BusPublishError(`not published: ${errorMessage(err)}`, { cause: err });
      }
    },

    // A publish is stored before it returns: nothing is ever waiting to be sent.
    async sent() {},

    async consume(copts, handler) {
      assertOpen();
      assertDurableName(copts.durable);
      const filter = copts.filterSubject ?? names.eventsWildcard;
      assertFilter(filter);
      if (!subjectMatches(names.eventsWildcard, filter)) {
        throw new BusError(`filter ${filter} is outside the events stream (${names.eventsWildcard})`);
      }
      const durable = stream.durable(copts.durable, filter, copts.maxDeliver ?? 10, copts.startSequence);
      return track(runConsumer(stream, durable, handler, log, Math.max(1, copts.concurrency ?? 1)));
    },

    async durableAckFloor(durable) {
      assertOpen();
      assertDurableName(durable);
      return stream.ackFloorOf(durable);
    },

    async lastEventSequence() {
      assertOpen();
      return stream.lastSequence();
    },

    async deleteDurable(durable) {
      assertOpen();
      assertDurableName(durable);
      stream.deleteDurable(durable);
    },

    async request(subject, data, ropts) {
      assertOpen();
      assertSubject(subject);
      const timeoutMs = ropts?.timeoutMs ?? requestTimeoutMs;
      const payload = toJsonText(data);
      const headers = withTraceContext(checkHeaders(ropts?.headers));
      const chosen = pickRepliers(subject);
      if (chosen.length === 0) throw new BusNoRespondersError(`no responders for ${subject}`);
      const answer = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new BusTimeoutError(`request to ${subject} timed out after ${timeoutMs} ms`)),
          timeoutMs,
        );
        // Like NATS, the first answer wins when several groups (queues) listen on the subject.
        for (const r of chosen) {
          void r.serve(payload, headers).then((text) => {
            clearTimeout(timer);
            resolve(text);
          });
        }
      });
      return openReply(answer);
    },

    async reply(subject, handler, ropts) {
      assertOpen();
      assertFilter(subject, 'reply subject');
      const r = new Replier(subject, ropts?.queue ?? subject, handler);
      repliers.add(r);
      return track<ReplyHandle>({
        async stop() {
          repliers.delete(r);
          await r.idle();
        },
      });
    },

    async broadcast(subject, data) {
      assertOpen();
      assertSubject(subject);
      const text = toJsonText(data);
      for (const sub of subscribers) {
        if (!subjectMatches(sub.subject, subject)) continue;
        // As on NATS: never inside the publisher's call stack, and one failing handler harms no other.
        queueMicrotask(() => {
          try {
            sub.handler(fromJsonText(text));
          } catch (err) {
            log.warn({ subject, err: errorMessage(err) }, 'bus: broadcast handler failed');
          }
        });
      }
    },

    async subscribe(subject, handler) {
      assertOpen();
      assertFilter(subject, 'subscription subject');
      const sub = { subject, handler };
      subscribers.add(sub);
      return track<ReplyHandle>({
        async stop() {
          subscribers.delete(sub);
        },
      });
    },

    isConnected() {
      return !closed;
    },

    async close() {
      if (closed) return;
      closed = true;
      // Memory is the only copy of the stream: give running consumers the chance to finish the
      // backlog, so a graceful shutdown loses nothing (a crash still can; see the ADR).
      const deadline = Date.now() + closeDrainMs;
      while (stream.hasBacklog(Date.now()) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      if (stream.hasBacklog(Date.now()))
        log.warn({}, 'bus: closing with unconsumed in-memory events; they are lost');
      await Promise.allSettled([...stoppables].map((s) => s.stop()));
    },
  });

  /** One member of every queue group listening on the subject, in turn. */
  function pickRepliers(subject: string): Replier[] {
    const groups = new Map<string, Replier[]>();
    for (const r of repliers) {
      if (!subjectMatches(r.subject, subject)) continue;
      const g = groups.get(r.queue);
      if (g) g.push(r);
      else groups.set(r.queue, [r]);
    }
    const chosen: Replier[] = [];
    for (const [queue, members] of groups) {
      const key = `${queue}\u0000${subject}`;
      const turn = queueTurn.get(key) ?? 0;
      queueTurn.set(key, turn + 1);
      chosen.push(members[turn % members.length]!);
    }
    return chosen;
  }
}

// ---------- request/reply ----------

class Replier {
  private readonly inFlight = new Set<Promise<string>>();

  constructor(
    readonly subject: string,
    readonly queue: string,
    private readonly handler: (data: unknown, headers: Headers) => Promise<unknown>,
  ) {}

  /** Always resolves, to the JSON text of a reply envelope (errors included). */
  serve(payload: string, headers: Headers): Promise<string> {
    const p = (async () => {
      // Yield first: a reply handler never runs inside the requester's call stack, as on NATS.
      await Promise.resolve();
      try {
        const data = fromJsonText(payload);
        const h = { ...headers };
        return replyOk(await runInTraceContext(h, () => this.handler(data, h)));
      } catch (err) {
        return replyFailed(err);
      }
    })();
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
    return p;
  }

  async idle(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }
}

// ---------- KV ----------

interface StoredValue {
  json: string;
  revision: number;
}

type Change = { key: string; json: string | null; revision: number };

class MemoryBucket implements KvBucket {
  private readonly entries = new Map<string, StoredValue>();
  private readonly watchers = new Set<MemoryWatcher>();
  // One counter per bucket, like the sequence of the stream behind a NATS bucket.
  private revision = 0;

  constructor(
    readonly name: string,
    private readonly log: BusLogger,
    private readonly track: <T extends { stop(): Promise<void> }>(s: T) => T,
  ) {}

  async put(key: string, value: unknown): Promise<number> {
    assertKvKey(key);
    const json = toJsonText(value);
    const revision = ++this.revision;
    this.entries.set(key, { json, revision });
    this.notify({ key, json, revision });
    return revision;
  }

  async get(key: string): Promise<{ value: unknown; revision: number } | null> {
    assertKvKey(key);
    const e = this.entries.get(key);
    return e ? { value: fromJsonText(e.json), revision: e.revision } : null;
  }

  async compareAndSet(key: string, value: unknown, expectedRevision: number): Promise<number> {
    assertKvKey(key);
    const current = this.entries.get(key)?.revision ?? 0;
    if (current !== expectedRevision) throw new BusConflictError(`revision of ${key} moved on`);
    return this.put(key, value);
  }

  async delete(key: string): Promise<void> {
    assertKvKey(key);
    // NATS writes a delete marker even for an absent key; watchers see it either way.
    const revision = ++this.revision;
    this.entries.delete(key);
    this.notify({ key, json: null, revision });
  }

  async keys(): Promise<string[]> {
    return [...this.entries.keys()];
  }

  async watch(onEntry: (entry: KvEntry) => void): Promise<KvWatch> {
    const snapshot = [...this.entries]
      .map(([key, e]) => ({ key, json: e.json, revision: e.revision }))
      .sort((a, b) => a.revision - b.revision);
    // Snapshot and registration happen in one synchronous step, so no change falls between.
    const w = new MemoryWatcher(this.name, snapshot, onEntry, this.log, () => this.watchers.delete(w));
    this.watchers.add(w);
    return this.track(w);
  }

  private notify(change: Change): void {
    for (const w of this.watchers) w.push(change);
  }
}

class MemoryWatcher implements KvWatch {
  readonly ready: Promise<void>;
  private readonly queue: Array<Change | (() => void)> = [];
  private scheduled = false;
  private stopped = false;

  constructor(
    private readonly bucket: string,
    snapshot: Change[],
    private readonly onEntry: (entry: KvEntry) => void,
    private readonly log: BusLogger,
    private readonly detach: () => void,
  ) {
    let markReady!: () => void;
    this.ready = new Promise<void>((r) => (markReady = r));
    for (const c of snapshot) this.queue.push(c);
    this.queue.push(markReady);
    this.schedule();
  }

  push(change: Change): void {
    if (this.stopped) return;
    this.queue.push(change);
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.detach();
  }

  // Delivery is asynchronous and in order, so a callback that writes to the bucket cannot
  // re-enter delivery and see changes out of order.
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => this.drain());
  }

  private drain(): void {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const item = this.queue.shift()!;
      if (typeof item === 'function') {
        item();
        continue;
      }
      if (this.stopped) continue;
      const entry: KvEntry = {
        key: item.key,
        value: item.json === null ? null : fromJsonText(item.json),
        operation: item.json === null ? 'delete' : 'put',
        revision: item.revision,
      };
      try {
        this.onEntry(entry);
      } catch (err) {
        this.log.warn(
          { bucket: this.bucket, key: item.key, err: errorMessage(err) },
          'bus: KV watch callback threw',
        );
      }
    }
  }
}

// ---------- events stream ----------

interface StoredEvent {
  seq: number;
  subject: string;
  json: string;
  headers: Headers;
  msgId: string;
  storedAt: number;
}

/** Per-durable position, kept by the stream so a re-created consumer resumes from it. */
interface DurableState {
  name: string;
  filter: string;
  maxDeliver: number;
  /** Every sequence up to here is acked, dropped or not for this consumer. */
  ackFloor: number;
  /** Sequences above the floor that are finished. */
  done: Set<number>;
  /** Deliveries so far and earliest redelivery time of messages not yet finished. */
  pending: Map<number, { deliveries: number; notBefore: number }>;
  /** Handed to a running consumer instance and not yet answered. */
  inFlight: Set<number>;
  /** Wakes consumer instances waiting for messages. */
  waiters: Set<() => void>;
}

class MemoryStream {
  private events: StoredEvent[] = [];
  private head = 0; // index of the oldest kept event; compacted lazily
  private lastSeq = 0;
  private readonly recentIds = new Map<string, number>(); // msgId → storedAt, oldest first
  private readonly durables = new Map<string, DurableState>();

  constructor(
    private readonly limits: { maxAgeMs: number; maxMessages: number; duplicateWindowMs: number },
  ) {}

  append(subject: string, json: string, headers: Headers, msgId: string): void {
    const now = Date.now();
    this.expire(now);
    if (this.recentIds.has(msgId)) return; // stored once; the PubAck would say "duplicate"
    // Full of events a durable consumer has not finished: refuse (the publisher fails closed,
    // e.g. 503) rather than drop one — an audit event must never be lost to a count limit.
    if (this.events.length - this.head >= this.limits.maxMessages) {
      throw new Error('the event stream is full: its consumers are behind');
    }
    const seq = ++this.lastSeq;
    this.events.push({ seq, subject, json, headers, msgId, storedAt: now });
    this.recentIds.set(msgId, now);
    for (const d of this.durables.values()) {
      if (subjectMatches(d.filter, subject)) {
        for (const wake of d.waiters) wake();
      } else if (seq > d.ackFloor) {
        // Not for this durable: finished now, as next() would on its next scan, instead of
        // waking its consumers (every one of them, on every event) only to skip it.
        this.finish(d, seq);
      }
    }
  }

  durable(name: string, filter: string, maxDeliver: number, startSequence?: number): DurableState {
    const existing = this.durables.get(name);
    if (existing) {
      // A changed filter would silently skip or replay events; same rule as on NATS.
      if (existing.filter !== filter) {
        throw new BusError(`durable ${name} exists with filter ${existing.filter}, not ${filter}`);
      }
      existing.maxDeliver = maxDeliver;
      return existing;
    }
    const d: DurableState = {
      name,
      filter,
      maxDeliver,
      // Deliver-all: a new durable starts at the oldest event still kept, or at startSequence.
      ackFloor: Math.max(this.firstSeq() - 1, (startSequence ?? 0) - 1),
      done: new Set(),
      pending: new Map(),
      inFlight: new Set(),
      waiters: new Set(),
    };
    this.durables.set(name, d);
    return d;
  }

  /**
   * Whether a running consumer still has work it could do now: an event in flight or one
   * ready for delivery (events waiting out a retry delay do not count).
   */
  hasBacklog(now: number): boolean {
    const first = this.firstSeq();
    for (const d of this.durables.values()) {
      if (d.waiters.size === 0) continue; // nobody consumes it in this process right now
      if (d.inFlight.size > 0) return true;
      for (let seq = Math.max(d.ackFloor + 1, first); seq <= this.lastSeq; seq++) {
        if (d.done.has(seq)) continue;
        if (!subjectMatches(d.filter, this.events[this.head + (seq - first)]!.subject)) continue;
        if ((d.pending.get(seq)?.notBefore ?? 0) <= now) return true;
      }
    }
    return false;
  }

  /** The next event for this durable, or when to look again (undefined: on the next append). */
  next(d: DurableState, now: number): { event: StoredEvent; deliveryCount: number } | { retryAt?: number } {
    this.expire(now);
    const first = this.firstSeq();
    if (d.ackFloor < first - 1) this.raiseFloor(d, first - 1); // events expired unread
    let retryAt: number | undefined;
    for (let seq = d.ackFloor + 1; seq <= this.lastSeq; seq++) {
      if (d.done.has(seq) || d.inFlight.has(seq)) continue;
      const event = this.events[this.head + (seq - first)]!;
      if (!subjectMatches(d.filter, event.subject)) {
        this.finish(d, seq);
        continue;
      }
      const p = d.pending.get(seq);
      if (p && p.notBefore > now) {
        retryAt = Math.min(retryAt ?? Infinity, p.notBefore);
        continue;
      }
      const deliveries = (p?.deliveries ?? 0) + 1;
      d.pending.set(seq, { deliveries, notBefore: 0 });
      d.inFlight.add(seq);
      return { event, deliveryCount: deliveries };
    }
    return retryAt === undefined ? {} : { retryAt };
  }

  /** Events of the durable's filter that it has not finished. */
  pendingCount(d: DurableState): number {
    let n = 0;
    for (let i = this.head; i < this.events.length; i++) {
      const e = this.events[i]!;
      if (e.seq > d.ackFloor && !d.done.has(e.seq) && subjectMatches(d.filter, e.subject)) n++;
    }
    return n;
  }

  lastSequence(): number {
    return this.lastSeq;
  }

  ackFloorOf(name: string): number | null {
    return this.durables.get(name)?.ackFloor ?? null;
  }

  /** Forgets the durable and its position (callers stop its consumers first). */
  deleteDurable(name: string): void {
    this.durables.delete(name);
  }

  finish(d: DurableState, seq: number): void {
    d.inFlight.delete(seq);
    d.pending.delete(seq);
    d.done.add(seq);
    this.raiseFloor(d, d.ackFloor);
  }

  retry(d: DurableState, seq: number, notBefore: number): void {
    d.inFlight.delete(seq);
    const p = d.pending.get(seq);
    if (p) p.notBefore = notBefore;
    for (const wake of d.waiters) wake(); // another instance of the durable may take it later
  }

  private raiseFloor(d: DurableState, to: number): void {
    for (let s = d.ackFloor + 1; s <= to; s++) {
      d.done.delete(s);
      d.pending.delete(s);
    }
    d.ackFloor = Math.max(d.ackFloor, to);
    while (d.done.has(d.ackFloor + 1)) d.done.delete(++d.ackFloor);
  }

  private firstSeq(): number {
    return this.events[this.head]?.seq ?? this.lastSeq + 1;
  }

  private expire(now: number): void {
    const { maxAgeMs, maxMessages, duplicateWindowMs } = this.limits;
    // The count limit only evicts what every durable consumer has finished; age evicts all.
    let floor = Number.POSITIVE_INFINITY;
    for (const d of this.durables.values()) floor = Math.min(floor, d.ackFloor);
    while (this.head < this.events.length) {
      const e = this.events[this.head]!;
      const overCount = this.events.length - this.head > maxMessages - 1 && e.seq <= floor;
      if (overCount || e.storedAt < now - maxAgeMs) this.head++;
      else break;
    }
    if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events = this.events.slice(this.head);
      this.head = 0;
    }
    for (const [id, at] of this.recentIds) {
      if (at >= now - duplicateWindowMs) break;
      this.recentIds.delete(id);
    }
  }
}

function runConsumer(
  stream: MemoryStream,
  d: DurableState,
  handler: (msg: StreamMessage) => Promise<HandlerOutcome>,
  log: BusLogger,
  concurrency = 1,
): Consumer {
  let stopping = false;
  let wake: (() => void) | undefined;
  const waiter = () => wake?.();
  d.waiters.add(waiter);

  let retryTimer: NodeJS.Timeout | undefined;
  const waitForWork = (retryAt: number | undefined) =>
    new Promise<void>((resolve) => {
      // A wait abandoned because a running handler finished first leaves no timer behind.
      clearTimeout(retryTimer);
      retryTimer = retryAt === undefined ? undefined : setTimeout(resolve, Math.max(0, retryAt - Date.now()));
      wake = () => {
        clearTimeout(retryTimer);
        resolve();
      };
    });

  // A handler that finishes wakes the loop like new work does: its slot is free again.
  const running = new InFlight(waiter);
  const loop = (async () => {
    let sinceYield = 0;
    while (!stopping) {
      if (running.size >= concurrency) {
        await running.oneFinished();
        continue;
      }
      const next = stream.next(d, Date.now());
      if (!('event' in next)) {
        await waitForWork(next.retryAt);
        continue;
      }
      running.add(handleOne(next));
      // Handlers that resolve at once would otherwise starve timers and I/O during a backlog.
      if (++sinceYield >= 64) {
        sinceYield = 0;
        await new Promise<void>((r) => setImmediate(r));
      }
    }
    await running.all();
    clearTimeout(retryTimer);
  })();

  async function handleOne(next: { event: StoredEvent; deliveryCount: number }): Promise<void> {
    {
      const { event, deliveryCount } = next;
      const headers = { ...event.headers };
      const msg: StreamMessage = {
        subject: event.subject,
        data: fromJsonText(event.json),
        headers,
        msgId: event.msgId,
        deliveryCount,
      };
      const outcome = await settle(() => runInTraceContext(headers, () => handler(msg)));
      if (outcome.type === 'threw') {
        log.warn(
          {
            durable: d.name,
            subject: event.subject,
            msgId: event.msgId,
            deliveryCount,
            err: errorMessage(outcome.error),
          },
          'bus: event handler failed',
        );
      }
      const disp = decideDisposition(outcome, deliveryCount, d.maxDeliver);
      if (disp.type === 'nak') {
        stream.retry(d, event.seq, Date.now() + disp.delayMs);
      } else {
        if (disp.type === 'term' && outcome.type !== 'drop') {
          log.warn(
            { durable: d.name, subject: event.subject, msgId: event.msgId, deliveryCount },
            `bus: dropping event: ${disp.reason}`,
          );
        }
        stream.finish(d, event.seq);
      }
    }
  }

  return {
    async stop() {
      stopping = true;
      wake?.();
      await loop;
      d.waiters.delete(waiter);
    },
    pending: async () => stream.pendingCount(d),
  };
}
