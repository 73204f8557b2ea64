import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BusError, BusReplyError } from './bus.js';
import {
  assertFilter,
  assertKvKey,
  assertSubject,
  checkHeaders,
  decideDisposition,
  InFlight,
  openReply,
  replyFailed,
  replyOk,
  retryBackoffMs,
  settle,
  subjectMatches,
  toJsonText,
} from './wire.js';

describe('subjectMatches', () => {
  it.each([
    ['a.b.>', 'a.b.c', true],
    ['a.b.>', 'a.b.c.d', true],
    ['a.b.>', 'a.b', false],
    ['a.*.c', 'a.x.c', true],
    ['a.*.c', 'a.x.y.c', false],
    ['a.b', 'a.b', true],
    ['a.b', 'a.b.c', false],
    ['a.b.>', 'a.b.*', true], // a filter inside the stream's wildcard
    ['a.b.>', 'a.c.>', false],
  ])('%s vs %s → %s', (filter, subject, expected) => {
    expect(subjectMatches(filter, subject)).toBe(expected);
  });

  it('matches exactly as token-by-token comparison of the split subjects', () => {
    // The plain definition the walking matcher must agree with, on every shape of input.
    const reference = (filter: string, subject: string) => {
      const f = filter.split('.');
      const s = subject.split('.');
      for (let i = 0; i < f.length; i++) {
        if (f[i] === '>') return s.length > i;
        if (i >= s.length) return false;
        if (f[i] !== '*' && f[i] !== s[i]) return false;
      }
      return f.length === s.length;
    };
    const token = fc.constantFrom('a', 'b', 'ab', '*', '>', '');
    const subjectOf = fc.array(token, { minLength: 1, maxLength: 5 }).map((t) => t.join('.'));
    fc.assert(
      fc.property(subjectOf, subjectOf, (filter, subject) => {
        expect(subjectMatches(filter, subject)).toBe(reference(filter, subject));
      }),
      { numRuns: 5000 },
    );
  });
});

describe('name rules', () => {
  it.each(['a', 'a.b', 'vlt.rpc.credentials.get', 'x-y_z'])('accepts subject %s', (s) => {
    expect(() => assertSubject(s)).not.toThrow();
  });
  it.each(['', 'a..b', 'a.*', 'a.>', 'a b', '.a', 'a.'])('rejects subject %j', (s) => {
    expect(() => assertSubject(s)).toThrow(BusError);
  });
  it.each(['a.>', 'a.*.c', '>'])('accepts filter %s', (s) => expect(() => assertFilter(s)).not.toThrow());
  it.each(['a.>.b', 'a..b', ''])('rejects filter %j', (s) => expect(() => assertFilter(s)).toThrow(BusError));
  it.each(['abc', 'a.b', 'A-b_c/d=e', 'e3b0c44298fc1c149afbf4c8996fb924'])('accepts key %s', (k) => {
    expect(() => assertKvKey(k)).not.toThrow();
  });
  it.each(['', '.a', 'a.', 'a b', 'a*', 'a>'])('rejects key %j', (k) =>
    expect(() => assertKvKey(k)).toThrow(BusError),
  );
});

describe('checkHeaders', () => {
  it('copies valid headers', () => {
    const h = { traceparent: '00-x', 'X-Custom': 'v' };
    const out = checkHeaders(h);
    expect(out).toEqual(h);
    expect(out).not.toBe(h);
  });
  it.each([
    [{ 'Nats-Msg-Id': 'x' }],
    [{ 'nats-expected-stream': 'x' }],
    [{ 'bad key': 'x' }],
    [{ 'a:b': 'x' }],
    [{ ok: 'line\r\nbreak' }],
  ])('rejects %j', (h) => {
    expect(() => checkHeaders(h)).toThrow(BusError);
  });
});

describe('JSON values', () => {
  it('encodes undefined as null and refuses what JSON cannot carry', () => {
    expect(toJsonText(undefined)).toBe('null');
    expect(() => toJsonText(10n)).toThrow(BusError);
    expect(() => toJsonText(() => 1)).toThrow(BusError);
  });
});

