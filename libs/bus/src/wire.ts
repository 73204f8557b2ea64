/**
 * Rules both transports share, so the in-process bus accepts exactly what NATS accepts and
 * encodes values the same way. Internal to @vlt/bus (not exported from index.ts).
 */
import { context, propagation, ROOT_CONTEXT } from '@opentelemetry/api';
import { BusError, BusReplyError, type Headers, type HandlerOutcome } from './bus.js';

// ---------- JSON values ----------

/** JSON text of a value; `undefined` becomes null because the wire cannot carry it. */
export function toJsonText(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value ?? null);
  } catch (err) {
    throw new BusError(`value is not JSON-serializable: ${errorMessage(err)}`, { cause: err });
  }
  // Functions and symbols stringify to undefined.
  if (text === undefined) throw new BusError('value is not JSON-serializable');
  return text;
}

export function fromJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new BusError(`payload is not valid JSON: ${errorMessage(err)}`, { cause: err });
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(toJsonText(value));
}

export function decodeJson(bytes: Uint8Array): unknown {
  return fromJsonText(decoder.decode(bytes));
}

// ---------- names ----------

const SUBJECT_TOKEN = /^[^\s.*>]+$/;

/** A concrete subject (no wildcards): what publish, request and reply subjects must be. */
export function assertSubject(subject: string, what = 'subject'): void {
  if (typeof subject !== 'string' || !subject.split('.').every((t) => SUBJECT_TOKEN.test(t))) {
    throw new BusError(`invalid ${what}: ${JSON.stringify(subject)}`);
  }
}

/** A subject filter: tokens, `*` for one token, `>` only as the last token. */
export function assertFilter(filter: string, what = 'subject filter'): void {
  const tokens = typeof filter === 'string' ? filter.split('.') : [''];
  const ok = tokens.every(
    (t, i) => SUBJECT_TOKEN.test(t) || t === '*' || (t === '>' && i === tokens.length - 1),
  );
  if (!ok) throw new BusError(`invalid ${what}: ${JSON.stringify(filter)}`);
}

/**
 * NATS subject matching; `subject` may itself hold wildcards, which then match literally.
 * Walks both strings token by token without splitting them: the in-process bus matches every
 * durable's filter against every event it stores.
 */
export function subjectMatches(filter: string, subject: string): boolean {
  let f = 0; // start of the filter's current token
  let s = 0; // start of the subject's token at the same index; past the end: it has none
  for (;;) {
    let fEnd = filter.indexOf('.', f);
    if (fEnd === -1) fEnd = filter.length;
    const fLen = fEnd - f;
    if (fLen === 1 && filter.charCodeAt(f) === GT) return s <= subject.length;
    if (s > subject.length) return false;
    let sEnd = subject.indexOf('.', s);
    if (sEnd === -1) sEnd = subject.length;
    if (!(fLen === 1 && filter.charCodeAt(f) === STAR)) {
      if (sEnd - s !== fLen) return false;
      for (let i = 0; i < fLen; i++) if (filter.charCodeAt(f + i) !== subject.charCodeAt(s + i)) return false;
    }
    if (fEnd === filter.length) return sEnd === subject.length;
    f = fEnd + 1;
    s = sEnd + 1;
  }
}

const GT = 0x3e; // '>'
const STAR = 0x2a; // '*'

// Same rules as the NATS KV client, checked up front so both transports fail alike.
const KV_KEY = /^[-/=.\w]+$/;
const KV_BUCKET = /^[-\w]+$/;
// JetStream durable names become subject tokens: no dots, wildcards or whitespace.
const DURABLE = /^[^\s.*>]+$/;

export function assertKvKey(key: string): void {
  if (typeof key !== 'string' || !KV_KEY.test(key) || key.startsWith('.') || key.endsWith('.')) {
    throw new BusError(`invalid KV key: ${JSON.stringify(key)}`);
  }
}

