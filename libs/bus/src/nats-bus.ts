/**
 * The bus on NATS: JetStream for the durable events stream, JetStream KV for snapshots,
 * core NATS request/reply. Targets a 2.9 server (single filter subject, no per-message TTL).
 */
import {
  connect,
  errors as natsErrors,
  headers as natsHeaders,
  nanos,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
} from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type StreamConfig,
} from '@nats-io/jetstream';
import { Kvm, KvWatchInclude, type KV } from '@nats-io/kv';
import {
  BusClosedError,
  BusDisconnectedError,
  BusConflictError,
  BusError,
  BusNoRespondersError,
  BusPublishError,
  BusTimeoutError,
  type Bus,
  type BusLogger,
  type Consumer,
  type ConsumerOptions,
  type HandlerOutcome,
  type Headers,
  type KvBucket,
  type KvEntry,
  type KvWatch,
  type ReplyHandle,
  type RequestOptions,
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
  decodeJson,
  encodeJson,
  errorMessage,
  InFlight,
  noopLogger,
  openReply,
  replyFailed,
  replyOk,
  runInTraceContext,
  settle,
  subjectMatches,
  withTraceContext,
} from './wire.js';
import { withSpans } from './spans.js';

export interface NatsBusOptions {
  servers: string | string[];
  names: BusNames;
  /** Connection name shown by the server (`nats server report connections`). */
  name?: string;
  logger?: BusLogger;
  /** Events stream limits. Defaults: 7 days max age, 2 minute duplicate window. */
  stream?: { maxAgeMs?: number; duplicateWindowMs?: number; maxBytes?: number };
  /** Bound on waiting for a PubAck (default 5 s). */
  publishTimeoutMs?: number;
  /** Default request timeout when the caller gives none (default 5 s). */
  requestTimeoutMs?: number;
  /**
   * Messages a consumer pulls ahead of its handler (default 64). They count against
   * `ackWaitMs` while buffered, so keep prefetch × handler time well under it.
   */
  consumerPrefetch?: number;
  /**
   * How long a stopping consumer keeps handling messages it had already pulled (default 5 s).
   * Whatever is left after that is not acked and is redelivered after `ackWaitMs`.
   */
  consumerStopDrainMs?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const RESERVED_HEADER = /^nats-/i;

export async function createNatsBus(opts: NatsBusOptions): Promise<Bus> {
  const names = opts.names;
  const log = opts.logger ?? noopLogger;
  const publishTimeoutMs = opts.publishTimeoutMs ?? 5_000;
  const requestTimeoutMs = opts.requestTimeoutMs ?? 5_000;
  const prefetch = opts.consumerPrefetch ?? 64;
  const stopDrainMs = opts.consumerStopDrainMs ?? 5_000;

  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: opts.servers,
      name: opts.name,
      // A service keeps trying for ever; callers see failures per operation (and fail closed).
      maxReconnectAttempts: -1,
      reconnectTimeWait: 1_000,
      // The client otherwise builds an Error (a stack capture) for every request and publish
      // in case it fails: 3-4 % of a data plane's CPU (bench/gateway.ts, split profile). Our
      // own errors name the subject and operation that failed.
      noAsyncTraces: true,
    });
  } catch (err) {
    throw new BusError(`cannot connect to NATS at ${String(opts.servers)}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  // Tracked from the client's status events so operations can fail fast while it reconnects.
  let connected = true;
  void watchConnectionStatus(nc, log, (up) => {
    connected = up;
  });

  let js: JetStreamClient;
  let jsm: JetStreamManager;
  try {
    js = jetstream(nc, { timeout: publishTimeoutMs });
    jsm = await jetstreamManager(nc);
    await ensureEventsStream(jsm, names, opts.stream ?? {});
  } catch (err) {
    await nc.close().catch(() => {});
    if (err instanceof BusError) throw err;
    throw new BusError(`cannot set up JetStream: ${errorMessage(err)}`, { cause: err });
  }
  const kvm = new Kvm(js);

  /*
   * Publishes wait for the end of the event loop's turn and leave together (ADR 0082). The
   * client writes what one synchronous run queued in one socket write, but each I/O callback
   * (an agent's request, a provider's answer) ends its own run: at saturation every publish
   * was a write of its own, and those system calls were a data plane's largest single cost in
   * the split bench. Sent from one setImmediate, the publishes of a turn share one write. Order
   * is kept; the wait is what remains of the turn, microseconds when idle.
   */
  const sendQueue: Array<() => void> = [];
  const sentWaiters: Array<() => void> = [];
  const sendQueued = () => {
    for (const send of sendQueue.splice(0)) send();
    // The client writes what these sends queued in a microtask it queued with the first of
    // them, so waiters resumed from a microtask queued now run after that write (ADR 0085).
    const waiters = sentWaiters.splice(0);
    if (waiters.length > 0) queueMicrotask(() => waiters.forEach((resume) => resume()));
  };
  const atEndOfTurn = <T>(send: () => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (sendQueue.push(() => void send().then(resolve, reject)) === 1) setImmediate(sendQueued);
    });

  let closed = false;
  const buckets = new Map<string, Promise<KvBucket>>();
  // Everything close() must stop first, so in-flight work finishes before the connection drains.
  const stoppables = new Set<{ stop(): Promise<void> }>();
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
  const assertOpen = () => {
    if (closed) throw new BusClosedError('bus is closed');
  };
  const assertConnected = (what: string) => {
    if (!connected) throw new BusDisconnectedError(`${what}: NATS is disconnected (reconnecting)`);
  };

  const bus: Bus = {
    async kv(bucket) {
      assertOpen();
      assertBucketName(bucket);
      let p = buckets.get(bucket);
      if (!p) {
        p = kvm
          .create(bucket, { history: 1, storage: StorageType.File })
          .then((kv) => natsKvBucket(bucket, kv, log, track))
          .catch((err: unknown) => {
            buckets.delete(bucket); // let the next call retry
            throw new BusError(`cannot open KV bucket ${bucket}: ${errorMessage(err)}`, { cause: err });
          });
        buckets.set(bucket, p);
      }
      return p;
    },

    async publish(subject, data, { msgId, headers }) {
      assertOpen();
      let payload: Uint8Array;
      let hdrs: MsgHdrs | undefined;
      try {
        assertSubject(subject);
        assertMsgId(msgId);
        payload = encodeJson(data);
        hdrs = toNatsHeaders(withTraceContext(checkHeaders(headers)));
      } catch (err) {
        throw new BusPublishError(`not published: ${errorMessage(err)}`, { cause: err });
      }
      // Without this a publish waits its whole timeout in the client's reconnect buffer.
      assertConnected(`publish to ${subject} not sent`);
      let ack;
      try {
        ack = await atEndOfTurn(() =>
          js.publish(subject, payload, { msgID: msgId, headers: hdrs, timeout: publishTimeoutMs }),
        );
      } catch (err) {
        throw new BusPublishError(`publish to ${subject} not acknowledged: ${errorMessage(err)}`, {
          cause: err,
        });
      }
      if (ack.stream !== names.eventsStream) {
        // Another stream captured the subject: the event would be invisible to our consumers.
        throw new BusPublishError(
          `publish to ${subject} was stored in stream ${ack.stream}, not ${names.eventsStream}`,
        );
      }
    },

    sent() {
      // Nothing queued: whatever was sent is written by a client microtask queued before the
      // caller's continuation, so resuming it in turn is enough.
      return sendQueue.length === 0
        ? Promise.resolve()
        : new Promise<void>((resume) => sentWaiters.push(resume));
    },

    async consume(copts, handler) {
      assertOpen();
      const durable = copts.durable;
      assertDurableName(durable);
      const filter = copts.filterSubject ?? names.eventsWildcard;
      assertFilter(filter);
      if (!subjectMatches(names.eventsWildcard, filter)) {
        throw new BusError(`filter ${filter} is outside the events stream (${names.eventsWildcard})`);
      }
      const maxDeliver = copts.maxDeliver ?? 10;
      const ackWaitMs = copts.ackWaitMs ?? 30_000;
      await ensureDurable(jsm, names.eventsStream, {
        ...copts,
        filterSubject: filter,
        maxDeliver,
        ackWaitMs,
      });
      const consumer = await js.consumers.get(names.eventsStream, durable).catch((err: unknown) => {
        throw wrap(err, `cannot bind consumer ${durable}`);
      });
      return track(
        runConsumer(
          nc,
          consumer,
          {
            durable,
            maxDeliver,
            prefetch,
            drainMs: stopDrainMs,
            concurrency: Math.max(1, Math.min(copts.concurrency ?? 1, prefetch)),
          },
          handler,
          log,
        ),
      );
    },

    async durableAckFloor(durable) {
      assertOpen();
      assertDurableName(durable);
      try {
        const info = await jsm.consumers.info(names.eventsStream, durable);
        return info.ack_floor.stream_seq;
      } catch (err) {
        if (isApiError(err, JetStreamApiCodes.ConsumerNotFound)) return null;
        throw wrap(err, `cannot look up consumer ${durable}`);
      }
    },

    async lastEventSequence() {
      assertOpen();
      try {
        return (await jsm.streams.info(names.eventsStream)).state.last_seq;
      } catch (err) {
        throw wrap(err, `cannot read stream ${names.eventsStream}`);
      }
    },

    async deleteDurable(durable) {
      assertOpen();
      assertDurableName(durable);
      try {
        await jsm.consumers.delete(names.eventsStream, durable);
      } catch (err) {
        if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound))
          throw wrap(err, `cannot delete consumer ${durable}`);
      }
    },

    async request(subject, data, ropts?: RequestOptions) {
      assertOpen();
      assertSubject(subject);
      const timeoutMs = ropts?.timeoutMs ?? requestTimeoutMs;
      const payload = encodeJson(data);
      const hdrs = toNatsHeaders(withTraceContext(checkHeaders(ropts?.headers)));
      assertConnected(`request to ${subject} not sent`);
      let msg: Msg;
      try {
        msg = await nc.request(subject, payload, { timeout: timeoutMs, headers: hdrs });
      } catch (err) {
        throw mapRequestError(err, subject, timeoutMs);
      }
      return openReply(msg.string());
    },

    async reply(subject, handler, ropts) {
      assertOpen();
      assertFilter(subject, 'reply subject');
      const queue = ropts?.queue ?? subject;
      const inFlight = new Set<Promise<void>>();
      const serve = async (msg: Msg) => {
        if (!msg.reply) return; // a plain publish; nobody waits for an answer
        const headers = fromNatsHeaders(msg.headers);
        let answer: string;
        try {
          const data = decodeJson(msg.data);
          answer = replyOk(await runInTraceContext(headers, () => handler(data, headers)));
        } catch (err) {
          answer = replyFailed(err);
        }
        try {
          msg.respond(answer);
        } catch (err) {
          log.warn({ subject, err: errorMessage(err) }, 'bus: could not send reply');
        }
      };
      const sub = nc.subscribe(subject, {
        queue,
        callback: (err, msg) => {
          if (err) {
            log.warn({ subject, err: errorMessage(err) }, 'bus: reply subscription error');
            return;
          }
          const p = serve(msg).finally(() => inFlight.delete(p));
          inFlight.add(p);
        },
      });
      // Make sure the server registered the interest before callers rely on it.
      await nc.flush().catch((err: unknown) => {
        sub.unsubscribe();
        throw wrap(err, `cannot serve ${subject}`);
      });
      const handle: ReplyHandle = {
        async stop() {
          if (!sub.isClosed()) await sub.drain().catch(() => {});
          await Promise.allSettled([...inFlight]);
        },
      };
      return track(handle);
    },

    async broadcast(subject, data) {
      assertOpen();
      assertSubject(subject);
      const payload = encodeJson(data);
      assertConnected(`broadcast to ${subject} not sent`);
      // Core NATS publish: no stream stores it (fan-out only, at most once).
      nc.publish(subject, payload);
    },

    async subscribe(subject, handler) {
      assertOpen();
      assertFilter(subject, 'subscription subject');
      const sub = nc.subscribe(subject, {
        callback: (err, msg) => {
          if (err) return log.warn({ subject, err: errorMessage(err) }, 'bus: subscription error');
          try {
            handler(JSON.parse(msg.string()) as unknown);
          } catch (e) {
            log.warn({ subject, err: errorMessage(e) }, 'bus: broadcast handler failed');
          }
        },
      });
      return track<ReplyHandle>({
        async stop() {
          if (!sub.isClosed()) sub.unsubscribe();
        },
      });
    },

    isConnected() {
      return !closed && connected;
    },

    async close() {
      if (closed) return;
      closed = true;
      await Promise.allSettled([...stoppables].map((s) => s.stop()));
      // drain() flushes acks and replies; bound it in case the server is gone.
      await Promise.race([nc.drain().catch(() => {}), delay(5_000)]);
      if (!nc.isClosed()) await nc.close().catch(() => {});
    },
  };
  return withSpans(bus);
}

// ---------- stream and consumer setup ----------

async function ensureEventsStream(
  jsm: JetStreamManager,
  names: BusNames,
  limits: NonNullable<NatsBusOptions['stream']>,
): Promise<void> {
  const want = {
    name: names.eventsStream,
    subjects: [names.eventsWildcard],
    storage: StorageType.File,
    // Limits retention: several durable consumers (audit, notifier) each read every event.
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(limits.maxAgeMs ?? 7 * DAY_MS),
    max_bytes: limits.maxBytes ?? -1,
    duplicate_window: nanos(limits.duplicateWindowMs ?? 2 * 60_000),
  } satisfies Partial<StreamConfig>;
  let current: StreamConfig | undefined;
  try {
    current = (await jsm.streams.info(want.name)).config;
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
  }
  if (!current) {
    try {
      await jsm.streams.add(want);
      return;
    } catch (err) {
      // Another replica may have created it between our info and add; re-read and reconcile.
      current = (await jsm.streams.info(want.name).catch(() => Promise.reject(err))).config;
    }
  }
  const differs =
    current.subjects?.join(',') !== want.subjects.join(',') ||
    current.max_age !== want.max_age ||
    current.max_bytes !== want.max_bytes ||
    current.duplicate_window !== want.duplicate_window;
  if (differs) {
    const { name: _name, storage: _storage, retention: _retention, ...update } = want;
    await jsm.streams.update(want.name, { ...current, ...update });
  }
}

async function ensureDurable(
  jsm: JetStreamManager,
  stream: string,
  c: Required<Pick<ConsumerOptions, 'durable' | 'filterSubject' | 'maxDeliver' | 'ackWaitMs'>> &
    Pick<ConsumerOptions, 'startSequence'>,
): Promise<void> {
  let info;
  try {
    info = await jsm.consumers.info(stream, c.durable);
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound))
      throw wrap(err, `cannot look up consumer ${c.durable}`);
  }
  if (!info) {
    try {
      await jsm.consumers.add(stream, {
        durable_name: c.durable,
        ack_policy: AckPolicy.Explicit,
        ...(c.startSequence === undefined
          ? { deliver_policy: DeliverPolicy.All }
          : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: c.startSequence }),
        filter_subject: c.filterSubject,
        max_deliver: c.maxDeliver,
        ack_wait: nanos(c.ackWaitMs),
      });
      return;
    } catch (err) {
      // Another replica created it between our look-up and our add, with a start of its own
      // (the server refuses a second add whose configuration differs). Theirs stands: an
      // existing durable keeps its position, so carry on as if it had been there.
      info = await jsm.consumers.info(stream, c.durable).catch(() => undefined);
      if (!info) throw wrap(err, `cannot create consumer ${c.durable}`);
    }
  }
  // A changed filter would silently skip or replay events; make the operator choose a new name.
  if ((info.config.filter_subject ?? '') !== c.filterSubject) {
    throw new BusError(
      `durable ${c.durable} exists with filter ${info.config.filter_subject ?? '(none)'}, not ${c.filterSubject}`,
    );
  }
  if (info.config.max_deliver !== c.maxDeliver || info.config.ack_wait !== nanos(c.ackWaitMs)) {
    try {
      await jsm.consumers.update(stream, c.durable, {
        max_deliver: c.maxDeliver,
        ack_wait: nanos(c.ackWaitMs),
      });
    } catch (err) {
      throw wrap(err, `cannot update consumer ${c.durable}`);
    }
  }
}

// ---------- consuming ----------

type PullConsumer = Awaited<ReturnType<JetStreamClient['consumers']['get']>>;

function runConsumer(
  nc: NatsConnection,
  consumer: PullConsumer,
  cfg: { durable: string; maxDeliver: number; prefetch: number; drainMs: number; concurrency: number },
  handler: (msg: StreamMessage) => Promise<HandlerOutcome>,
  log: BusLogger,
): Consumer {
  let stopping = false;
  let drainDeadline = Infinity;
  let current: ConsumerMessages | undefined;
  let wakeFromPause: (() => void) | undefined;

  const handle = async (m: JsMsg) => {
    const headers = fromNatsHeaders(m.headers);
    const msgId = m.headers?.get('Nats-Msg-Id') ?? '';
    const deliveryCount = m.info.deliveryCount;
    let data: unknown;
    try {
      data = decodeJson(m.data);
    } catch (err) {
      // Can never succeed, so retrying would only delay the rest of the stream.
      log.warn(
        { durable: cfg.durable, subject: m.subject, msgId, err: errorMessage(err) },
        'bus: dropping undecodable event',
      );
      m.term();
      return;
    }
    const msg: StreamMessage = { subject: m.subject, data, headers, msgId, deliveryCount };
    const outcome = await settle(() => runInTraceContext(headers, () => handler(msg)));
    if (outcome.type === 'threw') {
      log.warn(
        { durable: cfg.durable, subject: m.subject, msgId, deliveryCount, err: errorMessage(outcome.error) },
        'bus: event handler failed',
      );
    }
    const d = decideDisposition(outcome, deliveryCount, cfg.maxDeliver);
    if (d.type === 'ack') {
      m.ack();
    } else if (d.type === 'nak') {
      m.nak(d.delayMs);
    } else {
      if (outcome.type !== 'drop') {
        log.warn(
          { durable: cfg.durable, subject: m.subject, msgId, deliveryCount },
          `bus: dropping event: ${d.reason}`,
        );
      }
      // No reason text: a 2.9 server only recognises a bare +TERM.
      m.term();
    }
  };

  const loop = (async () => {
    while (!stopping) {
      try {
        current = await consumer.consume({ max_messages: cfg.prefetch });
        if (stopping) current.stop();
        const running = new InFlight();
        for await (const m of current) {
          // After stop() the pull has ended, but what was already delivered to us is handled
          // (graceful drain). Past the deadline it is left unacked and comes back after ackWait.
          // Not nak'd: a 2.9 server can lose a nak'd redelivery until ackWait when no pull waits.
          if (stopping && Date.now() > drainDeadline) continue;
          running.add(handle(m));
          if (running.size >= cfg.concurrency) await running.oneFinished();
        }
        await running.all();
      } catch (err) {
        if (!stopping)
          log.warn({ durable: cfg.durable, err: errorMessage(err) }, 'bus: consumer interrupted; resuming');
      }
      if (!stopping) await new Promise<void>((r) => ((wakeFromPause = r), setTimeout(r, 1_000).unref()));
    }
  })();

  return {
    async stop() {
      if (!stopping) drainDeadline = Date.now() + cfg.drainMs;
      stopping = true;
      // Pull consumers cannot be cancelled: messages the server already sent but we have not
      // read yet would be dropped by the unsubscribe and wait out ackWait. A ping round trip
      // first brings everything sent so far into our buffer, where the drain handles it.
      if (!nc.isClosed()) await nc.flush().catch(() => {});
      current?.stop();
      wakeFromPause?.();
      await loop;
      // Acks are fire-and-forget; a flush round trip makes sure the server has them before a
      // successor with the same durable name starts pulling.
      if (!nc.isClosed()) await nc.flush().catch(() => {});
    },
    async pending() {
      const info = await consumer.info();
      return info.num_pending + info.num_ack_pending;
    },
  };
}

// ---------- KV ----------

function natsKvBucket(
  name: string,
  kv: KV,
  log: BusLogger,
  track: <T extends { stop(): Promise<void> }>(s: T) => T,
): KvBucket {
  const wrapKv = (what: string) => (err: unknown) => {
    throw err instanceof BusError ? err : wrap(err, `KV ${what} on ${name} failed`);
  };
  return {
    name,
    async put(key, value) {
      assertKvKey(key);
      return kv.put(key, encodeJson(value)).catch(wrapKv('put'));
    },
    async get(key) {
      assertKvKey(key);
      const e = await kv.get(key).catch(wrapKv('get'));
      if (!e || e.operation !== 'PUT') return null;
      return { value: decodeJson(e.value), revision: e.revision };
    },
    async delete(key) {
      assertKvKey(key);
      await kv.delete(key).catch(wrapKv('delete'));
    },
    async compareAndSet(key, value, expectedRevision) {
      assertKvKey(key);
      const data = encodeJson(value);
      try {
        return expectedRevision === 0
          ? await kv.create(key, data)
          : await kv.update(key, data, expectedRevision);
      } catch (err) {
        // The server refuses with "wrong last sequence" (update) or "key exists" (create).
        if (/wrong last sequence|key exists/i.test(String((err as Error)?.message))) {
          throw new BusConflictError(`revision of ${key} moved on`);
        }
        throw wrap(err, `KV compare-and-set on ${name} failed`);
      }
    },
    async keys() {
      const out: string[] = [];
      const it = await kv.keys().catch(wrapKv('keys'));
      for await (const k of it) out.push(k);
      return out;
    },
    async watch(onEntry) {
      const it = await kv.watch({ include: KvWatchInclude.LastValue }).catch(wrapKv('watch'));
      // The client marks the last entry of the initial snapshot with isUpdate; it sends nothing
      // when the bucket was empty, which the status (read after the watch started) tells us.
      let empty: boolean;
      try {
        empty = (await kv.status()).values === 0;
      } catch (err) {
        it.stop();
        throw wrap(err, `KV status of ${name} failed`);
      }
      let inSnapshot = !empty;
      let markReady!: () => void;
      let failReady!: (err: unknown) => void;
      const ready = new Promise<void>((res, rej) => ((markReady = res), (failReady = rej)));
      // A watch stopped before its snapshot must not crash a process that never awaited ready.
      ready.catch(() => {});
      if (!inSnapshot) markReady();
      const deliver = (entry: KvEntry) => {
        try {
          onEntry(entry);
        } catch (err) {
          log.warn({ bucket: name, key: entry.key, err: errorMessage(err) }, 'bus: KV watch callback threw');
        }
      };
      const loop = (async () => {
        for await (const e of it) {
          const deleted = e.operation !== 'PUT';
          // Tombstones of keys deleted before the watch are not part of the current snapshot.
          if (!(inSnapshot && deleted)) {
            let value: unknown = null;
            if (!deleted) {
              try {
                value = decodeJson(e.value);
              } catch (err) {
                log.warn(
                  { bucket: name, key: e.key, err: errorMessage(err) },
                  'bus: skipping undecodable KV value',
                );
                continue;
              }
            }
            deliver({ key: e.key, value, operation: deleted ? 'delete' : 'put', revision: e.revision });
          }
          if (inSnapshot && e.isUpdate) {
            inSnapshot = false;
            markReady();
          }
        }
      })()
        .catch((err: unknown) => log.warn({ bucket: name, err: errorMessage(err) }, 'bus: KV watch ended'))
        .finally(() => failReady(new BusError(`KV watch on ${name} ended before its snapshot was complete`)));
      const watch: KvWatch = {
        ready,
        async stop() {
          it.stop();
          await loop;
        },
      };
      return track(watch);
    },
  };
}

// ---------- helpers ----------

function toNatsHeaders(h: Headers): MsgHdrs | undefined {
  const keys = Object.keys(h);
  if (keys.length === 0) return undefined;
  const mh = natsHeaders();
  for (const k of keys) mh.set(k, h[k]!);
  return mh;
}

/** Caller-visible headers: broker headers (`Nats-*`) are kept out, msgId is exposed separately. */
function fromNatsHeaders(mh: MsgHdrs | undefined): Headers {
  const out: Headers = {};
  if (!mh) return out;
  for (const [k, values] of mh) {
    if (!RESERVED_HEADER.test(k)) out[k] = values[0] ?? '';
  }
  return out;
}

function mapRequestError(err: unknown, subject: string, timeoutMs: number): BusError {
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : undefined;
  if (
    err instanceof natsErrors.NoRespondersError ||
    cause instanceof natsErrors.NoRespondersError ||
    (err instanceof natsErrors.RequestError && err.isNoResponders())
  ) {
    return new BusNoRespondersError(`no responders for ${subject}`, { cause: err });
  }
  if (err instanceof natsErrors.TimeoutError || cause instanceof natsErrors.TimeoutError) {
    return new BusTimeoutError(`request to ${subject} timed out after ${timeoutMs} ms`, { cause: err });
  }
  if (err instanceof natsErrors.ClosedConnectionError || err instanceof natsErrors.DrainingConnectionError) {
    return new BusClosedError(`request to ${subject} failed: connection closed`, { cause: err });
  }
  return new BusError(`request to ${subject} failed: ${errorMessage(err)}`, { cause: err });
}

function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

function wrap(err: unknown, what: string): BusError {
  return new BusError(`${what}: ${errorMessage(err)}`, { cause: err });
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

async function watchConnectionStatus(
  nc: NatsConnection,
  log: BusLogger,
  setConnected: (up: boolean) => void,
): Promise<void> {
  try {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') setConnected(false);
      if (s.type === 'reconnect') setConnected(true);
      switch (s.type) {
        case 'disconnect':
        case 'error':
        case 'slowConsumer':
        case 'staleConnection':
        case 'ldm':
          log.warn({ nats: s }, `bus: NATS ${s.type}`);
          break;
        case 'reconnect':
          log.info({ nats: s }, 'bus: NATS reconnected');
          break;
        default:
          break;
      }
    }
  } catch {
    // The status iterator only ends with the connection.
  }
}

/**
 * Deletes what a bus with these names keeps on the server: the events stream (with its
 * durable consumers) and the KV buckets (default: the buckets in `names`). For test runs,
 * benchmarks and tearing down an environment; never called by services. Returns the
 * streams it deleted.
 */
export async function destroyNatsBusState(opts: {
  servers: string | string[];
  names: BusNames;
  buckets?: string[];
}): Promise<string[]> {
  const nc = await connect({ servers: opts.servers }).catch((err: unknown) => {
    throw new BusError(`cannot connect to NATS at ${String(opts.servers)}: ${errorMessage(err)}`, {
      cause: err,
    });
  });
  try {
    const jsm = await jetstreamManager(nc);
    const buckets = opts.buckets ?? Object.values(opts.names.buckets);
    const deleted: string[] = [];
    for (const stream of [opts.names.eventsStream, ...buckets.map((b) => `KV_${b}`)]) {
      try {
        await jsm.streams.delete(stream);
        deleted.push(stream);
      } catch (err) {
        if (!isApiError(err, JetStreamApiCodes.StreamNotFound))
          throw wrap(err, `cannot delete stream ${stream}`);
      }
    }
    return deleted;
  } finally {
    await nc.close();
  }
}

/**
 * Deletes every stream and KV bucket created under `prefix` or any prefix that starts with it
 * (test runs derive per-suite prefixes from one run prefix). For test teardown and operators
 * removing an environment; never call it with a prefix that live services use.
 */
export async function purgeNatsPrefix(opts: {
  servers: string | string[];
  prefix: string;
}): Promise<string[]> {
  if (!/^[A-Za-z0-9_-]{4,}$/.test(opts.prefix))
    throw new BusError('refusing to purge a short or unusual prefix');
  const events = opts.prefix.toUpperCase().replace(/-/g, '_');
  const nc = await connect({ servers: opts.servers }).catch((err: unknown) => {
    throw new BusError(`cannot connect to NATS at ${String(opts.servers)}: ${errorMessage(err)}`, {
      cause: err,
    });
  });
  try {
    const jsm = await jetstreamManager(nc);
    const doomed: string[] = [];
    for await (const s of jsm.streams.list()) {
      const name = s.config.name;
      if (name.startsWith(`KV_${opts.prefix}`) || (name.startsWith(events) && name.endsWith('_EVENTS')))
        doomed.push(name);
    }
    const deleted: string[] = [];
    for (const name of doomed) {
      try {
        await jsm.streams.delete(name);
        deleted.push(name);
      } catch (err) {
        if (!isApiError(err, JetStreamApiCodes.StreamNotFound))
          throw wrap(err, `cannot delete stream ${name}`);
      }
    }
    return deleted;
  } finally {
    await nc.close();
  }
}
