import { createHook } from 'node:async_hooks';
import { getEventListeners } from 'node:events';
import type { ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestPki, type TestPki } from '@vlt/test-support/test-pki.js';
import { createUpstreamClient, UpstreamError, type UpstreamTimeouts } from './upstream-client.js';

let pki: TestPki;
let server: https.Server;
let port: number;
const seen: { path: string; auth: string | undefined }[] = [];
/** Responses of `/hold` still open. */
const held: ServerResponse[] = [];

beforeAll(async () => {
  pki = await createTestPki();
  server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    seen.push({ path: req.url ?? '', auth: req.headers.authorization });
    if (req.url === '/redirect') {
      res.writeHead(302, { location: 'https://127.0.0.1:1/elsewhere', 'set-cookie': 'sid=provider' });
      return res.end();
    }
    if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end('x'.repeat(64 * 1024));
    }
    if (req.url === '/slow') return; // never answers
    if (req.url === '/close') {
      // Every call on a new connection, so every call goes through the connect-time check.
      res.writeHead(200, { 'content-type': 'text/plain', connection: 'close' });
      return res.end('closed');
    }
    if (req.url === '/late') {
      // Answers once it has thought for two seconds.
      setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('late'), 2_000);
      return;
    }
    if (req.url === '/pause') {
      // Two seconds of silence between two chunks.
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('one ');
      setTimeout(() => res.end('two'), 2_000);
      return;
    }
    if (req.url === '/hold') {
      // A stream that stays open until the test lets go of it.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: first\n\n');
      held.push(res);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive' });
    res.end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await pki.dispose();
});

const client = (resolve: (h: string) => Promise<string[]>, allow = ['127.0.0.1/32'], timeoutMs = 5_000) =>
  createUpstreamClient({ ssrfAllowCidrs: allow, timeoutMs, resolver: resolve, extraCa: [pki.caPem] });

async function kind(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return err instanceof UpstreamError ? err.kind : `other: ${(err as Error).message}`;
  }
}

