/** Small test helpers: an awaitable inbox, a deferred, and a test-only trace setup. */
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  trace,
  TraceFlags,
  type Context,
  type ContextManager,
  type TextMapPropagator,
} from '@opentelemetry/api';

/** Collects items pushed by handlers; tests await counts or conditions instead of sleeping. */
export class Inbox<T> {
  readonly items: T[] = [];
  private waiters = new Set<() => void>();

  push(item: T): void {
    this.items.push(item);
    for (const w of [...this.waiters]) w();
  }

  async until(pred: (items: T[]) => boolean, what: string, timeoutMs = 5_000): Promise<T[]> {
    if (pred(this.items)) return this.items;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.items)}`));
      }, timeoutMs);
      const check = () => {
        if (!pred(this.items)) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
    });
    return this.items;
  }

  count(n: number, timeoutMs?: number): Promise<T[]> {
    return this.until((xs) => xs.length >= n, `${n} items`, timeoutMs);
  }
}

export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Registers a minimal AsyncLocalStorage context manager and a W3C traceparent propagator, as
 * an OTel SDK would, and returns a function that removes them. Test-only: the SDK packages are
 * not dependencies of @vlt/bus, which only talks to @opentelemetry/api.
 */
export function installTestTracing(): () => void {
  const als = new AsyncLocalStorage<Context>();
  const manager: ContextManager = {
    active: () => als.getStore() ?? ROOT_CONTEXT,
    with: (ctx, fn, thisArg, ...args) => als.run(ctx, () => fn.call(thisArg, ...args)),
    bind: (_ctx, target) => target,
    enable() {
      return this;
    },
    disable() {
      als.disable();
      return this;
    },
  };
  const propagator: TextMapPropagator = {
    inject(ctx, carrier, setter) {
      const sc = trace.getSpanContext(ctx);
      if (sc) setter.set(carrier, 'traceparent', `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags}`);
    },
    extract(ctx, carrier, getter) {
      const raw = getter.get(carrier, 'traceparent');
      const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0([0-9a-f])$/.exec(
        Array.isArray(raw) ? (raw[0] ?? '') : (raw ?? ''),
      );
      if (!m) return ctx;
      return trace.setSpanContext(ctx, {
        traceId: m[1]!,
        spanId: m[2]!,
        traceFlags: Number.parseInt(m[3]!, 16),
        isRemote: true,
      });
    },
    fields: () => ['traceparent'],
  };
  context.setGlobalContextManager(manager);
  propagation.setGlobalPropagator(propagator);
  return () => {
    propagation.disable();
    context.disable();
  };
}

export function withSpanContext<T>(traceId: string, spanId: string, fn: () => T): T {
  const ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId, traceFlags: TraceFlags.SAMPLED });
  return context.with(ctx, fn);
}

export function activeTraceId(): string | undefined {
  return trace.getSpanContext(context.active())?.traceId;
}
