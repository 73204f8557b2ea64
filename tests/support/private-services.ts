/**
 * A NATS server and a PostgreSQL server of the test's own, on their own ports and data
 * directories, so a fault test can SIGKILL them and start them again on the same data without
 * touching the run's shared services.
 *
 * PostgreSQL refuses to run as root: as root, the cluster is created and run as the `postgres`
 * user. Each server runs in its own process group, and a kill takes the whole group (the
 * postmaster's backends too), so a restart never finds shared memory still attached.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, sleep } from './processes.js';

export interface PrivateServer {
  readonly url: string;
  /** SIGKILL to the whole process group; resolves once it is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data; resolves once it accepts connections. */
  start(): Promise<void>;
  dispose(): Promise<void>;
}

async function waitForPort(port: number, what: string, timeoutMs = 20_000): Promise<void> {
  const net = await import('node:net');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`${what} did not listen on ${port}`);
    await sleep(50);
  }
}

function groupKill(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
  return exited;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

function startDetached(cmd: string, args: string[], opts: { uid?: number; gid?: number } = {}) {
  const child = spawn(cmd, args, { detached: true, stdio: 'ignore', ...opts });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

export function natsServerBinary(): string | null {
  for (const p of ['/usr/sbin/nats-server', '/usr/local/bin/nats-server', '/usr/bin/nats-server']) {
    if (existsSync(p)) return p;
  }
  return null;
}

export async function startPrivateNats(): Promise<PrivateServer> {
  const bin = natsServerBinary();
  if (!bin) throw new Error('nats-server is not installed');
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'vlt-nats-'));
  let child: ChildProcess | undefined;
  const server: PrivateServer = {
    url: `nats://127.0.0.1:${port}`,
    kill: () => groupKill(child),
    async start() {
      child = startDetached(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir]);
      await waitForPort(port, 'nats-server');
    },
    async dispose() {
      await groupKill(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}

export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const v of versions)
    if (existsSync(path.join(root, v, 'bin', 'initdb'))) return path.join(root, v, 'bin');
  return null;
}

export async function startPrivatePostgres(): Promise<PrivateServer> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('PostgreSQL server binaries are not installed');
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'vlt-pg-'));
  const data = path.join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  const ids = asRoot
    ? {
        uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
        gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
      }
    : {};
  if (asRoot) await chown(dir, ids.uid!, ids.gid!);
  execFileSync(path.join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8'], {
    ...ids,
    stdio: 'ignore',
  });
  let child: ChildProcess | undefined;
  const server: PrivateServer = {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    kill: () => groupKill(child),
    async start() {
      child = startDetached(
        path.join(bin, 'postgres'),
        ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'],
        ids,
      );
      await waitForPort(port, 'postgres');
      // Listening comes before recovery ends: wait until it takes queries.
      const pg = (await import('pg')).default;
      const deadline = Date.now() + 30_000;
      for (;;) {
        const client = new pg.Client({ connectionString: server.url });
        try {
          await client.connect();
          await client.query('SELECT 1');
          await client.end();
          return;
        } catch (err) {
          await client.end().catch(() => undefined);
          if (Date.now() > deadline) throw err;
          await sleep(100);
        }
      }
    },
    async dispose() {
      await groupKill(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}
