/**
 * A broker that goes away: operations fail at once while the client reconnects, and work again
 * when it is back. Runs its own nats-server (the shared one must not be killed); skipped only
 * when the binary is missing outside CI.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusDisconnectedError, busNames, createNatsBus, type Bus } from '../src/index.js';
import { sleep } from './support.js';

const NATS_SERVER = '/usr/sbin/nats-server';
const missing = !existsSync(NATS_SERVER);
if (missing && process.env.CI === 'true') throw new Error(`${NATS_SERVER} is required in CI`);

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

async function until(pred: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe.skipIf(missing)('NATS bus while the broker is down', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'vlt-nats-'));
  const names = busNames('disc');
  let port = 0;
  let server: ChildProcess | undefined;
  let bus: Bus;

  async function startServer(): Promise<void> {
    server = spawn(NATS_SERVER, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], {
      stdio: 'ignore',
    });
    // Ready when the port accepts connections.
    for (let i = 0; i < 200; i++) {
      const ok = await new Promise<boolean>((r) => {
        const s = net.connect(port, '127.0.0.1', () => (s.end(), r(true)));
        s.on('error', () => r(false));
      });
      if (ok) return;
      await sleep(25);
    }
    throw new Error('nats-server did not start');
  }

  beforeAll(async () => {
    port = await freePort();
    await startServer();
    // A long publish timeout: only the disconnected fast path can make the test finish quickly.
    bus = await createNatsBus({ servers: [`nats://127.0.0.1:${port}`], names, publishTimeoutMs: 20_000 });
  }, 30_000);

  afterAll(async () => {
    await bus?.close();
    server?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('regression: publish and request fail at once with BusDisconnectedError, then recover', async () => {
    await bus.publish(names.eventSubject('test', 'before'), { n: 1 }, { msgId: 'before-1' });
    expect(bus.isConnected()).toBe(true);

    server!.kill('SIGKILL');
    await until(() => !bus.isConnected(), 'the client to notice the broker is gone');

    const started = Date.now();
    await expect(
      bus.publish(names.eventSubject('test', 'during'), { n: 2 }, { msgId: 'during-1' }),
    ).rejects.toBeInstanceOf(BusDisconnectedError);
    await expect(bus.request('disc.rpc.nobody', {}, { timeoutMs: 20_000 })).rejects.toBeInstanceOf(
      BusDisconnectedError,
    );
    // Both answered well before either 20 s timeout (was: the publish sat in the reconnect buffer).
    expect(Date.now() - started).toBeLessThan(5_000);

    await startServer();
    await until(() => bus.isConnected(), 'the client to reconnect', 15_000);
    await bus.publish(names.eventSubject('test', 'after'), { n: 3 }, { msgId: 'after-1' });
  }, 40_000);
});
