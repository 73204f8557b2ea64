import v8 from 'node:v8';
import vm from 'node:vm';
import { busNames, createInProcessBus, type Bus, type ReplyHandle } from '@vlt/bus';
import type { CredentialsResponse } from '@vlt/contracts';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createCredentialCache } from './credentials.js';

const names = busNames('credtest');
const req = {
  workspaceId: '00000000-0000-4000-8000-000000000001',
  agentId: '00000000-0000-4000-8000-000000000002',
  connectionId: '00000000-0000-4000-8000-000000000003',
};
const TTL = 30_000;
const STALE = 900_000;

type Mode = 'answer' | 'throw' | 'hang';

/** A control plane on the in-process bus whose answers the test sets, and that can be stopped. */
function fakeControlPlane(bus: Bus) {
  let handle: ReplyHandle | undefined;
  const state: {
    mode: Mode;
    answer: CredentialsResponse;
    calls: number;
    /** Hung requests: each answers with the then-current `answer` when called. */
    hung: (() => void)[];
  } = {
    mode: 'answer',
    answer: { ok: true, credentials: { type: 'api_key', key: 'k-1' }, ttlMs: TTL },
    calls: 0,
    hung: [],
  };
  return {
    state,
    async start() {
      handle = await bus.reply(names.rpc.credentialsGet, async () => {
        state.calls += 1;
        if (state.mode === 'throw') throw new Error('database is down');
        if (state.mode === 'hang')
          return new Promise<CredentialsResponse>((resolve) => state.hung.push(() => resolve(state.answer)));
        return state.answer;
      });
    },
    async stop() {
      await handle?.stop();
      handle = undefined;
    },
  };
}