describe('upstream client', () => {
  it('reaches an allowed address and returns status, headers and body', async () => {
    const c = client(async () => ['127.0.0.1']);
    const res = await c.request({
      url: new URL(`https://localhost:${port}/ok`),
      method: 'GET',
      headers: { authorization: 'Basic x' },
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toEqual({ ok: true });
    // Hop-by-hop headers never reach the caller.
    expect(res.headers.connection).toBeUndefined();
    await c.close();
  });

  it('refuses a name that resolves to a blocked address, before connecting', async () => {
    const before = seen.length;
    const c = client(async () => ['127.0.0.1'], []);
    expect(
      await kind(c.request({ url: new URL(`https://localhost:${port}/ok`), method: 'GET', headers: {} })),
    ).toBe('ssrf_blocked');
    expect(seen.length).toBe(before);
    await c.close();
  });

  it('refuses when any answer is private, even if another is allowed (mixed DNS answers)', async () => {
    const before = seen.length;
    const c = client(async () => ['127.0.0.1', '10.0.0.7']);
    expect(
      await kind(c.request({ url: new URL(`https://localhost:${port}/ok`), method: 'GET', headers: {} })),
    ).toBe('ssrf_blocked');
    expect(seen.length).toBe(before);
    await c.close();
  });

  it('with DNS answers cached, a name that turns private is refused at connect once its answer expires', async () => {
    let answer = ['127.0.0.1'];
    const c = createUpstreamClient({
      ssrfAllowCidrs: ['127.0.0.1/32'],
      timeoutMs: 5_000,
      resolver: async () => answer,
      extraCa: [pki.caPem],
      dnsCacheMs: 300,
    });
    const call = () =>
      kind(c.request({ url: new URL(`https://localhost:${port}/close`), method: 'GET', headers: {} }));
    expect(await call()).toBe('ok');
    answer = ['10.0.0.7']; // the name rebinds to a private address
    // Within its age the decision and the connection both see the address that was vetted.
    expect(await c.resolve('localhost')).toEqual(['127.0.0.1']);
    expect(await call()).toBe('ok');
    await new Promise((r) => setTimeout(r, 350));
    expect(await c.resolve('localhost')).toEqual(['10.0.0.7']);
    const before = seen.length;
    expect(await call()).toBe('ssrf_blocked');
    expect(seen.length).toBe(before);
    await c.close();
  });

  it('checks literal IP hosts, which bypass DNS lookup', async () => {
    const c = client(async () => {
      throw new Error('must not resolve a literal');
    }, []);
    for (const host of ['127.0.0.1', '[::1]', '[::ffff:7f00:1]', '169.254.169.254', '10.1.2.3']) {
      expect(
        await kind(c.request({ url: new URL(`https://${host}:${port}/ok`), method: 'GET', headers: {} })),
        host,
      ).toBe('ssrf_blocked');
    }
    await c.close();
  });

  it('never follows redirects and never passes Set-Cookie back', async () => {
    const c = client(async () => ['127.0.0.1']);
    const res = await c.request({
      url: new URL(`https://localhost:${port}/redirect`),
      method: 'GET',
      headers: {},
    });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('https://127.0.0.1:1/elsewhere');
    expect(res.headers['set-cookie']).toBeUndefined();
    expect(seen.some((s) => s.path === '/elsewhere')).toBe(false);
    await c.close();
  });

  it('refuses plain http', async () => {
    const c = client(async () => ['127.0.0.1']);
    expect(
      await kind(c.request({ url: new URL(`http://localhost:${port}/ok`), method: 'GET', headers: {} })),
    ).toBe('ssrf_blocked');
    await c.close();
  });

  it('stops reading at the response size limit', async () => {
    const c = client(async () => ['127.0.0.1']);
    expect(
      await kind(
        c.request({
          url: new URL(`https://localhost:${port}/big`),
          method: 'GET',
          headers: {},
          maxResponseBytes: 1024,
        }),
      ),
    ).toBe('too_large');
    await c.close();
  });

  it('times out a provider that never answers', async () => {
    const c = client(async () => ['127.0.0.1'], ['127.0.0.1/32'], 300);
    expect(
      await kind(c.request({ url: new URL(`https://localhost:${port}/slow`), method: 'GET', headers: {} })),
    ).toBe('timeout');
    await c.close();
  });

  it('fails on an untrusted certificate', async () => {
    const c = createUpstreamClient({
      ssrfAllowCidrs: ['127.0.0.1/32'],
      timeoutMs: 2_000,
      resolver: async () => ['127.0.0.1'],
    });
    expect(
      await kind(c.request({ url: new URL(`https://localhost:${port}/ok`), method: 'GET', headers: {} })),
    ).toBe('unavailable');
    await c.close();
  });
});

describe('TLS to providers', () => {
  it('builds its secure context once, when the client is made, not for each new connection', async () => {
    const contexts = vi.spyOn(tls, 'createSecureContext');
    try {
      // Trusting the test CA, and with the default roots alone (each handshake then fails).
      for (const extraCa of [[pki.caPem], undefined]) {
        const before = contexts.mock.calls.length;
        const c = createUpstreamClient({
          ssrfAllowCidrs: ['127.0.0.1/32'],
          timeoutMs: 2_000,
          resolver: async () => ['127.0.0.1'],
          ...(extraCa && { extraCa }),
        });
        const made = contexts.mock.calls.length;
        // `/closed` answers with `connection: close`: every call opens a connection of its own.
        const outcomes: string[] = [];
        for (let i = 0; i < 3; i++) {
          outcomes.push(
            await kind(
              c.request({ url: new URL(`https://localhost:${port}/closed`), method: 'GET', headers: {} }),
            ),
          );
        }
        expect(outcomes).toEqual(Array(3).fill(extraCa ? 'ok' : 'unavailable'));
        expect(made - before).toBe(1);
        expect(contexts.mock.calls.length).toBe(made);
        await c.close();
      }
    } finally {
      contexts.mockRestore();
    }
  });
});

describe('calls open at once to one provider origin', () => {
  const limited = () =>
    createUpstreamClient({
      ssrfAllowCidrs: ['127.0.0.1/32'],
      timeoutMs: 5_000,
      resolver: async () => ['127.0.0.1'],
      extraCa: [pki.caPem],
      maxConnectionsPerOrigin: 2,
    });
  const holds = () => seen.filter((s) => s.path === '/hold').length;
  const hold = (c: ReturnType<typeof limited>, host = 'localhost') =>
    c.stream({ url: new URL(`https://${host}:${port}/hold`), method: 'GET', headers: {} });

  it('refuses one more at once as busy instead of queueing it behind open streams, and never sends it', async () => {
    const c = limited();
    const before = holds();
    const open = [await hold(c), await hold(c)];
    expect(await kind(hold(c))).toBe('busy');
    expect(
      await kind(c.request({ url: new URL(`https://localhost:${port}/ok`), method: 'GET', headers: {} })),
    ).toBe('busy');
    expect(holds() - before).toBe(2);
    // Per origin: another origin still has its own slots.
    const other = await hold(c, '127.0.0.1');
    expect(other.status).toBe(200);
    for (const s of [...open, other]) s.body.destroy();
    for (const r of held.splice(0)) r.end();
    await c.close();
  });

  it('gives the slot back when a stream closes, whether it ended or was destroyed', async () => {
    const c = limited();
    const a = await hold(c);
    const b = await hold(c);
    expect(await kind(hold(c))).toBe('busy');
    const closed = new Promise((r) => a.body.once('close', r));
    a.body.destroy();
    await closed;
    const d = await hold(c);
    expect(d.status).toBe(200);
    // A stream the provider ends gives its slot back too, once the agent has read it.
    const bEnded = new Promise((r) => b.body.once('close', r));
    for (const r of held.splice(0)) r.end();
    b.body.resume();
    d.body.resume();
    await bEnded;
    const e = await hold(c);
    expect(e.status).toBe(200);
    e.body.destroy();
    for (const r of held.splice(0)) r.end();
    await c.close();
  });

  it('gives the slot back after a buffered call, and after a failed one', async () => {
    const c = createUpstreamClient({
      ssrfAllowCidrs: ['127.0.0.1/32'],
      timeoutMs: 300,
      resolver: async () => ['127.0.0.1'],
      extraCa: [pki.caPem],
      maxConnectionsPerOrigin: 1,
    });
    const get = (path: string) =>
      kind(c.request({ url: new URL(`https://localhost:${port}${path}`), method: 'GET', headers: {} }));
    for (let i = 0; i < 3; i++) expect(await get('/ok')).toBe('ok');
    expect(await get('/slow')).toBe('timeout');
    expect(await get('/ok')).toBe('ok');
    const slowStream = c.stream({
      url: new URL(`https://localhost:${port}/slow`),
      method: 'GET',
      headers: {},
    });
    expect(await kind(slowStream)).toBe('timeout');
    expect(await get('/ok')).toBe('ok');
    // A target refused before any call (plain http) takes no slot at all.
    expect(
      await kind(c.request({ url: new URL(`http://localhost:${port}/ok`), method: 'GET', headers: {} })),
    ).toBe('ssrf_blocked');
    expect(await get('/ok')).toBe('ok');
    await c.close();
  });
});

describe('time limits of one call', () => {
  const strict = () =>
    createUpstreamClient({
      ssrfAllowCidrs: ['127.0.0.1/32'],
      timeoutMs: 200,
      idleTimeoutMs: 200,
      resolver: async () => ['127.0.0.1'],
      extraCa: [pki.caPem],
    });
  const at = (path: string) => new URL(`https://localhost:${port}${path}`);
  const patient: UpstreamTimeouts = { headersMs: 8_000, idleMs: 8_000, deadlineMs: 8_000 };

  it("replace the client's own for that call only: headers, silence between chunks, whole call", async () => {
    const c = strict();
    const get = (path: string, timeouts?: UpstreamTimeouts) =>
      c.request({ url: at(path), method: 'GET', headers: {}, ...(timeouts && { timeouts }) });
    const streamText = async (timeouts?: UpstreamTimeouts) => {
      const s = await c.stream({
        url: at('/pause'),
        method: 'GET',
        headers: {},
        ...(timeouts && { timeouts }),
      });
      return Buffer.concat(await s.body.toArray()).toString();
    };
    // undici checks these limits on a timer wheel of about half a second, so the provider here
    // thinks or pauses for two seconds; every call runs at once.
    const [late, paused, streamed, lateOwn, pausedOwn, streamedOwn, lateShort] = await Promise.all([
      // The client's limits (200 ms): a provider that thinks, or pauses, that long times out.
      kind(get('/late')),
      kind(get('/pause')),
      kind(streamText()),
      // The same calls with their own limits.
      get('/late', patient).then((r) => r.body.toString()),
      get('/pause', patient).then((r) => r.body.toString()),
      streamText(patient),
      // A shorter whole-call limit holds too.
      kind(get('/late', { ...patient, deadlineMs: 300 })),
    ]);
    expect({ late, paused, streamed, lateShort }).toEqual({
      late: 'timeout',
      paused: 'timeout',
      // A stream fails with undici's body timeout (the data plane records stream_interrupted).
      streamed: expect.stringMatching(/timeout/i),
      lateShort: 'timeout',
    });
    expect({ lateOwn, pausedOwn, streamedOwn }).toEqual({
      lateOwn: 'late',
      pausedOwn: 'one two',
      streamedOwn: 'one two',
    });
    await c.close();
  });

  it("end at the caller's signal, buffered or streamed, as a cancellation; the call then lets go of it", async () => {
    const c = strict();
    const call = (path: string, signal: AbortSignal) => ({
      url: at(path),
      method: 'GET',
      headers: {},
      timeouts: patient,
      signal,
    });
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'answered',
        (e: unknown) => (e instanceof UpstreamError ? `${e.kind}: ${e.message}` : `other: ${String(e)}`),
      );
    const listeners = (s: AbortSignal) => getEventListeners(s, 'abort').length;
    // Before the provider's first byte (it answers /late after two seconds).
    const gone = new AbortController();
    const buffered = outcome(c.request(call('/late', gone.signal)));
    const streamed = outcome(c.stream(call('/late', gone.signal)));
    await new Promise((r) => setTimeout(r, 100));
    expect(listeners(gone.signal)).toBe(2);
    gone.abort();
    const cancelled = 'unavailable: provider request cancelled by the caller';
    expect(await Promise.all([buffered, streamed])).toEqual([cancelled, cancelled]);
    expect(listeners(gone.signal)).toBe(0);
    // In the middle of a stream (/pause sends its head and `one`, then pauses).
    const midway = new AbortController();
    const s = await c.stream(call('/pause', midway.signal));
    midway.abort();
    expect(await outcome(s.body.toArray())).toBe(cancelled);
    expect(listeners(midway.signal)).toBe(0);
    // A call that ends by itself lets go of the signal too.
    const kept = new AbortController();
    expect((await c.request(call('/ok', kept.signal))).status).toBe(200);
    await (await c.stream(call('/ok', kept.signal))).body.toArray();
    expect(listeners(kept.signal)).toBe(0);
    // A signal aborted already: nothing is sent.
    expect(await outcome(c.request(call('/ok', gone.signal)))).toBe(cancelled);
    await c.close();
  });

  it('leaves no deadline timer behind once a buffered call has ended, answered or failed', async () => {
    // A deadline no other timer here has, to tell this client's timers from undici's own.
    const DEADLINE_MS = 54_321;
    const pending = new Set<number>();
    let set = 0;
    const hook = createHook({
      init(id, type, _trigger, resource) {
        if (type !== 'Timeout' || (resource as { _idleTimeout?: number })._idleTimeout !== DEADLINE_MS)
          return;
        set++;
        pending.add(id);
      },
      destroy: (id) => void pending.delete(id),
    }).enable();
    try {
      const c = createUpstreamClient({
        ssrfAllowCidrs: ['127.0.0.1/32'],
        timeoutMs: 200,
        deadlineMs: DEADLINE_MS,
        resolver: async () => ['127.0.0.1'],
        extraCa: [pki.caPem],
      });
      const get = (path: string) => kind(c.request({ url: at(path), method: 'GET', headers: {} }));
      const outcomes = [await get('/ok'), await get('/ok'), await get('/slow'), await get('/big')];
      expect(outcomes).toEqual(['ok', 'ok', 'timeout', 'ok']);
      // Destroy hooks are emitted after the turn that cleared the timer.
      await new Promise((r) => setTimeout(r, 20));
      // One deadline per call was set, and none outlives its call.
      expect({ set, pending: pending.size }).toEqual({ set: 4, pending: 0 });
      await c.close();
    } finally {
      hook.disable();
    }
  });
});
