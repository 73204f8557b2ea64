/**
 * Finds real PostgreSQL and NATS for integration tests, in the order ADR 0005 fixes:
 * DATABASE_URL / NATS_URL, then the local default ports, then testcontainers where a Docker
 * engine answers (loaded only then: these machines have none, see docs/decisions/0005).
 * With CI=true a missing service fails the run; elsewhere dependent suites skip with a reason.
 *
 * Each run gets its own database and its own bus prefix, so runs never share state.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of this run's own database, or '' when PostgreSQL is unavailable. */
    databaseUrl: string;
    natsUrl: string;
    busPrefix: string;
    servicesMissing: string;
    /** A migrated embedded data directory to copy from (tests/support/embedded-template.ts). */
    embeddedTemplate: string;
  }
}

function reachable(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

function hostPort(url: string, defPort: number): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname || '127.0.0.1', port: Number(u.port || defPort) };
}

function dockerEngineAvailable(): boolean {
  return Boolean(process.env.DOCKER_HOST) || existsSync('/var/run/docker.sock');
}

interface Started {
  url: string;
  stop(): Promise<unknown>;
}

/** Third source: containers, only where a Docker engine answers. Null when none can start. */
async function startContainer(kind: 'postgres' | 'nats'): Promise<Started | null> {
  if (!dockerEngineAvailable()) return null;
  try {
    if (kind === 'postgres') {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const c = await new PostgreSqlContainer('postgres:15').start();
      return { url: c.getConnectionUri(), stop: () => c.stop() };
    }
    const { GenericContainer, Wait } = await import('testcontainers');
    const c = await new GenericContainer('nats:2.10')
      .withCommand(['-js'])
      .withExposedPorts(4222)
      .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
      .start();
    return { url: `nats://${c.getHost()}:${c.getMappedPort(4222)}`, stop: () => c.stop() };
  } catch (err) {
    console.error(`testcontainers could not start ${kind}: ${(err as Error).message}`);
    return null;
  }
}

export default async function setup(project: TestProject) {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const missing: string[] = [];
  const containers: Started[] = [];

  let adminUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  let natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
  let pg = hostPort(adminUrl, 5432);
  let nats = hostPort(natsUrl.split(',')[0]!.replace(/^nats:/, 'http:'), 4222);
  if (!(await reachable(pg.host, pg.port))) {
    const c = await startContainer('postgres');
    if (c) {
      containers.push(c);
      adminUrl = c.url;
      pg = hostPort(adminUrl, 5432);
    }
  }
  if (!(await reachable(nats.host, nats.port))) {
    const c = await startContainer('nats');
    if (c) {
      containers.push(c);
      natsUrl = c.url;
      nats = hostPort(natsUrl.replace(/^nats:/, 'http:'), 4222);
    }
  }

  let databaseUrl = '';
  let dropDatabase: (() => Promise<void>) | undefined;
  if (await reachable(pg.host, pg.port)) {
    const { createRunDatabase } = await import('./support/run-database.js');
    const created = await createRunDatabase(adminUrl, `vlt_test_${runId}`);
    databaseUrl = created.url;
    dropDatabase = created.drop;
  } else {
    missing.push(`PostgreSQL not reachable at ${pg.host}:${pg.port}`);
  }
  const natsUp = await reachable(nats.host, nats.port);
  if (!natsUp) missing.push(`NATS not reachable at ${nats.host}:${nats.port}`);

  if (missing.length && process.env.CI === 'true') {
    throw new Error(`CI=true and required services are missing: ${missing.join('; ')}`);
  }

  project.provide('databaseUrl', databaseUrl);
  project.provide('natsUrl', natsUp ? natsUrl : '');
  project.provide('busPrefix', `t${runId}`);
  project.provide('servicesMissing', missing.join('; '));
  // A speed-up only: without it, each embedded gateway initialises its own database.
  const { prepareEmbeddedTemplate } = await import('./support/embedded-template.js');
  const templateDir = await prepareEmbeddedTemplate().catch((err: Error) => {
    console.error(`embedded gateways will initialise their own databases: ${err.message}`);
    return '';
  });
  project.provide('embeddedTemplate', templateDir);

  const busPrefix = `t${runId}`;
  return async () => {
    if (dropDatabase && !process.env.VLT_KEEP_TEST_DB) await dropDatabase();
    // Streams and buckets of this run (every suite derives its prefix from the run's) would
    // otherwise pile up on a shared NATS server, run after run.
    if (natsUp) {
      const { purgeNatsPrefix } = await import('@vlt/bus');
      await purgeNatsPrefix({ servers: natsUrl, prefix: busPrefix }).catch((err: Error) =>
        console.error(`could not remove this run's NATS streams: ${err.message}`),
      );
    }
    for (const c of containers) await c.stop();
    if (templateDir) await rm(templateDir, { recursive: true, force: true });
  };
}
