/**
 * stream: true and download: true on Model B — the provider body reaches the agent as it is
 * produced, filtered per SSE event by the policy's response rules (also when a value to redact
 * is split across network chunks), with the size limit enforced and one terminal audit row.
 */
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { http, pollAudit, type Admin } from '../support/api-client.js';
import type { InProcessGateway } from '../support/in-process-gateway.js';
import { startProviderGateway, type ProviderGateway } from '../support/provider-gateway.js';

const creds = { email: 'bot@tracker.test', apiToken: `tok-${randomBytes(12).toString('hex')}` };
const BINARY = randomBytes(4096);
const hits = new Map<string, number>();
/** Set when the provider sees the agent's slow stream closed from our side. */
let slowClosed = false;
let fx: ProviderGateway;
let site: string;
let gw: InProcessGateway;
let admin: Admin;
let token: string;
let agentId: string;
let connectionId: string;
let policyId: string;

/** SSE where one e-mail address is cut in the middle by the chunk boundary. */
async function writeSse(res: ServerResponse) {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const events = [
    'data: {"text":"contact alice@example.com today"}\n\n',
    'data: {"text":"second: bob@exam',
    'ple.org end"}\n\n',
    'data: plain text carol@example.net\n\n',
  ];
  for (const e of events) {
    res.write(e);
    await new Promise((r) => setTimeout(r, 15));
  }
  res.end();
}

beforeAll(async () => {
  const expected = `Basic ${Buffer.from(`${creds.email}:${creds.apiToken}`).toString('base64')}`;
  fx = await startProviderGateway(
    (req, res) => {
      hits.set(req.url ?? '', (hits.get(req.url ?? '') ?? 0) + 1);
      if (req.headers.authorization !== expected) return res.writeHead(401).end();
      if (req.url === '/rest/api/3/events') return void writeSse(res);
      if (req.url === '/rest/api/3/huge-event') {
        // One event, then more than the filter may hold of an unfinished one (1 MiB bound).
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"text":"first"}\n\n');
        setTimeout(() => res.write(`data: "${'x'.repeat((1 << 20) + 1024)}`), 30);
        setTimeout(() => res.end('"\n\n'), 1_000);
        return;
      }
      if (req.url === '/rest/api/3/lenient') {
        // One event, then one only a lenient JSON reader takes (a trailing comma): under a
        // field rule it can be neither filtered nor passed.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"text":"first"}\n\n');
        setTimeout(() => res.end('data: {"text":"second","ssn":"123-45-6789",}\n\n'), 30);
        return;
      }
      if (req.url === '/rest/api/3/cut') {
        // One event, then the provider's connection dies mid-body.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"text":"first"}\n\n');
        setTimeout(() => res.socket?.destroy(), 30);
        return;
      }
      if (req.url === '/rest/api/3/slow') {
        // One event, then nothing until the gateway lets go of the request (or 10 s).
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"text":"first"}\n\n');
        const timer = setTimeout(() => res.end(), 10_000);
        res.on('close', () => {
          clearTimeout(timer);
          slowClosed = true;
        });
        return;
      }
      if (req.url === '/rest/api/3/attachment/1') {
        res.writeHead(200, {
          'content-type': 'application/octet-stream',
          'content-length': String(BINARY.length),
        });
        return res.end(BINARY);
      }
      if (req.url === '/rest/api/3/big') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        return res.end('x'.repeat(200_000));
      }
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ errorMessages: ['boom'] }));
    },
    {},
    creds,
  );
  ({ gw, admin, site, connectionId } = fx);
  ({ token, agentId, policyId } = await fx.bind({
    // Scoped away from attachments: a binary download that a rule applies to is refused
    // (tests/gateway/response-hardening.test.ts), so the raw-bytes case needs no rule on it.
    response: [
      {
        label: 'no e-mail',
        match: { urlPattern: '^/rest/api/3/(events|big|nope|myself|slow|cut|huge-event)$' },
        filter: { redact: [{ type: 'email' }] },
      },
      { label: 'no ssn', match: { urlPattern: '^/rest/api/3/lenient$' }, filter: { denyFields: ['ssn'] } },
    ],
  }));
});
afterAll(async () => {
  await fx?.close();
});

