/**
 * The embedded database's thread: PGlite and the socket server in front of it, started by
 * startEmbeddedPostgres (embedded.ts) with { pgDir, maxConnections } as its workerData.
 * Answers { type: 'ready', conn: 'host:port' } or { type: 'failed', message }; on
 * { type: 'stop' } closes the server and the database, answers { type: 'stopped' } and ends.
 *
 * Plain JavaScript: a worker's entry is loaded before any TypeScript loader could run in it
 * (Node 20), and it needs nothing of the workspace.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

async function serve(port, { pgDir, maxConnections }) {
  let db;
  try {
    db = await PGlite.create(pgDir);
  } catch (error) {
    port.postMessage({ type: 'failed', message: error.message });
    return;
  }
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections });
  try {
    await server.start();
  } catch (error) {
    await db.close();
    port.postMessage({ type: 'failed', message: error.message });
    return;
  }
  port.on('message', async (m) => {
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
