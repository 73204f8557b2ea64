/**
 * Draining on `close()` (ADR 0063). Fastify stops accepting connections and closes the idle
 * keep-alive ones once, when close starts; a connection whose request was still in flight then
 * stays open after its response, until the client or the 72 s keep-alive timeout ends it, and
 * `close()` waits for it all that time. Here, while closing:
 * - every response not yet started carries `Connection: close`, so its socket ends with it;
 * - connections that go idle later (streams whose headers left before close) are swept;
 * - after `drainMs`, whatever is still open is cut.
 */
import type { Server } from 'node:http';
import type { App } from './create-app.js';

/** How often connections that went idle during the drain are closed. */
const SWEEP_MS = 50;

export function drainOnClose(app: Pick<App, 'addHook' | 'server' | 'log'>, drainMs: number): void {
  let closing = false;
  let stopTimers = (): void => undefined;

  app.addHook('onSend', (_req, reply, payload, done) => {
    if (closing && !reply.raw.headersSent) reply.header('connection', 'close');
    done(null, payload);
  });

  app.addHook('preClose', (done) => {
    closing = true;
    const server: Server = app.server;
    if (server.listening) {
      const sweep = setInterval(() => server.closeIdleConnections(), SWEEP_MS);
      const deadline = setTimeout(() => {
        app.log.warn(
          { drainMs },
          'requests still in flight at the drain deadline; closing their connections',
        );
        server.closeAllConnections();
      }, drainMs);
      sweep.unref();
      deadline.unref();
      stopTimers = () => {
        clearInterval(sweep);
        clearTimeout(deadline);
      };
      server.once('close', stopTimers);
    }
    done();
  });

  app.addHook('onClose', (_instance, done) => {
    stopTimers();
    done();
  });
}
