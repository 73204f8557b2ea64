import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { busNames, createInProcessBus, type Bus } from '@vlt/bus';
import type { NotificationBroadcast } from '@vlt/contracts';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  MAX_BUFFERED_BYTES,
  MAX_STREAMS_PER_USER,
  startNotificationHub,
  type NotificationHub,
} from './stream.js';

const names = busNames('hubtest');
const ws = '00000000-0000-4000-8000-0000000000aa';
const alice = '00000000-0000-4000-8000-0000000000a1';
const bob = '00000000-0000-4000-8000-0000000000b1';

/** A response that keeps what it is sent; `stalled` ones never drain (a reader that stopped). */
class FakeResponse extends EventEmitter {
  chunks: string[] = [];
  status = 0;
  headers: Record<string, string> = {};
  destroyed = false;
  writableEnded = false;
  writableLength = 0;
  constructor(private readonly stalled = false) {
    super();
  }
  writeHead(status: number, headers: Record<string, string>) {
    this.status = status;
    this.headers = headers;
    return this;
  }
  write(chunk: string) {
    this.chunks.push(chunk);
    if (this.stalled) this.writableLength += Buffer.byteLength(chunk);
    return !this.stalled;
  }
  end() {
    this.writableEnded = true;
  }
  destroy() {
    this.destroyed = true;
    this.emit('close');
  }
  text() {
    return this.chunks.join('');
  }
}

const asRes = (r: FakeResponse) => r as unknown as ServerResponse;
const note = (i: number, body = 'b') => ({
  id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  type: 'security_alert' as const,
  title: `n${i}`,
  body,
  linkUrl: null,
  read: false,
  readAt: null,
  metadata: null,
  data: null,
  createdAt: new Date(0).toISOString(),
});
const tick = () => new Promise((r) => setTimeout(r, 5));

describe('notification stream hub', () => {
  let bus: Bus;
  let hub: NotificationHub;
  const warnings: object[] = [];
  beforeEach(async () => {
    bus = createInProcessBus({ names });
    hub = await startNotificationHub({
      bus,
      names,
      logger: { warn: (o) => warnings.push(o) },
      heartbeatMs: 20,
    });
  });
  afterEach(async () => {
    await hub.stop();
    await bus.close();
  });

  const publish = (items: NotificationBroadcast['items']) =>
    bus.broadcast(names.broadcast.notifications(ws), {
      v: 1,
      workspaceId: ws,
      items,
    } satisfies NotificationBroadcast);

  it('opens with the spec headers and `event: connected`, then sends each member only their own rows', async () => {
    const a = new FakeResponse();
    const b = new FakeResponse();
    hub.open({ userId: alice, workspaceId: ws, res: asRes(a), stillAllowed: async () => true });
    hub.open({ userId: bob, workspaceId: ws, res: asRes(b), stillAllowed: async () => true });
    expect(a.status).toBe(200);
    expect(a.headers).toEqual({
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    expect(a.chunks[0]).toBe('event: connected\ndata: {}\n\n');
    await publish([{ userId: alice, notification: note(1) }]);
    await tick();
    expect(a.text()).toContain(`event: notification\ndata: ${JSON.stringify(note(1))}\n\n`);
    expect(b.text()).not.toContain('event: notification');
  });

  it('a reader that stopped reading is dropped once its buffer passes the bound; the others keep receiving', async () => {
    const slow = new FakeResponse(true);
    const fast = new FakeResponse();
    hub.open({ userId: alice, workspaceId: ws, res: asRes(slow), stillAllowed: async () => true });
    hub.open({ userId: alice, workspaceId: ws, res: asRes(fast), stillAllowed: async () => true });
    const big = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 8; i++) await publish([{ userId: alice, notification: note(i, big) }]);
    await tick();
    expect(slow.destroyed).toBe(true);
    expect(slow.writableLength).toBeLessThan(MAX_BUFFERED_BYTES + 2 * big.length);
    expect(fast.destroyed).toBe(false);
    expect(fast.chunks.filter((c) => c.startsWith('event: notification'))).toHaveLength(8);
    expect(hub.size()).toBe(1);
    expect(warnings).toHaveLength(1);
  });

  it('heartbeats every interval, and ends a stream whose credential no longer stands', async () => {
    let allowed = true;
    const r = new FakeResponse();
    hub.open({ userId: alice, workspaceId: ws, res: asRes(r), stillAllowed: async () => allowed });
    await new Promise((res) => setTimeout(res, 50));
    expect(r.chunks.filter((c) => c === ': heartbeat\n\n').length).toBeGreaterThanOrEqual(1);
    allowed = false;
    await new Promise((res) => setTimeout(res, 50));
    expect(r.destroyed).toBe(true);
    expect(hub.size()).toBe(0);
  });

  it(`refuses an 11th stream of one user (at most ${MAX_STREAMS_PER_USER}), and frees a slot when one closes`, () => {
    const open = () => {
      const r = new FakeResponse();
      return {
        r,
        result: hub.open({ userId: bob, workspaceId: ws, res: asRes(r), stillAllowed: async () => true }),
      };
    };
    const streams = Array.from({ length: MAX_STREAMS_PER_USER }, open);
    expect(streams.every((s) => s.result.ok)).toBe(true);
    expect(open().result).toEqual({ ok: false, reason: 'too_many_streams' });
    streams[0]!.r.destroy();
    expect(open().result.ok).toBe(true);
  });
});
