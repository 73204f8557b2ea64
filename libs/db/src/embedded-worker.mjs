/**
 * The embedded database's thread: PGlite and the socket server in front of it, started by
 * startEmbeddedPostgres (embedded.ts) with { pgDir, maxConnections, initOnly } as its workerData.
 * Answers { type: 'ready', conn: 'host:port' } or { type: 'failed', message }; on
 * { type: 'usage' } answers { type: 'usage', memory } (this thread's process.memoryUsage());
 * on { type: 'stop' } closes the server and the database, answers { type: 'stopped' } and ends.
 * With initOnly it creates the cluster in pgDir, closes it, answers { type: 'initialised' }
 * and ends, serving nothing (ADR 0090).
 *
 * Plain JavaScript: a worker's entry is loaded before any TypeScript loader could run in it
 * (Node 20), and it needs nothing of the workspace.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

async function serve(port, { pgDir, maxConnections, initOnly }) {
  let db;
  try {
    db = await PGlite.create(pgDir);
  } catch (error) {
    port.postMessage({ type: 'failed', message: describe(error) });
    return;
  }
  if (initOnly) {
    await db.close();
    port.postMessage({ type: 'initialised' });
    port.close();
    return;
  }
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections });
  try {
    await server.start();
  } catch (error) {
    await db.close();
    port.postMessage({ type: 'failed', message: describe(error) });
    return;
  }
  port.on('message', async (m) => {
    if (m?.type === 'usage') port.postMessage({ type: 'usage', memory: process.memoryUsage() });
    if (m?.type !== 'stop') return;
    try {
      await server.stop();
    } finally {
      await db.close();
      port.postMessage({ type: 'stopped' });
      port.close();
    }
  });
  // getServerConn() is "host:port" once listening on port 0.
  port.postMessage({ type: 'ready', conn: server.getServerConn() });
}

if (parentPort) void serve(parentPort, workerData);

/**
 * PGlite can throw what is not an Error: its file system's ErrnoError ({ name, errno }, errno in
 * the numbering of WASI), or Emscripten's exit status.
 */
function describe(error) {
  if (error instanceof Error) return error.message;
  if (error && typeof error === 'object') {
    if ('errno' in error) return `${error.name ?? 'file system error'} (WASI errno ${error.errno})`;
    if ('status' in error) return `exited with status ${error.status}`;
  }
  return String(error);
}
