/**
 * The notification stream (SSE). Each control-plane replica subscribes once to the notifier's
 * broadcasts and writes each notification to the open streams of the member it is for, so a
 * member sees every notification whichever replica their stream landed on.
 *
 * A stream never holds others back: writes go to the socket's buffer, and a client whose
 * buffer grows past MAX_BUFFERED_BYTES (it reads too slowly, or is gone without a FIN) is
 * dropped. Each heartbeat also re-checks that the caller may still read (signed out, removed
 * from the workspace, PAT revoked → the stream ends).
 */
import type { ServerResponse } from 'node:http';
import type { Bus, BusNames, ReplyHandle } from '@vlt/bus';
import { NotificationBroadcast, type NotificationView } from '@vlt/contracts';

export const MAX_BUFFERED_BYTES = 256 * 1024;
export const MAX_STREAMS_PER_USER = 10;
export const HEARTBEAT_MS = 30_000;

interface Client {
  userId: string;
  workspaceId: string;
  res: ServerResponse;
  /** Still allowed to read? Checked at each heartbeat. */
  stillAllowed: () => Promise<boolean>;
}

export interface NotificationHub {
  /** Opens a stream on `res` (headers and `event: connected` written here). */
  open(client: Client): { ok: true } | { ok: false; reason: 'too_many_streams' };
  /** For tests and metrics. */
  size(): number;
  stop(): Promise<void>;
}

export async function startNotificationHub(deps: {
  bus: Bus;
  names: BusNames;
  logger: { warn(obj: object, msg?: string): void };
  heartbeatMs?: number;
}): Promise<NotificationHub> {
  const byWorkspace = new Map<string, Set<Client>>();
  const perUser = new Map<string, number>();

  const drop = (c: Client) => {
    const set = byWorkspace.get(c.workspaceId);
    if (set?.delete(c)) {
      if (set.size === 0) byWorkspace.delete(c.workspaceId);
      const n = (perUser.get(c.userId) ?? 1) - 1;
      if (n <= 0) perUser.delete(c.userId);
      else perUser.set(c.userId, n);
    }
    if (!c.res.destroyed) c.res.destroy();
  };

  /** Writes unless the client is too far behind; then it is dropped (it can reconnect and list). */
  const write = (c: Client, chunk: string) => {
    if (c.res.destroyed || c.res.writableEnded) return drop(c);
    if (c.res.writableLength > MAX_BUFFERED_BYTES) {
      deps.logger.warn({ userId: c.userId }, 'notification stream dropped: client too slow');
      return drop(c);
    }
    c.res.write(chunk);
  };

  const deliver = (data: unknown) => {
    const parsed = NotificationBroadcast.safeParse(data);
    if (!parsed.success) return;
    const clients = byWorkspace.get(parsed.data.workspaceId);
    if (!clients) return;
    const byUser = new Map<string, NotificationView[]>();
    for (const item of parsed.data.items) {
      const list = byUser.get(item.userId);
      if (list) list.push(item.notification);
      else byUser.set(item.userId, [item.notification]);
    }
    for (const c of [...clients]) {
      for (const n of byUser.get(c.userId) ?? []) {
        write(c, `event: notification\ndata: ${JSON.stringify(n)}\n\n`);
      }
    }
  };

  const sub: ReplyHandle = await deps.bus.subscribe(deps.names.broadcast.notificationsWildcard, deliver);

  const heartbeat = setInterval(() => {
    for (const set of byWorkspace.values()) {
      for (const c of [...set]) {
        write(c, ': heartbeat\n\n');
        c.stillAllowed().then(
          (ok) => ok || drop(c),
          () => undefined, // the database is down: keep serving what the bus brings
        );
      }
    }
  }, deps.heartbeatMs ?? HEARTBEAT_MS);
  heartbeat.unref();

  return {
    open(client) {
      const n = perUser.get(client.userId) ?? 0;
      if (n >= MAX_STREAMS_PER_USER) return { ok: false, reason: 'too_many_streams' };
      perUser.set(client.userId, n + 1);
      let set = byWorkspace.get(client.workspaceId);
      if (!set) byWorkspace.set(client.workspaceId, (set = new Set()));
      set.add(client);
      client.res.on('close', () => drop(client));
      client.res.on('error', () => drop(client));
      client.res.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      client.res.write('event: connected\ndata: {}\n\n');
      return { ok: true };
    },
    size() {
      let n = 0;
      for (const s of byWorkspace.values()) n += s.size;
      return n;
    },
    async stop() {
      clearInterval(heartbeat);
      await sub.stop();
      for (const set of byWorkspace.values()) for (const c of [...set]) c.res.end();
      byWorkspace.clear();
      perUser.clear();
    },
  };
}
