/**
 * What the in-process benchmarks share: a watchdog that bounds the run, a throw-away database
 * on the real PostgreSQL (or null for embedded PGlite), and free ports.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import pino from 'pino';
import { startAllInOne } from '@vlt/all-in-one';
import { loadConfig } from '@vlt/config';
import { applyMigrations } from '@vlt/db';

/**
 * Aborts the process (exit 2) when the run exceeds `limitMs`, after giving `cleanup()` — read
 * when the watchdog fires, so callers can install it late — 3 s to tidy up.
 */
export function installWatchdog(name: string, limitMs: number, cleanup: () => () => Promise<void>): void {
  setTimeout(() => {
    console.error(`${name} bench exceeded ${limitMs / 1000} s; aborting`);
    const bounded = new Promise((r) => setTimeout(r, 3_000));
    void Promise.race([cleanup()(), bounded]).finally(() => process.exit(2));
  }, limitMs - 4_000).unref();
}

export function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1000, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** A throw-away, migrated database on the real server, or null for embedded PGlite. */
export async function benchDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> } | null> {
  const admin = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const u = new URL(admin);
  if (!(await reachable(u.hostname || '127.0.0.1', Number(u.port || 5432)))) return null;
  const name = `vlt_bench_${prefix}_${randomBytes(4).toString('hex')}`;
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`CREATE DATABASE "${name}"`);
  await c.end();
  u.pathname = `/${name}`;
  await applyMigrations(u.toString());
  return {
    url: u.toString(),
    drop: async () => {
      const d = new pg.Client({ connectionString: admin });
      await d.connect();
      await d.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await d.end();
    },
  };
}

/**
 * The all-in-one gateway inside the bench process, listening on a free port, warnings kept
 * in memory (a bench's output is its table). `close` also removes its data directory.
 */
export async function startBenchGateway(
  name: string,
  env: Record<string, string>,
  seams: { upstreamCa?: string[] } = {},
): Promise<{ base: string; close(): Promise<void> }> {
  const dataDir = mkdtempSync(path.join(tmpdir(), `vlt-bench-${name}-`));
  const port = await freePort();
  const logs: string[] = [];
  const logger = pino(
    { level: 'warn' },
    new Writable({ write: (c, _e, cb) => (logs.push(String(c)), cb()) }),
  );
  const config = loadConfig('all-in-one', {
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: String(port),
    VLT_DATA_DIR: dataDir,
    VLT_MASTER_KEY: randomBytes(32).toString('base64'),
    VLT_TRUST_PROXY: '127.0.0.1/32',
    LOG_LEVEL: 'warn',
    ...env,
  });
  const gw = await startAllInOne(config, logger, seams);
  await gw.app.listen({ port, host: '127.0.0.1' });
  return {
    base: config.publicBaseUrl,
    async close() {
      await gw.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The durable record every brokered call waits for before its provider is called, measured on
 * its own: one `execution_requested`-sized event published through the project's NATS bus (the
 * data plane's code path, same stream settings) and acked by JetStream, on a stream of its own
 * (prefix `<prefix>`) that nothing consumes. A bench prints it beside its latency rows, so a
 * target on added latency is read against this floor, measured in the same run.
 */
export async function openJetStreamProbe(
  servers: string,
  prefix: string,
): Promise<{ publishMs(): Promise<number>; close(): Promise<void> }> {
  const { busNames, createNatsBus, purgeNatsPrefix } = await import('@vlt/bus');
  const names = busNames(prefix);
  const list = servers.split(',').map((s) => s.trim());
  const bus = await createNatsBus({ servers: list, names, name: 'bench-jetstream-probe' });
  const subject = names.eventSubject('execution', 'execution_requested');
  const event = {
    v: 1,
    action: 'execution_requested',
    timestamp: new Date().toISOString(),
    actor: `agent:${randomBytes(16).toString('hex')}`,
    decision: 'allowed',
    metadata: {
      model: 'B',
      method: 'POST',
      provider: 'llm_b',
      url: 'https://api.example.test/v1/chat/completions',
    },
  };
  return {
    async publishMs() {
      const msgId = randomBytes(16).toString('hex');
      const t0 = performance.now();
      await bus.publish(subject, { ...event, auditId: msgId }, { msgId });
      return performance.now() - t0;
    },
    async close() {
      await bus.close();
      await purgeNatsPrefix({ servers: list, prefix });
    },
  };
}
