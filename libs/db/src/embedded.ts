/**
 * Embedded PostgreSQL for the all-in-one process: PGlite (PostgreSQL compiled to wasm) persisted
 * on disk and served over the PostgreSQL wire protocol on loopback, so the same node-postgres
 * code paths (Prisma adapter, migrations, raw pg) work against it and against a real server.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export interface EmbeddedPostgres {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  /** Closes connections, stops listening and flushes the database to disk. */
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /**
   * Sockets accepted at once (pglite-socket's default is 1). Each pg pool connection is one
   * socket; they all share PGlite's single session, queued query by query.
   */
  maxConnections?: number;
}

/**
 * Starts PGlite on `<dataDir>/pg` (created on first start) and serves it on 127.0.0.1 at an
 * ephemeral port. Loopback only: there is no authentication in front of it.
 *
 * One session for every connection: while a transaction is open on one connection, queries of
 * the others wait until it ends, and session state (SET, advisory locks, temp tables, named
 * prepared statements) is shared.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  opts: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const pgDir = path.resolve(dataDir, 'pg');
  await mkdir(pgDir, { recursive: true });
  const releaseDir = await lockDataDir(path.resolve(dataDir, 'pg.lock'));
  let db: PGlite;
  try {
    db = await PGlite.create(pgDir);
  } catch (error) {
    await releaseDir();
    throw error;
  }
  const server = new PGLiteSocketServer({
    db,
    host: '127.0.0.1',
    port: 0,
    maxConnections: opts.maxConnections ?? 32,
  });
  try {
    await server.start();
  } catch (error) {
    await db.close();
    await releaseDir();
    throw error;
  }
  // getServerConn() is "host:port" once listening on port 0.
  const url = `postgresql://postgres@${server.getServerConn()}/postgres`;
  let stopped: Promise<void> | undefined;
  return {
    url,
    stop: () =>
      (stopped ??= (async () => {
        await server.stop();
        await db.close();
        await releaseDir();
      })()),
  };
}

/**
 * PGlite takes no lock of its own: two processes on one data directory would both write it and
 * corrupt it. A pid file refuses the second one; a file left by a dead process is taken over.
 */
async function lockDataDir(lockPath: string): Promise<() => Promise<void>> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await writeFile(lockPath, String(process.pid), { flag: 'wx' });
      return () => rm(lockPath, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number((await readFile(lockPath, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) {
        throw new Error(`${path.dirname(lockPath)} is in use by process ${owner} (${lockPath})`);
      }
      await rm(lockPath, { force: true }); // stale: its process is gone
    }
  }
  throw new Error(`could not lock ${lockPath}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0); // signal 0: existence check only
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
