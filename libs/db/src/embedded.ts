/**
 * Embedded PostgreSQL for the all-in-one process: PGlite (PostgreSQL compiled to wasm) persisted
 * on disk and served over the PostgreSQL wire protocol on loopback, so the same node-postgres
 * code paths (Prisma adapter, migrations, raw pg) work against it and against a real server.
 *
 * PGlite runs in a worker thread of its own (embedded-worker.mjs): every statement costs it about
 * a millisecond of CPU and an audit batch several, which on the request thread was a third of
 * the all-in-one's busy time and a stall of every request behind it (ADR 0061). A new directory's
 * cluster is created by a worker of its own that ends before the serving one starts (ADR 0090).
 */
import { access, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';

/** What embedded-worker.mjs is started with and answers. */
interface EmbeddedWorkerData {
  pgDir: string;
  maxConnections: number;
  /** Create the cluster, close it and end, serving nothing. */
  initOnly?: boolean;
}
type EmbeddedWorkerMessage =
  | { type: 'ready'; conn: string }
  | { type: 'initialised' }
  | { type: 'failed'; message: string }
  | { type: 'usage'; memory: NodeJS.MemoryUsage }
  | { type: 'stopped' };

export interface EmbeddedPostgres {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  /** Closes connections, stops listening and flushes the database to disk. */
  stop(): Promise<void>;
  /**
   * The database thread's `process.memoryUsage()`: its own heap, external memory and array
   * buffers (`rss` is the whole process's).
   */
  threadMemory(): Promise<NodeJS.MemoryUsage>;
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
  try {
    if (!(await hasCluster(pgDir))) await createCluster(pgDir);
  } catch (error) {
    await releaseDir();
    throw error;
  }
  const worker = startWorker({ pgDir, maxConnections: opts.maxConnections ?? 32 });
  let stopping = false;
  const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  worker.once('exit', (code) => {
    if (stopping) return;
    // The database is gone and will not come back in this process: stop the process rather
    // than answer every request with a database error.
    void releaseDir();
    setImmediate(() => {
      throw new Error(`the embedded database stopped unexpectedly (worker exit ${code})`);
    });
  });
  const first = await firstAnswer(worker);
  if (first.type !== 'ready') {
    stopping = true;
    await worker.terminate();
    await releaseDir();
    throw startFailure(first);
  }
  const url = `postgresql://postgres@${first.conn}/postgres`;
  let stopped: Promise<void> | undefined;
  return {
    url,
    stop: () =>
      (stopped ??= (async () => {
        stopping = true;
        // The worker closes the server and flushes the database, then ends on its own.
        worker.postMessage({ type: 'stop' });
        const late = setTimeout(() => void worker.terminate(), STOP_TIMEOUT_MS);
        await ended;
        clearTimeout(late);
        await releaseDir();
      })()),
    threadMemory: () => {
      if (stopping) return Promise.reject(new Error('the embedded database is stopping'));
      return new Promise((resolve, reject) => {
        const onMessage = (m: EmbeddedWorkerMessage) => {
          if (m.type !== 'usage') return;
          worker.off('message', onMessage).off('exit', onExit);
          resolve(m.memory);
        };
        // A thread that ends first never answers.
        const onExit = () => {
          worker.off('message', onMessage);
          reject(new Error('the embedded database stopped'));
        };
        worker.on('message', onMessage).once('exit', onExit);
        worker.postMessage({ type: 'usage' });
      });
    },
  };
}

/** Beside this module, and beside the all-in-one's bundle in the production build. */
function startWorker(data: EmbeddedWorkerData): Worker {
  // No process flags: some (--cpu-prof) are refused in workers.
  return new Worker(new URL('./embedded-worker.mjs', import.meta.url), { workerData: data, execArgv: [] });
}

/** The worker's first message, or its error as a failure. */
function firstAnswer(worker: Worker): Promise<EmbeddedWorkerMessage> {
  return new Promise((resolve) => {
    worker.once('message', resolve);
    worker.once('error', (err) => resolve({ type: 'failed', message: err.message }));
    worker.once('exit', (code) => resolve({ type: 'failed', message: `worker exit ${code}` }));
  });
}

function startFailure(answer: EmbeddedWorkerMessage): Error {
  const why = answer.type === 'failed' ? answer.message : answer.type;
  return new Error(`embedded database failed to start: ${why}`);
}

/** PostgreSQL writes PG_VERSION into every cluster directory, and PGlite looks for it too. */
async function hasCluster(pgDir: string): Promise<boolean> {
  return access(path.join(pgDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
}

/**
 * Creating a cluster (initdb) leaves PGlite's thread holding several hundred MB that it never
 * gives back, for as long as the database is served. Made by a worker of its own that then
 * ends, that memory goes with its thread (ADR 0090).
 */
async function createCluster(pgDir: string): Promise<void> {
  const worker = startWorker({ pgDir, maxConnections: 0, initOnly: true });
  const ended = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const answer = await firstAnswer(worker);
  if (answer.type !== 'initialised') {
    await worker.terminate();
    throw startFailure(answer);
  }
  await ended;
}

/** How long the worker gets to flush the database before it is terminated. */
const STOP_TIMEOUT_MS = 15_000;

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
