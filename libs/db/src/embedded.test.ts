import { access, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrismaClient } from './client.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded.js';
import { applyMigrations } from './migrate.js';
import { openDatabase } from './open-database.js';
import type { PrismaClient } from './generated/prisma/client.js';
import {
  expectCliCompatibleHistory,
  expectDatabaseConstraints,
  expectJtiSingleUse,
  expectRoundTrip,
  migrationFolders,
} from './testing/shared-checks.js';

// PGlite needs no server, so these always run.
describe('embedded PostgreSQL (PGlite)', () => {
  let dataDir: string;
  let db: EmbeddedPostgres;
  let prisma: PrismaClient;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'vlt-embedded-'));
    db = await startEmbeddedPostgres(dataDir);
    prisma = createPrismaClient(db.url, { max: 4 });
  });
  afterAll(async () => {
    await prisma?.$disconnect();
    await db?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('listens on loopback at an ephemeral port', () => {
    expect(db.url).toMatch(/^postgresql:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/);
    expect(db.url).not.toContain(':5432/');
  });

  it('serves a new directory from a thread that did not create its cluster (ADR 0090)', async () => {
    // Created and served by one thread, the cluster left about 225 MiB of array buffers in that
    // thread (and more memory outside them) for as long as it served. Now: about 8 MiB.
    const { arrayBuffers } = await db.threadMemory();
    expect(arrayBuffers).toBeLessThan(64 * 1024 * 1024);
  });

  it('applies the migrations once even when asked twice at the same time', async () => {
    // One PGlite session serves every connection, so only the in-process queue keeps two
    // engines from applying the same migration together.
    const [a, b] = await Promise.all([applyMigrations(db.url), applyMigrations(db.url)]);
    expect([...a.applied, ...b.applied]).toEqual(await migrationFolders());
    expect(await applyMigrations(db.url)).toEqual({ applied: [] });
    await expectCliCompatibleHistory(db.url);
  });

  it('serves several connections at once', async () => {
    const clients = Array.from({ length: 3 }, () => new pg.Client({ connectionString: db.url }));
    await Promise.all(clients.map((c) => c.connect()));
    const answers = await Promise.all(
      clients.map((c, i) => c.query<{ n: number }>('SELECT $1::int AS n', [i])),
    );
    expect(answers.map((r) => r.rows[0]?.n)).toEqual([0, 1, 2]);
    await Promise.all(clients.map((c) => c.end()));
  });

  it('round-trips rows, Json, enums and cascades', () => expectRoundTrip(prisma));
  it('lets exactly one insert of an assertion jti succeed', () => expectJtiSingleUse(prisma));
  it('enforces the constraints the services rely on', () => expectDatabaseConstraints(prisma));

  it('runs statements off the calling thread: a slow one does not stall its event loop', async () => {
    // PGlite executes synchronously in wasm; on the request thread a 500 ms statement froze
    // every timer and request of the process for 500 ms.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    try {
      await client.query('SELECT pg_sleep(0.5)');
    } finally {
      clearInterval(timer);
      await client.end();
    }
    expect(ticks).toBeGreaterThanOrEqual(10);
  });

  it('refuses a second server on the same data directory', async () => {
    await expect(startEmbeddedPostgres(dataDir)).rejects.toThrow(/in use by process/);
  });

  it('keeps the data across a restart', async () => {
    const marker = await prisma.workspace.create({ data: { name: 'survives-restart' } });
    await prisma.$disconnect();
    await db.stop();
    await expect(db.threadMemory()).rejects.toThrow(/stopping/);

    db = await startEmbeddedPostgres(dataDir);
    prisma = createPrismaClient(db.url, { max: 4 });
    expect(await applyMigrations(db.url)).toEqual({ applied: [] });
    expect(await prisma.workspace.findUnique({ where: { id: marker.id } })).toMatchObject({
      name: 'survives-restart',
    });
  });
});

describe('embedded PostgreSQL that cannot be created', () => {
  it('fails to start with the reason, and leaves the directory unlocked (ADR 0090)', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'vlt-embedded-bad-'));
    try {
      // initdb makes pg/global a directory; a file there stops it.
      await mkdir(path.join(dataDir, 'pg'));
      await writeFile(path.join(dataDir, 'pg', 'global'), 'not a directory');
      // PGlite throws its file system's { name, errno }, which once read "undefined" here.
      await expect(startEmbeddedPostgres(dataDir)).rejects.toThrow(
        /^embedded database failed to start: ErrnoError \(WASI errno \d+\)$/,
      );
      await expect(access(path.join(dataDir, 'pg.lock'))).rejects.toThrow(/ENOENT/);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('openDatabase', () => {
  it('starts, migrates and closes the embedded database when no URL is given', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'vlt-open-'));
    try {
      // A lock file left by a process that no longer exists must not block the start.
      await writeFile(path.join(dataDir, 'pg.lock'), '999999999');
      const opened = await openDatabase({ dataDir, migrate: true, databaseUrl: '  ' });
      expect(opened.embedded).toBe(true);
      expect(await opened.prisma.user.count()).toBe(0);
      await opened.close();
      await opened.close(); // idempotent
      const again = await startEmbeddedPostgres(dataDir); // the lock was released
      await again.stop();
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
