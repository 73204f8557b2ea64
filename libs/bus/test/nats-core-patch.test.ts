/**
 * The patch of @nats-io/nats-core (patches/, ADR 0091): a request that has its answer no longer
 * builds a "cancelled" RequestError, with its stack, that nobody can see. Every JetStream publish
 * and KV operation is such a request. Checked on the copy the bus loads, resolved the way
 * @nats-io/transport-node resolves it, so a dependency update that drops the patch fails here.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

const fromBus = createRequire(import.meta.url);
const fromTransport = createRequire(fromBus.resolve('@nats-io/transport-node'));
const coreLib = path.dirname(fromTransport.resolve('@nats-io/nats-core'));

interface RequestOne {
  deferred: Promise<unknown>;
  resolver(err: Error | null, msg: unknown): void;
  cancel(err?: Error): void;
}
type RequestOneClass = new (
  mux: unknown,
  subject: string,
  opts: { timeout: number },
  asyncTraces: boolean,
) => RequestOne;

const { RequestOne } = fromTransport(path.join(coreLib, 'request.js')) as { RequestOne: RequestOneClass };
const errors = fromTransport(path.join(coreLib, 'errors.js')) as { RequestError: new () => Error };

/** Counts the RequestErrors the request module builds (it looks the class up on each use). */
const original = errors.RequestError;
let built = 0;
beforeAll(() => {
  errors.RequestError = class extends original {
    constructor(...args: unknown[]) {
      super(...(args as []));
      built++;
    }
  };
});
// Files share a worker's modules: every other suite gets the class back.
afterAll(() => {
  errors.RequestError = original;
});
beforeEach(() => {
  built = 0;
});

function request(): RequestOne {
  // As the bus makes them: it connects with noAsyncTraces, so no error is built up front.
  return new RequestOne({ cancel: () => undefined }, 'subject', { timeout: 60_000 }, false);
}

describe('@nats-io/nats-core, as patched (ADR 0091)', () => {
  it('an answered request resolves with its answer and builds no error', async () => {
    const r = request();
    const answer = { data: new Uint8Array([1]) };
    r.resolver(null, answer);
    await expect(r.deferred).resolves.toBe(answer);
    expect(built).toBe(0);
  });

  it('a request answered with an error still rejects with that error', async () => {
    const r = request();
    r.resolver(new Error('no responders'), null);
    await expect(r.deferred).rejects.toThrow('no responders');
  });

  it('a request cancelled before its answer still rejects as cancelled', async () => {
    const r = request();
    r.cancel();
    await expect(r.deferred).rejects.toThrow('cancelled');
    expect(built).toBe(1);
  });
});