describe('credential cache: outage posture', () => {
  let bus: Bus;
  let cp: ReturnType<typeof fakeControlPlane>;
  let t: number;
  const warnings: object[] = [];
  const cache = (staleMs = STALE, o: { timeoutMs?: number; standInAfterMs?: number } = {}) =>
    createCredentialCache({
      bus,
      names,
      ttlMs: TTL,
      staleMs,
      timeoutMs: o.timeoutMs ?? 200,
      ...(o.standInAfterMs !== undefined && { standInAfterMs: o.standInAfterMs }),
      logger: { warn: (obj) => warnings.push(obj) },
    });
  /** Settles within `ms` (real time), or says it is still pending. */
  const within = <T>(p: Promise<T>, ms: number) =>
    Promise.race([p, new Promise<'pending'>((r) => setTimeout(() => r('pending'), ms))]);

  beforeEach(async () => {
    bus = createInProcessBus({ names, requestTimeoutMs: 60_000 });
    cp = fakeControlPlane(bus);
    await cp.start();
    // Only Date is faked: the bus's own timers stay real.
    vi.useFakeTimers({ toFake: ['Date'] });
    t = 1_000_000;
    vi.setSystemTime(t);
    warnings.length = 0;
  });
  afterEach(async () => {
    cp.state.hung.splice(0).forEach((answer) => answer());
    vi.useRealTimers();
    await bus.close();
  });

  it('regression: keeps serving a fetched credential past its TTL while the control plane has no responders', async () => {
    const c = cache();
    expect(await c.get(req)).toMatchObject({ ok: true, credentials: { key: 'k-1' } });
    await cp.stop();
    vi.setSystemTime((t += TTL + 1));
    // Before the fix every call here failed (503) once the 30 s entry expired.
    expect(await c.get(req)).toMatchObject({ ok: true, credentials: { key: 'k-1' } });
    vi.setSystemTime((t += 60_000));
    expect(await c.get(req)).toMatchObject({ ok: true });
    expect(warnings).toHaveLength(1);
    expect(JSON.stringify(warnings)).not.toContain('k-1');
  });

  it('asks again after the TTL when the control plane answers, and uses the new credential', async () => {
    const c = cache();
    await c.get(req);
    cp.state.answer = { ok: true, credentials: { type: 'api_key', key: 'k-2' }, ttlMs: TTL };
    vi.setSystemTime((t += TTL - 1));
    expect(await c.get(req)).toMatchObject({ credentials: { key: 'k-1' } });
    vi.setSystemTime((t += 2));
    expect(await c.get(req)).toMatchObject({ credentials: { key: 'k-2' } });
    expect(cp.state.calls).toBe(2);
  });

  it('serves the cached credential when the control plane replies with an error (its database is down)', async () => {
    const c = cache();
    await c.get(req);
    cp.state.mode = 'throw';
    vi.setSystemTime((t += TTL + 1));
    expect(await c.get(req)).toMatchObject({ ok: true, credentials: { key: 'k-1' } });
  });

  it('stops serving it once the stale window has passed: the call fails closed', async () => {
    const c = cache();
    await c.get(req);
    await cp.stop();
    vi.setSystemTime((t += STALE + 1));
    await expect(c.get(req)).rejects.toThrow(/no responders/);
  });

  it('a refusal is an answer: a revoked connection drops the entry, even if the control plane then goes away', async () => {
    const c = cache();
    await c.get(req);
    cp.state.answer = { ok: false, code: 'revoked' };
    vi.setSystemTime((t += TTL + 1));
    expect(await c.get(req)).toEqual({ ok: false, code: 'revoked' });
    await cp.stop();
    await expect(c.get(req)).rejects.toThrow(/no responders/);
  });

  it('an invalidated connection is not served from the stale entry', async () => {
    const c = cache();
    await c.get(req);
    c.invalidate(req.connectionId);
    await cp.stop();
    await expect(c.get(req)).rejects.toThrow(/no responders/);
  });

  it('never serves an OAuth token past its expiry (minus skew), whatever the stale window', async () => {
    const c = cache();
    cp.state.answer = {
      ok: true,
      credentials: { type: 'bearer', token: 'at-1', expiresAt: t + 120_000 },
      ttlMs: TTL,
    };
    await c.get(req);
    await cp.stop();
    vi.setSystemTime((t += TTL + 1));
    expect(await c.get(req)).toMatchObject({ ok: true, credentials: { token: 'at-1' } });
    vi.setSystemTime((t += 60_000)); // 91 s after fetch: inside the 30 s skew before expiry
    await expect(c.get(req)).rejects.toThrow(/no responders/);
  });

  it('"refresh unavailable" falls back to a still-valid cached token, and is passed on without one', async () => {
    const c = cache();
    await c.get(req);
    cp.state.answer = { ok: false, code: 'unavailable' };
    vi.setSystemTime((t += TTL + 1));
    expect(await c.get(req)).toMatchObject({ ok: true, credentials: { key: 'k-1' } });
    const other = { ...req, agentId: '00000000-0000-4000-8000-000000000009' };
    expect(await c.get(other)).toEqual({ ok: false, code: 'unavailable' });
  });

  it('VLT_CREDENTIAL_STALE_MS=0 turns the fallback off', async () => {
    const c = cache(0);
    await c.get(req);
    await cp.stop();
    vi.setSystemTime((t += TTL + 1));
    await expect(c.get(req)).rejects.toThrow(/no responders/);
  });

  it('regression: a hung control plane costs a caller with a cached credential the stand-in wait, not the request timeout', async () => {
    // The request would wait a minute; the stand-in answers after 50 ms.
    const c = cache(STALE, { timeoutMs: 60_000, standInAfterMs: 50 });
    await c.get(req);
    cp.state.mode = 'hang';
    vi.setSystemTime((t += TTL + 1));
    // Before the fix this waited the whole request timeout (15 s in production).
    expect(await within(c.get(req), 2_000)).toMatchObject({ ok: true, credentials: { key: 'k-1' } });
    // A second caller during the same hung request is served too, without a second request.
    expect(await within(c.get(req), 2_000)).toMatchObject({ ok: true, credentials: { key: 'k-1' } });
    expect(cp.state.calls).toBe(2); // the first fetch and the hung one
    // The late answer still lands: a new credential replaces the stale one.
    cp.state.answer = { ok: true, credentials: { type: 'api_key', key: 'k-2' }, ttlMs: TTL };
    cp.state.hung.splice(0).forEach((answer) => answer());
    await vi.waitFor(async () => expect(await c.get(req)).toMatchObject({ credentials: { key: 'k-2' } }));
  });

  it('a late refusal after a stand-in drops the entry: the next call is not served from it', async () => {
    const c = cache(STALE, { timeoutMs: 60_000, standInAfterMs: 50 });
    await c.get(req);
    cp.state.mode = 'hang';
    vi.setSystemTime((t += TTL + 1));
    expect(await within(c.get(req), 2_000)).toMatchObject({ ok: true });
    cp.state.answer = { ok: false, code: 'revoked' };
    cp.state.hung.splice(0).forEach((answer) => answer());
    await vi.waitFor(() => expect(cp.state.hung).toHaveLength(0));
    cp.state.mode = 'answer';
    await vi.waitFor(async () => expect(await c.get(req)).toEqual({ ok: false, code: 'revoked' }));
  });

  it('without a cached credential a hung control plane is waited for: nothing is made up', async () => {
    const c = cache(STALE, { timeoutMs: 60_000, standInAfterMs: 50 });
    cp.state.mode = 'hang';
    const first = c.get(req);
    expect(await within(first, 300)).toBe('pending');
    cp.state.hung.splice(0).forEach((answer) => answer());
    expect(await first).toMatchObject({ ok: true, credentials: { key: 'k-1' } });
  });

  it('an invalidation during the wait wins over the stand-in', async () => {
    const c = cache(STALE, { timeoutMs: 60_000, standInAfterMs: 100 });
    await c.get(req);
    cp.state.mode = 'hang';
    vi.setSystemTime((t += TTL + 1));
    const waiting = c.get(req);
    c.invalidate(req.connectionId);
    expect(await within(waiting, 500)).toBe('pending');
    cp.state.answer = { ok: false, code: 'revoked' };
    cp.state.hung.splice(0).forEach((answer) => answer());
    expect(await waiting).toEqual({ ok: false, code: 'revoked' });
  });
});