describe('reply envelope', () => {
  it('round-trips data', () => {
    expect(openReply(replyOk({ a: [1] }))).toEqual({ a: [1] });
    expect(openReply(replyOk(undefined))).toBeNull();
  });
  it('carries message and string code, never the stack', () => {
    const err = Object.assign(new Error('denied'), { code: 'APPROVAL_DENIED' });
    const text = replyFailed(err);
    expect(text).not.toContain('at ');
    expect(() => openReply(text)).toThrow(BusReplyError);
    try {
      openReply(text);
    } catch (e) {
      expect(e).toMatchObject({ message: 'denied', remoteCode: 'APPROVAL_DENIED', code: 'BUS_REMOTE_ERROR' });
    }
  });
  it('ignores non-string codes and non-Error throws', () => {
    expect(() => openReply(replyFailed(Object.assign(new Error('x'), { code: 42 })))).toThrow(
      expect.objectContaining({ remoteCode: undefined }),
    );
    expect(() => openReply(replyFailed('plain'))).toThrow('plain');
  });
  it('answers an unencodable result with an error reply', () => {
    expect(() => openReply(replyOk({ n: 1n }))).toThrow(BusReplyError);
  });
  it('rejects something that is not an envelope', () => {
    expect(() => openReply('{"hello":1}')).toThrow(BusError);
    expect(() => openReply('not json')).toThrow(BusError);
  });
});

describe('decideDisposition', () => {
  it.each([
    [{ type: 'ack' } as const, 1, 10, { type: 'ack' }],
    [{ type: 'drop', reason: 'bad' } as const, 1, 10, { type: 'term', reason: 'bad' }],
    [{ type: 'retry', delayMs: 500 } as const, 1, 10, { type: 'nak', delayMs: 500 }],
    [{ type: 'retry', delayMs: -5 } as const, 1, 10, { type: 'nak', delayMs: 0 }],
    [{ type: 'threw', error: new Error() } as const, 3, 10, { type: 'nak', delayMs: 800 }],
    [
      { type: 'retry', delayMs: 500 } as const,
      10,
      10,
      { type: 'term', reason: 'gave up after 10 deliveries' },
    ],
    [
      { type: 'threw', error: new Error() } as const,
      2,
      2,
      { type: 'term', reason: 'gave up after 2 deliveries' },
    ],
  ])('%j at delivery %i of %i → %j', (outcome, count, max, expected) => {
    expect(decideDisposition(outcome, count, max)).toEqual(expected);
  });
  it('settles a throw or a malformed answer as threw', async () => {
    expect(await settle(async () => ({ type: 'ack' }))).toEqual({ type: 'ack' });
    expect((await settle(async () => Promise.reject(new Error('x')))).type).toBe('threw');
    expect((await settle(async () => undefined as never)).type).toBe('threw');
    expect((await settle(async () => ({ type: 'nope' }) as never)).type).toBe('threw');
  });
  it('backs off exponentially up to 30 s', () => {
    expect([1, 2, 3, 4].map(retryBackoffMs)).toEqual([200, 400, 800, 1600]);
    expect(retryBackoffMs(50)).toBe(30_000);
  });
});

describe('InFlight', () => {
  const deferred = () => {
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    return { promise, resolve, reject };
  };
  const turn = () => new Promise<void>((r) => setImmediate(r));

  it('oneFinished waits for any one running handler, and frees its slot', async () => {
    const settled: string[] = [];
    const running = new InFlight(() => settled.push('settled'));
    const a = deferred();
    const b = deferred();
    running.add(a.promise);
    running.add(b.promise);
    let woke = false;
    const waiting = running.oneFinished().then(() => (woke = true));
    await turn();
    expect(woke).toBe(false);
    b.resolve();
    await waiting;
    expect(running.size).toBe(1);
    expect(settled).toEqual(['settled']);
    a.resolve();
    await running.all();
    expect(running.size).toBe(0);
    await expect(running.oneFinished()).resolves.toBeUndefined(); // none running: at once
  });

  it('a rejected handler frees its slot and its error comes out of the next wait, once', async () => {
    const running = new InFlight();
    const a = deferred();
    running.add(a.promise);
    a.reject(new Error('handler broke'));
    await expect(running.oneFinished()).rejects.toThrow('handler broke');
    expect(running.size).toBe(0);
    await expect(running.all()).resolves.toBeUndefined();
  });
});
