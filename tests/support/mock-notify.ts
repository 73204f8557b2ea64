/**
 * A local HTTPS stand-in for the providers the notifier talks to, on one port:
 *  - bot chat (`chatbot_a`, Bot API shape): `/bot<token>/getMe|sendMessage|editMessageText|getUpdates`;
 *  - team chat (`chatbot_b`, Web API shape): `/api/chat.postMessage|chat.update` with a bearer token;
 *  - mobile push: `POST /push` with a JSON array of messages, one ticket each.
 * Every call is recorded; `failWith` makes calls fail (an outage) until it is cleared.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface NotifyCall {
  api: 'chat_a' | 'chat_b' | 'push';
  method: string;
  /** The bot token (chat_a path) or bearer token (chat_b); '' for push. */
  token: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON as the provider or client sent it
  body: any;
}

export interface MockNotify {
  readonly baseUrl: string;
  readonly pushUrl: string;
  readonly calls: NotifyCall[];
  /** Updates `getUpdates` returns (raw Bot API update objects). */
  updates: unknown[];
  /** Push tokens answered with `DeviceNotRegistered`. */
  unregistered: Set<string>;
  /** Answer matching calls with this status (and an error body) until cleared with `null`. */
  failWith(status: number | null, match?: (c: { api: string; method: string }) => boolean): void;
  /**
   * Parks matching calls unanswered and unrecorded (a provider that has not processed them yet);
   * one whose client goes away while parked is dropped. `release()` processes the rest.
   */
  hold(match: (c: { api: string; method: string }) => boolean): void;
  release(): void;
  /** Calls parked right now. */
  readonly held: number;
  /** Calls of one kind, e.g. `sent('chat_a', 'sendMessage')`. */
  sent(api: NotifyCall['api'], method?: string): NotifyCall[];
  close(): Promise<void>;
}

export async function startMockNotify(tls: { key: string; cert: string }): Promise<MockNotify> {
  const calls: NotifyCall[] = [];
  let failure: { status: number; match: (c: { api: string; method: string }) => boolean } | null = null;
  let messageId = 1000;
  let holdMatch: ((c: { api: string; method: string }) => boolean) | null = null;
  const parked = new Set<() => void>();
  // Read by the handler at request time; the returned object is this one.
  const mock = { updates: [] as unknown[], unregistered: new Set<string>() };
  const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON as the provider or client sent it
      let body: any = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        body = text;
      }
      const url = req.url ?? '';
      const send = (status: number, json: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(json));
      };
      let call: NotifyCall;
      const a = /^\/bot([^/]+)\/(\w+)$/.exec(url);
      const b = /^\/api\/([\w.]+)$/.exec(url);
      if (a) call = { api: 'chat_a', method: a[2]!, token: decodeURIComponent(a[1]!), body };
      else if (b)
        call = {
          api: 'chat_b',
          method: b[1]!,
          token: (req.headers.authorization ?? '').replace(/^Bearer /, ''),
          body,
        };
      else if (url === '/push') call = { api: 'push', method: 'send', token: '', body };
      else return send(404, { ok: false, description: 'Not Found' });

      if (call.method === 'getMe')
        return send(200, { ok: true, result: { id: 77, is_bot: true, username: 'vault_bot' } });
      if (failure && failure.match(call)) return send(failure.status, { ok: false, error: 'outage' });
      if (holdMatch && holdMatch(call)) {
        const go = () => {
          parked.delete(go);
          if (!res.destroyed) answer(call);
        };
        parked.add(go);
        res.on('close', () => parked.delete(go));
        return;
      }
      answer(call);
    });
    const answer = (call: NotifyCall) => {
      const body = call.body;
      const send = (status: number, json: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(json));
      };
      calls.push(call);
      switch (`${call.api}:${call.method}`) {
        case 'chat_a:sendMessage':
          return send(200, { ok: true, result: { message_id: ++messageId, chat: { id: body?.chat_id } } });
        case 'chat_a:editMessageText':
          return send(200, { ok: true, result: true });
        case 'chat_a:getUpdates':
          return send(200, { ok: true, result: mock.updates });
        case 'chat_b:chat.postMessage':
          return send(200, { ok: true, channel: body?.channel, ts: `${Date.now()}.${++messageId}` });
        case 'chat_b:chat.update':
          return send(200, { ok: true });
        case 'push:send':
          return send(200, {
            data: (Array.isArray(body) ? body : []).map((m: { to: string }) =>
              mock.unregistered.has(m.to)
                ? { status: 'error', message: 'not registered', details: { error: 'DeviceNotRegistered' } }
                : { status: 'ok', id: `ticket-${++messageId}` },
            ),
          });
        default:
          return send(404, { ok: false, description: 'method not found' });
      }
    };
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const baseUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const self = Object.defineProperties(mock, {
    held: { get: () => parked.size },
  }) as typeof mock & { readonly held: number };
  return Object.assign(self, {
    baseUrl,
    pushUrl: `${baseUrl}/push`,
    calls,
    failWith(status: number | null, match: (c: { api: string; method: string }) => boolean = () => true) {
      failure = status === null ? null : { status, match };
    },
    hold(match: (c: { api: string; method: string }) => boolean) {
      holdMatch = match;
    },
    release() {
      holdMatch = null;
      for (const go of [...parked]) go();
    },
    sent(api: NotifyCall['api'], method?: string) {
      return calls.filter((c) => c.api === api && (method === undefined || c.method === method));
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  });
}
