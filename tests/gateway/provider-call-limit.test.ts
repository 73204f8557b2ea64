/**
 * VLT_UPSTREAM_MAX_CONNECTIONS (ADR 0073): a data plane keeps at most that many calls open to
 * one provider origin. One more is answered 503 with Retry-After at once, recorded, and never
 * sent, instead of waiting unanswered behind streams that may stay open for minutes.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { pollAudit } from '../support/api-client.js';
import { startProviderGateway, type ProviderGateway } from '../support/provider-gateway.js';

let fx: ProviderGateway;
let token: string;
let agentId: string;
/** Provider responses of `/hold` still open, and how many `/hold` requests it was sent. */
const held: ServerResponse[] = [];
let holdRequests = 0;
let closedHolds = 0;

beforeAll(async () => {
  fx = await startProviderGateway(
    (req, res) => {
      if (req.url === '/rest/api/3/hold') {
        holdRequests++;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"text":"first"}\n\n');
        held.push(res);
        res.on('close', () => closedHolds++);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    },
    { VLT_UPSTREAM_MAX_CONNECTIONS: '2' },
  );
  ({ token, agentId } = await fx.bind({}));
});
afterAll(async () => {
  for (const r of held.splice(0)) r.end();
  await fx?.close();
});

function call(path: string, stream: boolean) {
  return request(`${fx.gw.baseUrl}/v1/vault/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'B',
      connectionId: fx.connectionId,
      method: 'GET',
      url: `${fx.site}${path}`,
      stream,
    }),
  });
}

async function openHold() {
  const res = await call('/rest/api/3/hold', true);
  expect(res.statusCode).toBe(200);
  const first = await res.body[Symbol.asyncIterator]().next();
  expect(String(first.value)).toContain('"first"');
  return res;
}

describe('calls open at once to one provider', () => {
  it('one call over the limit is answered 503 with Retry-After, recorded as busy, and never sent', async () => {
    const open = [await openHold(), await openHold()];
    for (const stream of [true, false]) {
      const res = await call(stream ? '/rest/api/3/hold' : '/rest/api/3/myself', stream);
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      const text = await res.body.text();
      expect(text).not.toContain(fx.creds.apiToken);
      const body = JSON.parse(text) as { error: string; code: string; retryAfter: number; auditId: string };
      expect(body).toMatchObject({ code: 'UPSTREAM_BUSY', retryAfter: 1 });
      expect(body.error).toMatch(/too many calls are open to this provider/);
      const rows = await pollAudit(fx.admin, { agentId, action: 'execution_error' }, (e) =>
        e.some((x) => x.auditId === body.auditId),
      );
      expect(rows.find((x) => x.auditId === body.auditId)?.metadata.error).toBe('busy');
    }
    expect(holdRequests).toBe(2);

    // The agent hangs up one stream: the gateway lets go of the provider, and the slot is free.
    open[0]!.body.destroy();
    const deadline = Date.now() + 5_000;
    while (closedHolds < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(closedHolds).toBe(1);
    const again = await openHold();
    expect(holdRequests).toBe(3);
    again.body.destroy();
    open[1]!.body.destroy();
  });
});
