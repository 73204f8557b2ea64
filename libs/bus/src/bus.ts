/**
 * The one messaging interface every service uses. Two transports implement it:
 * NATS (JetStream + KV, for split deployments) and in-process (the embedded default).
 * Values are JSON; callers validate them with the zod contracts at the edges.
 */

export type Headers = Record<string, string>;

export interface KvEntry {
  key: string;
  /** null when the entry was deleted or purged. */
  value: unknown | null;
  operation: 'put' | 'delete';
  revision: number;
}

export interface KvWatch {
  /** Resolves once the initial snapshot (every current key) has been delivered. */
  readonly ready: Promise<void>;
  stop(): Promise<void>;
}

export interface KvBucket {
  readonly name: string;
  put(key: string, value: unknown): Promise<number>;
  get(key: string): Promise<{ value: unknown; revision: number } | null>;
  delete(key: string): Promise<void>;
  /**
   * Optimistic concurrency: writes only when the key's current revision is
   * `expectedRevision` (0: the key must not exist); otherwise throws BusConflictError.
   * Returns the new revision. The building block for counters shared by replicas.
   */
  compareAndSet(key: string, value: unknown, expectedRevision: number): Promise<number>;
  keys(): Promise<string[]>;
  /**
   * Delivers the current value of every key first, then every later change, in order.
   * Used by data-plane caches: full snapshot at start, live updates after.
   */
  watch(onEntry: (entry: KvEntry) => void): Promise<KvWatch>;
}

export interface StreamMessage {
  subject: string;
  data: unknown;
  headers: Headers;
  /** The producer's message id (broker-side de-duplication key). */
  msgId: string;
  /** 1 on first delivery. */
  deliveryCount: number;
}

export type HandlerOutcome =
  { type: 'ack' } | { type: 'retry'; delayMs: number } | { type: 'drop'; reason: string };

export interface ConsumerOptions {
  /** Durable consumer name; survives restarts and resumes where it left off. */
  durable: string;
  /** Subject filter inside the events stream (default: every event). */
  filterSubject?: string;
  /**
   * Deliveries (the first one included) before a message that keeps failing is dropped and
   * logged (default 10). Same meaning as JetStream's `max_deliver`.
   */
  maxDeliver?: number;
  /** How long a delivered message may stay unacked before redelivery (default 30 s). */
  ackWaitMs?: number;
  /**
   * Handlers running at once (default 1: one after another, in stream order). Above 1, order
   * is not kept; a handler may then batch work across the messages in flight (the audit
   * writer inserts them in one statement). Each message is still acked on its own outcome.
   */
  concurrency?: number;
  /**
   * Where a durable created by this call starts: the stream sequence of its first event
   * (default: the oldest event kept). Ignored when the durable exists already. With
   * `durableAckFloor`, lets new durables take over from one they replace (ADR 0065).
   */
  startSequence?: number;
}

export interface Consumer {
  stop(): Promise<void>;
  /** Events of its filter not yet acknowledged (waiting or in flight): the consumer's lag. */
  pending(): Promise<number>;
}

export interface ReplyHandle {
  stop(): Promise<void>;
}

export interface RequestOptions {
  timeoutMs?: number;
  headers?: Headers;
}

export interface Bus {
  kv(bucket: string): Promise<KvBucket>;
  /**
   * Publishes to the durable events stream and resolves only after the broker has stored it.
   * Rejects when it cannot be stored (callers fail closed). Same msgId twice is stored once.
   */
  publish(subject: string, data: unknown, opts: { msgId: string; headers?: Headers }): Promise<void>;
  /**
   * Resolves once every publish made so far has been handed to the connection (written, not yet
   * acknowledged): publishes leave at the end of the event loop's turn (ADR 0082), and an
   * answer that must not leave before an event does waits for this (ADR 0085).
   */
  sent(): Promise<void>;
  consume(opts: ConsumerOptions, handler: (msg: StreamMessage) => Promise<HandlerOutcome>): Promise<Consumer>;
  /**
   * The stream sequence up to which a durable has finished every event of its filter, or null
   * when no such durable exists. Events after it may have been handled too (out of order).
   */
  durableAckFloor(durable: string): Promise<number | null>;
  /**
   * The stream sequence of the newest event stored (0 when none ever was). A durable created
   * with `startSequence` one above it takes only events published from now on.
   */
  lastEventSequence(): Promise<number>;
  /**
   * Removes a durable consumer and its position (stop its consumers first); nothing happens
   * when it does not exist.
   */
  deleteDurable(durable: string): Promise<void>;
  /** Request/reply; rejects with BusTimeoutError or BusNoRespondersError. */
  request(subject: string, data: unknown, opts?: RequestOptions): Promise<unknown>;
  /**
   * Serves requests on a subject; replicas share the load through a queue group
   * (default queue: the subject itself, so every replica of a service shares one group).
   */
  reply(
    subject: string,
    handler: (data: unknown, headers: Headers) => Promise<unknown>,
    opts?: { queue?: string },
  ): Promise<ReplyHandle>;
  /**
   * Fan-out without durability: every current subscriber gets the message, at most once, and a
   * subscriber that is not there misses it. For live views (SSE) whose record is elsewhere.
   */
  broadcast(subject: string, data: unknown): Promise<void>;
  /** Receives broadcasts on a subject (wildcards allowed); handler errors are logged, not retried. */
  subscribe(subject: string, handler: (data: unknown) => void): Promise<ReplyHandle>;
  /**
   * False while the transport has lost its broker and is reconnecting. Publishes and requests
   * then fail at once with BusDisconnectedError instead of waiting out their timeouts, and
   * services report themselves not ready.
   */
  isConnected(): boolean;
  close(): Promise<void>;
}

/** Structured logger the transports report to (pino-compatible); optional everywhere. */
export interface BusLogger {
  warn(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
}

/** Every bus failure; `code` is stable so services can map it in their error registry. */
export class BusError extends Error {
  override name = 'BusError';
  readonly code: string = 'BUS_ERROR';
}
export class BusTimeoutError extends BusError {
  override name = 'BusTimeoutError';
  override readonly code: string = 'BUS_TIMEOUT';
}
export class BusNoRespondersError extends BusError {
  override name = 'BusNoRespondersError';
  override readonly code: string = 'BUS_NO_RESPONDERS';
}
export class BusPublishError extends BusError {
  override name = 'BusPublishError';
  override readonly code: string = 'BUS_PUBLISH_FAILED';
}
/** The bus was closed; nothing more can be sent or served through it. */
export class BusClosedError extends BusError {
  override name = 'BusClosedError';
  override readonly code: string = 'BUS_CLOSED';
}
/** The broker connection is down (reconnecting): nothing was sent. */
export class BusDisconnectedError extends BusError {
  override name = 'BusDisconnectedError';
  override readonly code: string = 'BUS_DISCONNECTED';
}
/** A compare-and-set lost against another writer: read again and retry. */
export class BusConflictError extends BusError {
  override name = 'BusConflictError';
  override readonly code: string = 'BUS_CONFLICT';
}

/**
 * The remote reply handler threw. Carries the handler's message and its string `code` (if it
 * had one) so callers can branch on it; never the remote stack.
 */
export class BusReplyError extends BusError {
  override name = 'BusReplyError';
  override readonly code: string = 'BUS_REMOTE_ERROR';
  constructor(
    message: string,
    readonly remoteCode?: string,
  ) {
    super(message);
  }
}
