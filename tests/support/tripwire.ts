/**
 * Listeners that must never be contacted. They stand where an SSRF bypass would land
 * (127.0.0.2 and [::1], both outside VLT_SSRF_ALLOW_CIDRS=127.0.0.1/32) and record every TCP
 * connection, whatever protocol follows. Using the mock's own port where the OS allows means an
 * allowlist entry that differs from the legitimate upstream only by address is a real trap.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TripwireHit {
  listener: string;
  remoteAddress: string | undefined;
  at: number;
}

export interface Tripwire {
  /** Host as written in a URL (`127.0.0.2`, `[::1]`). */
  readonly urlHost: string;
  readonly port: number;
  readonly hits: TripwireHit[];
  readonly origin: string;
}

export interface Tripwires {
  v4: Tripwire;
  v6: Tripwire;
  /** Every connection seen by any listener. */
  hits(): TripwireHit[];
  close(): Promise<void>;
}

async function listen(host: string, urlHost: string, preferredPort: number, sink: TripwireHit[]) {
  const hits: TripwireHit[] = [];
  const server = net.createServer((socket) => {
    const hit = { listener: `${urlHost}`, remoteAddress: socket.remoteAddress, at: Date.now() };
    hits.push(hit);
    sink.push(hit);
    socket.destroy();
  });
  const tryListen = (port: number) =>
    new Promise<boolean>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        if (err.code === 'EADDRINUSE' && port !== 0) resolve(false);
        else reject(err);
      };
      server.once('error', onError);
      server.listen({ port, host, ipv6Only: host.includes(':') }, () => {
        server.off('error', onError);
        resolve(true);
      });
    });
  if (!(await tryListen(preferredPort))) await tryListen(0);
  const port = (server.address() as AddressInfo).port;
  const wire: Tripwire = { urlHost, port, hits, origin: `https://${urlHost}:${port}` };
  return { wire, server };
}

export async function startTripwires(preferredPort = 0): Promise<Tripwires> {
  const all: TripwireHit[] = [];
  const v4 = await listen('127.0.0.2', '127.0.0.2', preferredPort, all);
  const v6 = await listen('::1', '[::1]', preferredPort, all);
  return {
    v4: v4.wire,
    v6: v6.wire,
    hits: () => [...all],
    close: async () => {
      await Promise.all(
        [v4.server, v6.server].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
      );
    },
  };
}