export function assertBucketName(bucket: string): void {
  if (typeof bucket !== 'string' || !KV_BUCKET.test(bucket)) {
    throw new BusError(`invalid KV bucket name: ${JSON.stringify(bucket)}`);
  }
}

export function assertDurableName(durable: string): void {
  if (typeof durable !== 'string' || !DURABLE.test(durable)) {
    throw new BusError(`invalid durable consumer name: ${JSON.stringify(durable)}`);
  }
}

// ---------- headers ----------

const HEADER_KEY = /^[!-9;-~]+$/; // printable ASCII without ':' (NATS/HTTP header grammar)

/**
 * Validates caller headers and returns a copy. `Nats-*` keys are refused: they are broker
 * control headers (msg id, expected stream/sequence) and must only come from the bus itself.
 */
export function checkHeaders(headers: Headers | undefined): Headers {
  const out: Headers = {};
  if (!headers) return out;
  for (const [k, v] of Object.entries(headers)) {
    if (!HEADER_KEY.test(k)) throw new BusError(`invalid header name: ${JSON.stringify(k)}`);
    if (/^nats-/i.test(k)) throw new BusError(`header ${k} is reserved for the broker`);
    if (typeof v !== 'string' || /[\r\n]/.test(v)) {
      throw new BusError(`invalid value for header ${k}`);
    }
    out[k] = v;
  }
  return out;
}

export function assertMsgId(msgId: unknown): asserts msgId is string {
  if (typeof msgId !== 'string' || msgId.length === 0 || /[\r\n]/.test(msgId)) {
    throw new BusError('publish needs a non-empty msgId (the de-duplication key)');
  }
}

// ---------- trace context ----------

/** Adds the active trace context (W3C `traceparent`, ...) to a copy of `headers`. */
export function withTraceContext(headers: Headers): Headers {
  const carrier: Headers = { ...headers };
  propagation.inject(context.active(), carrier);
  return carrier;
}

/**
 * Runs `fn` inside the trace context carried by `headers`. Keys are matched case-insensitively
 * because intermediaries may canonicalise header case. With no propagator registered this
 * is a plain call.
 */
export function runInTraceContext<T>(headers: Headers, fn: () => T): T {
  const carrier: Headers = {};
  for (const [k, v] of Object.entries(headers)) carrier[k.toLowerCase()] = v;
  return context.with(propagation.extract(ROOT_CONTEXT, carrier), fn);
}

// ---------- reply envelope ----------

type ReplyEnvelope = { ok: true; data: unknown } | { ok: false; error: { message: string; code?: string } };

/** JSON text of a successful reply, or of an error reply when the result cannot be encoded. */
export function replyOk(result: unknown): string {
  try {
    return toJsonText({ ok: true, data: result ?? null } satisfies ReplyEnvelope);
  } catch (err) {
    return replyFailed(err);
  }
}

/** Error reply: the message and a string `code` only, never the stack. */
export function replyFailed(err: unknown): string {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  const error =
    typeof code === 'string' ? { message: errorMessage(err), code } : { message: errorMessage(err) };
  return JSON.stringify({ ok: false, error } satisfies ReplyEnvelope);
}

/** Unwraps a reply: the data, or a rejected BusReplyError for an error reply. */
export function openReply(text: string): unknown {
  const env = fromJsonText(text) as Partial<{
    ok: unknown;
    data: unknown;
    error: { message?: unknown; code?: unknown };
  }> | null;
  if (env && env.ok === true) return env.data ?? null;
  if (env && env.ok === false && env.error && typeof env.error.message === 'string') {
    throw new BusReplyError(
      env.error.message,
      typeof env.error.code === 'string' ? env.error.code : undefined,
    );
  }
  throw new BusError('malformed reply (not a bus reply envelope)');
}

// ---------- consumer outcomes ----------

/** Delay before redelivering a message whose handler threw: 200 ms doubling up to 30 s. */
export function retryBackoffMs(deliveryCount: number): number {
  return Math.min(200 * 2 ** Math.max(0, deliveryCount - 1), 30_000);
}