describe('credential cache: the secrets’ searched forms live and die with the cached credential', () => {
  let bus: Bus;
  let cp: ReturnType<typeof fakeControlPlane>;
  beforeEach(async () => {
    bus = createInProcessBus({ names, requestTimeoutMs: 60_000 });
    cp = fakeControlPlane(bus);
    await cp.start();
  });
  afterEach(async () => {
    await bus.close();
  });
  const granted = (r: CredentialsResponse) => {
    if (!r.ok) throw new Error(`expected credentials, got ${r.code}`);
    return r.credentials;
  };
  /** After a turn of the event loop: a WeakRef keeps its target alive to the end of the job that read it. */
  const collectGarbage = async () => {
    await new Promise((r) => setImmediate(r));
    v8.setFlagsFromString('--expose-gc');
    (vm.runInNewContext('gc') as () => void)();
  };

  it('derived once per cached credential, and those of a rotated key are not reused', async () => {
    const c = createCredentialCache({ bus, names, ttlMs: TTL });
    const first = granted(await c.get(req));
    const forms = c.secretForms(first, ['k-1-long-enough-to-search']);
    expect(forms.text).toContain('k-1-long-enough-to-search');
    expect(c.secretForms(granted(await c.get(req)), ['k-1-long-enough-to-search'])).toBe(forms);
    cp.state.answer = { ok: true, credentials: { type: 'api_key', key: 'k-2' }, ttlMs: TTL };
    c.invalidate(req.connectionId);
    const rotated = granted(await c.get(req));
    const next = c.secretForms(rotated, ['k-2-long-enough-to-search']);
    expect(next).not.toBe(forms);
    expect(next.text).not.toContain('k-1-long-enough-to-search');
  });

  it('regression: an invalidated (revoked) credential leaves no forms of its secret reachable', async () => {
    const c = createCredentialCache({ bus, names, ttlMs: TTL });
    // In a function, so no reference to the forms stays on this frame.
    const track = async () => {
      const creds = granted(await c.get(req));
      return new WeakRef(c.secretForms(creds, ['k-1-long-enough-to-search']));
    };
    const forms = await track();
    await collectGarbage();
    expect(forms.deref(), 'the cached credential holds its forms').toBeDefined();
    c.invalidate(req.connectionId);
    await collectGarbage();
    expect(forms.deref(), 'nothing else may hold them').toBeUndefined();
  });
});
