/**
 * Closing a service drains it (ADR 0063): requests already in flight finish, and then their
 * keep-alive connections are closed instead of holding `close()` open for the keep-alive
 * timeout (72 s in Fastify). A response that never ends is cut at the drain deadline.
 *
 * Raw sockets stand in for the client, so that nothing on the client side closes the
 * connection for us: whatever closes it here is the server.
 */
import net from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createServiceApp, type App } from './create-app.js';

const opened: App[] = [];

afterEach(async () => {
  // Never left listening by a failed test, even one where close() would hang.
  for (const a of opened.splice(0)) {
    a.server.closeAllConnections();
    await a.close();
  }
});

async function listening(setup: (app: App) => void, drainMs?: number): Promise<{ app: App; port: number }> {
  const app = await createServiceApp({
    title: 't',
    logger: pino({ level: 'silent' }),
    trustProxy: [],
    docs: false,
    ...(drainMs !== undefined && { drainMs }),
  });
  setup(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  opened.push(app);
  return { app, port: (app.server.address() as net.AddressInfo).port };
}

/** A keep-alive client on one raw socket: what it received, and whether the server closed it. */
function rawClient(port: number, path: string) {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (received += d));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(`GET ${path} HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\r\n`);
  return {
    received: () => received,
    closed,
    async waitFor(text: string) {
      while (!received.includes(text)) await new Promise((r) => setTimeout(r, 5));
    },
    destroy: () => socket.destroy(),
  };
}

/** Resolves to 'done' if `p` settles first, 'timeout' after `ms` (far below the keep-alive timeout). */
function within(p: Promise<unknown>, ms: number): Promise<'done' | 'timeout'> {
  return Promise.race([
    p.then(() => 'done' as const),
    new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms).unref()),
  ]);
}

describe('graceful close', () => {
  it('a request in flight when close starts finishes, and its keep-alive connection is then closed', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    const { app, port } = await listening((a) =>
      a.get('/slow', async () => {
        entered();
        await gate;
        return { ok: true };
      }),
    );
    const client = rawClient(port, '/slow');
    await inHandler;
    const closing = app.close();
    // Close has begun once the listener stops accepting; only then does the handler finish.
    while (app.server.listening) await new Promise((r) => setTimeout(r, 5));
    release();
    expect(await within(closing, 5_000)).toBe('done');
    expect(await within(client.closed, 1_000)).toBe('done');
    expect(client.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(client.received().toLowerCase()).toContain('connection: close');
    expect(client.received()).toContain('{"ok":true}');
  });

  it('a streamed response whose headers left before close: the body completes, then the connection is closed', async () => {
    let finish!: () => void;
    const { app, port } = await listening((a) =>
      a.get('/stream', (_req, reply) => {
        reply.raw.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });
        reply.raw.write('first;');
        finish = () => reply.raw.end('last');
        return reply;
      }),
    );
    const client = rawClient(port, '/stream');
    await client.waitFor('first;');
    const closing = app.close();
    await new Promise((r) => setTimeout(r, 50));
    expect(client.received()).not.toContain('last');
    finish();
    expect(await within(closing, 5_000)).toBe('done');
    expect(await within(client.closed, 1_000)).toBe('done');
    expect(client.received()).toContain('last');
    // The chunked body was terminated: the client got the whole response before the close.
    expect(client.received()).toMatch(/\r\n0\r\n\r\n$/);
  });

  it('a response that never ends is cut at the drain deadline', async () => {
    const { app, port } = await listening(
      (a) =>
        a.get('/forever', (_req, reply) => {
          reply.raw.writeHead(200, { 'content-type': 'text/plain' });
          reply.raw.write('started');
          return reply;
        }),
      200,
    );
    const client = rawClient(port, '/forever');
    await client.waitFor('started');
    expect(await within(app.close(), 5_000)).toBe('done');
    expect(await within(client.closed, 1_000)).toBe('done');
  });

  it('an idle keep-alive connection is closed at once, and new requests are refused', async () => {
    const { app, port } = await listening((a) => a.get('/quick', async () => ({ ok: true })));
    const client = rawClient(port, '/quick');
    await client.waitFor('{"ok":true}');
    expect(client.received().toLowerCase()).not.toContain('connection: close');
    expect(await within(app.close(), 5_000)).toBe('done');
    expect(await within(client.closed, 1_000)).toBe('done');
    await expect(
      new Promise((resolve, reject) =>
        net.connect(port, '127.0.0.1').once('connect', resolve).once('error', reject),
      ),
    ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