export type Settled = HandlerOutcome | { type: 'threw'; error: unknown };

/** Runs a stream handler; a throw or an answer that is not an outcome becomes `threw`. */
export async function settle(run: () => Promise<HandlerOutcome>): Promise<Settled> {
  let outcome: unknown;
  try {
    outcome = await run();
  } catch (error) {
    return { type: 'threw', error };
  }
  const type = (outcome as { type?: unknown } | null)?.type;
  if (type === 'ack' || type === 'retry' || type === 'drop') return outcome as HandlerOutcome;
  return { type: 'threw', error: new Error('handler returned no outcome (ack, retry or drop)') };
}

/** What to do with a delivered message, given the handler's answer (or its throw). */
export type Disposition =
  { type: 'ack' } | { type: 'term'; reason: string } | { type: 'nak'; delayMs: number };

export function decideDisposition(outcome: Settled, deliveryCount: number, maxDeliver: number): Disposition {
  let delayMs: number;
  switch (outcome.type) {
    case 'ack':
      return { type: 'ack' };
    case 'drop':
      return { type: 'term', reason: String(outcome.reason) };
    case 'retry':
      delayMs = Number.isFinite(outcome.delayMs)
        ? Math.max(0, outcome.delayMs)
        : retryBackoffMs(deliveryCount);
      break;
    case 'threw':
      delayMs = retryBackoffMs(deliveryCount);
      break;
  }
  // Terminate explicitly at the limit, so both transports drop (and log) at the same point.
  if (deliveryCount >= maxDeliver)
    return { type: 'term', reason: `gave up after ${deliveryCount} deliveries` };
  return { type: 'nak', delayMs };
}

// ---------- consumer loops ----------

/**
 * Handlers of one consumer that are running, and a wait for one of them to finish. A consumer
 * loop waits whenever it has as many running as it may: `Promise.race` over the set did the
 * same, but attached a reaction to every running handler each time, so a loop kept full (the
 * audit writer holds up to 64 for one insert) paid for all of them on every message.
 * A handler that rejects frees its slot too; the rejection surfaces from the next wait.
 */
export class InFlight {
  private running = 0;
  private waiting: Array<() => void> = [];
  private spare: Array<() => void> = [];
  private failure: { error: unknown } | undefined;

  /** `onSettled` runs after each handler finishes (the loop's own wake-up, say). */
  constructor(private readonly onSettled?: () => void) {}

  get size(): number {
    return this.running;
  }

  add(handler: Promise<void>): void {
    this.running++;
    handler.then(this.settled, this.failed);
  }

  /** Resolves once a handler finishes (at once when none is running). One promise per wait. */
  oneFinished(): Promise<void> {
    if (this.running === 0) return this.failure ? Promise.reject(this.takeFailure()) : Promise.resolve();
    return new Promise<void>((resolve, reject) =>
      this.waiting.push(() => (this.failure ? reject(this.takeFailure()) : resolve())),
    );
  }

  /** Resolves once every running handler has finished. */
  async all(): Promise<void> {
    while (this.running > 0) await new Promise<void>((r) => this.waiting.push(r));
    if (this.failure) throw this.takeFailure();
  }

  // Shared by every handler: no closure per message.
  private readonly settled = (): void => {
    this.running--;
    if (this.waiting.length > 0) {
      // Swapped, not reallocated: a waiter woken here may wait again at once.
      const waiting = this.waiting;
      this.waiting = this.spare;
      this.spare = waiting;
      for (const wake of waiting) wake();
      waiting.length = 0;
    }
    this.onSettled?.();
  };

  private readonly failed = (error: unknown): void => {
    this.failure ??= { error };
    this.settled();
  };

  private takeFailure(): unknown {
    const error = this.failure?.error;
    this.failure = undefined;
    return error;
  }
}

// ---------- misc ----------

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return typeof err === 'string' ? err : 'unknown error';
}

export const noopLogger = { warn() {}, info() {} };
