import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * Ports for services a test starts later, once their URL is known.
 *
 * A port the kernel picks (listen on 0) comes from the ephemeral range, the same range every
 * outgoing connection on the machine takes its source port from: between the pick and the
 * service's listen, seconds later, a connection to PostgreSQL, NATS or a mock can take it, and
 * the service fails with EADDRINUSE. So ports are picked at random below that range, where no
 * outgoing connection lands (on the CI machine, 800 connections and listens on port 0 all
 * took ports from 32768 up), and checked by binding them. What remains is two test workers
 * picking the same port in the same seconds: one chance in about 22,000 per pair of picks.
 */
const FIRST_PORT = 10_000;

function ephemeralLow(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const n = Number(low);
    if (Number.isInteger(n) && n > 0) return n;
  } catch {
    // Not Linux, or not readable: the IANA dynamic range starts at 49152, and macOS uses it.
  }
  return 49_152;
}

function listen(server: net.Server, port: number, host: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      server.off('listening', onListening);
      if (err.code === 'EADDRINUSE' || err.code === 'EACCES') resolve(false);
      else reject(err);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve(true);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

/** A free port, held by a listener of our own until `release`. */
export async function reservePort(
  host = '127.0.0.1',
): Promise<{ port: number; release: () => Promise<void> }> {
  const server = net.createServer();
  const low = ephemeralLow();
  let port = 0;
  // Where the ephemeral range leaves no room below it, fall back to the kernel's pick.
  for (let tries = 0; low - FIRST_PORT > 1_000 && tries < 50; tries++) {
    const candidate = FIRST_PORT + Math.floor(Math.random() * (low - FIRST_PORT));
    if (await listen(server, candidate, host)) {
      port = candidate;
      break;
    }
  }
  if (port === 0) {
    await listen(server, 0, host);
    port = (server.address() as net.AddressInfo).port;
  }
  return { port, release: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A port nobody listens on right now, picked where outgoing connections do not land. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const { port, release } = await reservePort(host);
  await release();
  return port;
}