function call(body: Record<string, unknown>) {
  return request(`${gw.baseUrl}/v1/vault/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'B', connectionId, method: 'GET', ...body }),
  });
}

/** What the agent read of a stream that must end in an error (a cut connection). */
async function readUntilCut(body: AsyncIterable<unknown>): Promise<string> {
  let text = '';
  await expect(
    (async () => {
      for await (const chunk of body) text += String(chunk);
    })(),
  ).rejects.toThrow();
  return text;
}

/**
 * Streams `path`, which sends one event and is then cut: the agent got a 200 head and that
 * first event. Returns what the agent read and the call's execution_requested id.
 */
async function streamCutAfterFirst(path: string): Promise<{ text: string; requestAuditId: unknown }> {
  const res = await call({ url: `${site}${path}`, stream: true });
  expect(res.statusCode).toBe(200);
  const requestAuditId = res.headers['x-vlt-audit-id'];
  const text = await readUntilCut(res.body);
  expect(text).toContain('"first"');
  return { text, requestAuditId };
}

/**
 * The call's terminal audit rows once one is there: the error kinds of its execution_error
 * rows and how many execution_completed rows it has (a call has exactly one terminal event).
 */
async function terminalOf(requestAuditId: unknown): Promise<{ errors: unknown[]; completed: number }> {
  const ofCall = (rows: Awaited<ReturnType<typeof pollAudit>>) =>
    rows.filter((x) => x.metadata.requestAuditId === requestAuditId);
  const errors = ofCall(
    await pollAudit(admin, { agentId, action: 'execution_error' }, (e) => ofCall(e).length > 0, 10_000),
  );
  const completed = ofCall(await pollAudit(admin, { agentId, action: 'execution_completed' }, () => true));
  return { errors: errors.map((e) => e.metadata.error), completed: completed.length };
}

describe('stream: true', () => {
  it('relays SSE without an envelope, redacting every e-mail even when split across chunks', async () => {
    const res = await call({ url: `${site}/rest/api/3/events`, stream: true });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/event-stream');
    const text = await res.body.text();
    expect(text).not.toMatch(/alice@|bob@|carol@|example\.(com|org|net)/);
    const data = text.split('\n').filter((l) => l.startsWith('data:'));
    expect(data).toHaveLength(3);
    expect(JSON.parse(data[0]!.slice(5)).text).toMatch(/^contact \S+ today$/);
    expect(JSON.parse(data[1]!.slice(5)).text).toMatch(/^second: \S+ end$/);
    const rows = await pollAudit(
      admin,
      { agentId, action: 'execution_completed' },
      (e) => e.some((x) => x.metadata.stream === true),
      10_000,
    );
    const row = rows.find((x) => x.metadata.stream === true)!;
    expect(row.metadata.responseStatus).toBe(200);
    expect(row.metadata.dataSize).toBeGreaterThan(0);
    // The head names the call's execution_requested event, which the terminal event points to.
    const auditId = res.headers['x-vlt-audit-id'];
    expect(auditId).toMatch(/^[0-9a-f-]{36}$/);
    expect(row.metadata.requestAuditId).toBe(auditId);
    const requested = await pollAudit(admin, { agentId, action: 'execution_requested' }, (e) =>
      e.some((x) => x.auditId === auditId),
    );
    expect(requested.find((x) => x.auditId === auditId)!.action).toBe('execution_requested');
  });

  it('records one client_closed terminal event when the agent hangs up, and lets go of the provider', async () => {
    const res = await call({ url: `${site}/rest/api/3/slow`, stream: true });
    expect(res.statusCode).toBe(200);
    const requestAuditId = res.headers['x-vlt-audit-id'];
    expect(typeof requestAuditId).toBe('string');
    const first = await res.body[Symbol.asyncIterator]().next();
    expect(String(first.value)).toContain('"first"');
    res.body.destroy();
    const deadline = Date.now() + 5_000;
    while (!slowClosed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(slowClosed).toBe(true);
    expect(await terminalOf(requestAuditId)).toEqual({ errors: ['client_closed'], completed: 0 });
  });

  it('records one execution_error when the provider dies mid-stream, and cuts the agent stream', async () => {
    const { requestAuditId } = await streamCutAfterFirst('/rest/api/3/cut');
    expect(await terminalOf(requestAuditId)).toEqual({ errors: ['stream_interrupted'], completed: 0 });
  });

  it('cuts a live stream at an event the filter cannot hold and records filter_limit once', async () => {
    // What came before the oversized event arrived; none of the oversized event did.
    const { text, requestAuditId } = await streamCutAfterFirst('/rest/api/3/huge-event');
    expect(text).not.toContain('xxxx');
    expect(await terminalOf(requestAuditId)).toEqual({ errors: ['filter_limit'], completed: 0 });
  });

  it('cuts a live stream at an event field rules cannot be applied to and records response_unfilterable once', async () => {
    const { text, requestAuditId } = await streamCutAfterFirst('/rest/api/3/lenient');
    // Neither the denied field nor the rest of the event it is in reached the agent.
    expect(text).not.toContain('123-45-6789');
    expect(text).not.toContain('"second"');
    expect(await terminalOf(requestAuditId)).toEqual({ errors: ['response_unfilterable'], completed: 0 });
  });

  it('returns a non-2xx provider answer buffered, in the usual envelope', async () => {
    const res = await call({ url: `${site}/rest/api/3/nope`, stream: true });
    expect(res.statusCode).toBe(200);
    // The provider was asked once: the error is the streamed answer, buffered, not a second call.
    expect(hits.get('/rest/api/3/nope')).toBe(1);
    const body = (await res.body.json()) as { model: string; status: number; body: unknown };
    expect(body.model).toBe('B');
    expect(body.status).toBe(500);
    expect(body.body).toEqual({ errorMessages: ['boom'] });
  });

  // With a response filter the bytes are counted inside it; without one (download) by a stage
  // of their own: both must cut the stream.
  it.each([
    ['filtered (stream: true)', { stream: true }],
    ['unfiltered (download: true)', { download: true }],
  ])('cuts the stream at maxResponseSizeBytes and records the error: %s', async (_name, mode) => {
    const limits = await http('PUT', `${gw.baseUrl}/v1/policies/${policyId}/rate-limits`, {
      headers: admin.headers,
      json: { rateLimits: { maxRequestsPerHour: 1000, maxResponseSizeBytes: 50_000 } },
    });
    expect(limits.status).toBe(200);
    const tooLarge = (rows: Awaited<ReturnType<typeof pollAudit>>) =>
      rows.filter((x) => x.metadata.error === 'too_large' && x.metadata.stream === true).length;
    const before = tooLarge(await pollAudit(admin, { agentId, action: 'execution_error' }, () => true));
    const res = await call({ url: `${site}/rest/api/3/big`, ...mode });
    let received = 0;
    await expect(
      (async () => {
        for await (const chunk of res.body) received += (chunk as Buffer).length;
      })(),
    ).rejects.toThrow();
    expect(received).toBeLessThanOrEqual(50_000 + 65_536);
    const rows = await pollAudit(
      admin,
      { agentId, action: 'execution_error' },
      (e) => tooLarge(e) > before,
      10_000,
    );
    expect(tooLarge(rows)).toBe(before + 1);
    await http('PUT', `${gw.baseUrl}/v1/policies/${policyId}/rate-limits`, {
      headers: admin.headers,
      json: { rateLimits: null },
    });
  });
});

describe('download: true', () => {
  it('returns the raw bytes untouched, with no envelope', async () => {
    const res = await call({ url: `${site}/rest/api/3/attachment/1`, download: true });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/octet-stream');
    expect(Buffer.from(await res.body.arrayBuffer()).equals(BINARY)).toBe(true);
  });
});
