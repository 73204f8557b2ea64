/**
 * Regression tests for the response-path classes of the gateway's security review: response
 * rules hold on every way a response reaches the agent (buffered, streamed, downloaded), the
 * gateway owns content negotiation, the injected credential never comes back, unfilterable
 * content is refused where rules apply, provider calls have a total deadline, and approvals
 * count against the rate limit. Each test tries the attack through the real gateway.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import zlib from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import {
  createIssueTrackerConnection,
  createPolicy,
  http,
  pollAudit,
  putAllowlists,
  type Admin,
} from '../support/api-client.js';
import type { InProcessGateway } from '../support/in-process-gateway.js';
import { startProviderGateway, type Binding, type ProviderGateway } from '../support/provider-gateway.js';

const creds = { email: 'bot@tracker.test', apiToken: `tok-${randomBytes(12).toString('hex')}` };
const BASIC = Buffer.from(`${creds.email}:${creds.apiToken}`).toString('base64');
const RECORD = { id: 'c-1', ssn: '078-05-1120', email: 'alice@example.com', note: 'visible' };
/** A large answer (about 1 MB, 50,000 distinct keys and 2,000 records): filtered off-thread. */
function wideAnswer() {
  const index: Record<string, number> = {};
  for (let i = 0; i < 50_000; i++) index[`k${i}`] = i;
  return {
    index,
    ssn: RECORD.ssn,
    records: Array.from({ length: 2_000 }, (_, i) => ({ ...RECORD, id: `c-${i}` })),
  };
}
const seenAcceptEncoding: Array<string | undefined> = [];
const seenRange: Array<string | undefined> = [];

let fx: ProviderGateway;
let site: string;
let gw: InProcessGateway;
let admin: Admin;
let connectionId: string;

/** denyFields ['ssn'] + e-mail redaction on every route. */
let fields: Binding;
/** e-mail redaction only. */
let redactOnly: Binding;
/** no response rules at all. */
let plain: Binding;

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string | Buffer) {
  res.writeHead(status, headers);
  res.end(body);
}

function provider(req: IncomingMessage, res: ServerResponse) {
  seenAcceptEncoding.push(req.headers['accept-encoding']);
  const path = (req.url ?? '').replace(/^\/rest\/api\/3/, '');
  const json = JSON.stringify(RECORD);
  switch (path) {
    case '/myself':
      return send(res, 200, { 'content-type': 'application/json' }, '{"accountId":"a1","displayName":"Bot"}');
    case '/record':
      return send(res, 200, { 'content-type': 'application/json' }, json);
    case '/record-gzip':
      // Compressed whatever the gateway asked for: a careless (or hostile) provider.
      return send(
        res,
        200,
        { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        zlib.gzipSync(json),
      );
    case '/events-gzip':
      return send(
        res,
        200,
        { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' },
        zlib.gzipSync(`data: ${json}\n\ndata: ${json}\n\n`),
      );
    case '/reflect':
      return send(
        res,
        200,
        { 'content-type': 'application/json', 'x-echo-authorization': req.headers.authorization ?? '' },
        JSON.stringify({ headers: req.headers, token: creds.apiToken }),
      );
    case '/reflect-text':
      return send(res, 200, { 'content-type': 'text/plain' }, `you sent ${req.headers.authorization}`);
    case '/octet':
      return send(res, 200, { 'content-type': 'application/octet-stream' }, json);
    case '/png':
      return send(res, 200, { 'content-type': 'image/png' }, json);
    case '/multipart':
      return send(res, 200, { 'content-type': 'multipart/mixed; boundary=x' }, `--x\r\n\r\n${json}\r\n--x--`);
    case '/jsonp':
      return send(res, 200, { 'content-type': 'application/jsonp' }, `cb(${json})`);
    case '/csv':
      return send(
        res,
        200,
        { 'content-type': 'text/csv' },
        `id,ssn,email\nc-1,078-05-1120,alice@example.com\n`,
      );
    case '/xml':
      return send(res, 200, { 'content-type': 'application/xml' }, `<r><ssn>078-05-1120</ssn></r>`);
    case '/html':
      return send(res, 200, { 'content-type': 'text/html' }, `<p>ssn 078-05-1120</p>`);
    case '/utf16':
      return send(
        res,
        200,
        { 'content-type': 'text/event-stream; charset=utf-16le' },
        Buffer.from(`data: ${json}\n\n`, 'utf16le'),
      );
    case '/lenient':
      return send(res, 200, { 'content-type': 'application/json' }, `{'ssn': '078-05-1120', note: 'x',}`);
    case '/deep':
      return send(
        res,
        200,
        { 'content-type': 'application/json' },
        '['.repeat(100_000) + ']'.repeat(100_000),
      );
    case '/wide':
      return send(res, 200, { 'content-type': 'application/json' }, JSON.stringify(wideAnswer()));
    case '/wide-deep':
      // Too deep to parse, and too large for the request's thread.
      return send(
        res,
        200,
        { 'content-type': 'application/json' },
        '['.repeat(200_000) + ']'.repeat(200_000),
      );
    case '/sliced':
      // A slice of the JSON document, whatever was asked (a careless cache, a hostile provider).
      return send(res, 206, { 'content-type': 'application/json' }, json.slice(10));
    case '/ranged-ndjson': {
      const lines = `${json}\n${json}\n`;
      seenRange.push(req.headers.range);
      if (req.headers.range)
        return send(res, 206, { 'content-type': 'application/x-ndjson' }, lines.slice(10));
      return send(res, 200, { 'content-type': 'application/x-ndjson' }, lines);
    }
    case '/broken-gzip':
      // A gzip header and nothing after it: decoding fails before producing a byte.
      return send(
        res,
        200,
        { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' },
        zlib.gzipSync(`data: ${json}\n\n`).subarray(0, 12),
      );
    case '/reflect-utf16':
      return send(
        res,
        200,
        { 'content-type': 'text/plain; charset=utf-16le' },
        Buffer.from(`auth ${req.headers.authorization}`, 'utf16le'),
      );
    case '/cookies':
      res.setHeader('set-cookie', 'sid=provider');
      res.setHeader('set-cookie2', 'sid2=provider');
      return send(res, 200, { 'content-type': 'application/json' }, '{}');
    case '/drip': {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(t));
      return;
    }
    default:
      return send(res, 404, { 'content-type': 'application/json' }, '{"errorMessages":["nope"]}');
  }
}

/**
 * `agent` bound to a further connection with writes that always need approval. A second
 * connection rather than a second agent: one more enrolment would hit the per-IP limit.
 */
async function approvalBinding(agent: Binding, label: string) {
  const conn = (await createIssueTrackerConnection(admin, { siteUrl: site, ...creds, label })).connection;
  const { policy } = await createPolicy(admin, agent.agentId, conn.id, {
    allowedModels: ['B'],
    defaultMode: 'read_write',
    stepUpApproval: 'always',
  });
  const allow = await putAllowlists(admin, policy.id, [
    { baseUrl: site, methods: ['POST'], pathPatterns: ['/rest/api/3/*'] },
  ]);
  expect(allow.status, allow.text).toBe(200);
  return { conn, policy };
}

beforeAll(async () => {
  fx = await startProviderGateway(
    provider,
    {
      VLT_UPSTREAM_DEADLINE_MS: '600',
      VLT_UPSTREAM_STREAM_DEADLINE_MS: '600',
      VLT_UPSTREAM_IDLE_TIMEOUT_MS: '5000',
    },
    creds,
  );
  ({ gw, admin, site, connectionId } = fx);
  fields = await fx.bind({
    response: [
      { label: 'no ssn, no e-mail', match: {}, filter: { denyFields: ['ssn'], redact: [{ type: 'email' }] } },
    ],
  });
  redactOnly = await fx.bind({
    response: [{ label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }],
  });
  plain = await fx.bind({ response: [] });
});
afterAll(async () => {
  await fx?.close();
});

function call(b: Binding, path: string, extra: Record<string, unknown> = {}) {
  return request(`${gw.baseUrl}/v1/vault/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'B',
      connectionId,
      method: 'GET',
      url: `${site}/rest/api/3${path}`,
      ...extra,
    }),
  });
}

/** The workspace's approvals still waiting for a reviewer. */
async function pendingApprovals() {
  const listed = await http<{ approvals: { agentId: string; connectionId: string; status: string }[] }>(
    'GET',
    `${gw.baseUrl}/v1/approvals`,
    { headers: admin.headers },
  );
  return listed.body.approvals.filter((a) => a.status === 'pending');
}

/** The audit row a call's answer names, once the audit writer has stored it. */
async function auditRow(b: Binding, action: string, auditId: string) {
  const rows = await pollAudit(
    admin,
    { agentId: b.agentId, action },
    (e) => e.some((x) => x.auditId === auditId),
    10_000,
  );
  return rows.find((x) => x.auditId === auditId)!;
}

async function bodyText(res: Awaited<ReturnType<typeof request>>): Promise<string> {
  return Buffer.from(await res.body.arrayBuffer()).toString('utf8');
}

const MODES = [
  ['buffered', {}],
  ['stream: true', { stream: true }],
  ['download: true', { download: true }],
] as const;

describe('regression: response rules hold on every response path (class 1)', () => {
  it.each(MODES)('denyFields and redaction apply: %s', async (_name, mode) => {
    const res = await call(fields, '/record', mode);
    expect(res.statusCode).toBe(200);
    const text = await bodyText(res);
    const body = 'stream' in mode || 'download' in mode ? JSON.parse(text) : JSON.parse(text).body;
    expect(body.ssn).toBeUndefined();
    expect(body.note).toBe('visible');
    expect(JSON.stringify(body)).not.toContain('alice@example.com');
  });

  it.each(MODES)(
    'regression: a JSON body that is a slice of a document is refused under field rules, not redacted as text: %s',
    async (_name, mode) => {
      const res = await call(fields, '/sliced', mode);
      const text = await bodyText(res);
      expect(text).not.toContain('078-05-1120');
      expect(res.statusCode, text).toBe(403);
      expect(JSON.parse(text).code).toBe('RESPONSE_UNFILTERABLE');
    },
  );

  it('regression: under response rules the provider is never asked for a byte range', async () => {
    const res = await call(fields, '/ranged-ndjson', { stream: true, headers: { range: 'bytes=10-' } });
    const text = await bodyText(res);
    expect(seenRange.at(-1)).toBeUndefined();
    expect(res.statusCode).toBe(200);
    expect(text).not.toContain('078-05-1120');
    expect(
      text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).note),
    ).toEqual(['visible', 'visible']);
    // Without rules a range is the agent's business.
    await bodyText(await call(plain, '/ranged-ndjson', { stream: true, headers: { range: 'bytes=10-' } }));
    expect(seenRange.at(-1)).toBe('bytes=10-');
  });

  it('refuses a download that rules cannot filter with 403, audited', async () => {
    const res = await call(fields, '/octet', { download: true });
    expect(res.statusCode).toBe(403);
    const body = (await res.body.json()) as { error: string; code: string; auditId: string };
    expect(body.code).toBe('RESPONSE_UNFILTERABLE');
    expect(body.error).toMatch(/application\/octet-stream/);
    const row = await auditRow(fields, 'execution_denied', body.auditId);
    expect(row.metadata.step).toBe('response_rules');
  });

  it('passes a download untouched when no response rule applies', async () => {
    const res = await call(plain, '/octet', { download: true });
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(await bodyText(res))).toEqual(RECORD);
  });
});

describe('regression: the gateway owns content negotiation (class 2)', () => {
  it.each(MODES)('an agent asking for gzip still gets a filtered, decoded body: %s', async (_name, mode) => {
    const res = await call(fields, '/record-gzip', { ...mode, headers: { 'accept-encoding': 'gzip' } });
    expect(seenAcceptEncoding.at(-1)).toBe('identity');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-encoding']).toBeUndefined();
    const text = await bodyText(res);
    expect(text).not.toContain('078-05-1120');
    expect(text).not.toContain('alice@example.com');
    expect(text).toContain('visible');
  });

  it('a gzip-compressed event stream is decoded and filtered per event', async () => {
    const res = await call(fields, '/events-gzip', {
      stream: true,
      headers: { 'accept-encoding': 'gzip, br' },
    });
    expect(res.statusCode).toBe(200);
    const events = (await bodyText(res)).split('\n').filter((l) => l.startsWith('data:'));
    expect(events).toHaveLength(2);
    for (const e of events)
      expect(JSON.parse(e.slice(5))).toEqual({ id: 'c-1', email: expect.any(String), note: 'visible' });
    expect(events.join()).not.toContain('alice@example.com');
  });
});

describe('regression: the injected credential never comes back (class 7)', () => {
  it.each(MODES)('a provider reflecting request headers: %s', async (_name, mode) => {
    const res = await call(plain, '/reflect', mode);
    expect(res.statusCode).toBe(200);
    const everything = JSON.stringify(res.headers) + (await bodyText(res));
    expect(everything).not.toContain(creds.apiToken);
    expect(everything).not.toContain(BASIC);
    expect(everything).not.toContain(BASIC.slice(0, 24));
    expect(everything).toContain('[REDACTED]');
  });

  it('the credential is scrubbed from a text body that echoes the Basic header', async () => {
    const res = await call(plain, '/reflect-text', { stream: true });
    const text = await bodyText(res);
    expect(text).toBe('you sent Basic [REDACTED]');
  });

  it.each(MODES)('regression: a provider reflecting it in a UTF-16 body: %s', async (_name, mode) => {
    const res = await call(plain, '/reflect-utf16', mode);
    expect(res.statusCode).toBe(200);
    const raw = Buffer.from(await res.body.arrayBuffer());
    // Buffered bodies arrive decoded in the envelope; streamed ones as the provider's bytes.
    const text =
      'stream' in mode || 'download' in mode ? raw.toString('utf16le') : JSON.parse(raw.toString()).body;
    expect(text).toBe('auth Basic [REDACTED]');
  });

  it('the credential never appears in the gateway logs either', () => {
    expect(gw.logs.join('\n')).not.toContain(creds.apiToken);
    expect(gw.logs.join('\n')).not.toContain(BASIC);
  });
});

describe('regression: content the rules cannot honour is refused, not passed (class 8)', () => {
  it.each([
    ['/octet', 'stream: true'],
    ['/png', 'stream: true'],
    ['/multipart', 'stream: true'],
    ['/jsonp', 'stream: true'],
    ['/octet', 'buffered'],
    ['/png', 'buffered'],
  ])('binary %s under rules, %s → 403', async (path, mode) => {
    const res = await call(fields, path, mode === 'buffered' ? {} : { stream: true });
    expect(res.statusCode).toBe(403);
    const body = (await res.body.json()) as { code: string };
    expect(body.code).toBe('RESPONSE_UNFILTERABLE');
  });

  it.each(['/csv', '/xml', '/html'])('denyFields cannot be honoured on %s → 403', async (path) => {
    for (const mode of [{}, { stream: true }]) {
      const res = await call(fields, path, mode);
      expect(res.statusCode).toBe(403);
      expect(((await res.body.json()) as { code: string }).code).toBe('RESPONSE_UNFILTERABLE');
    }
  });

  it('redaction alone is honoured on text: CSV is redacted, not refused', async () => {
    const res = await call(redactOnly, '/csv', { stream: true });
    expect(res.statusCode).toBe(200);
    const text = await bodyText(res);
    expect(text).toContain('c-1');
    expect(text).not.toContain('alice@example.com');
  });

  it('a JSON body that only a lenient parser reads is refused under field rules', async () => {
    const res = await call(fields, '/lenient');
    expect(res.statusCode).toBe(403);
    expect(await bodyText(res)).not.toContain('078-05-1120');
  });

  it('regression (class 12): a utf-16le event stream under rules is a clear 403, never a 500', async () => {
    const res = await call(fields, '/utf16', { stream: true });
    expect(res.statusCode).toBe(403);
    const body = (await res.body.json()) as { error: string };
    expect(body.error).toMatch(/utf-16le/);
  });
});

describe('regression: a provider answering absurdly deep JSON gets no 500 (class 12)', () => {
  it('relays it as text when no rule applies, and refuses it with 502 when rules must walk it', async () => {
    const plainRes = await call(plain, '/deep');
    expect(plainRes.statusCode).toBe(200);
    const envelope = (await plainRes.body.json()) as { body: unknown };
    expect(typeof envelope.body).toBe('string');
    for (const mode of [{}, { stream: true }]) {
      const res = await call(fields, '/deep', mode);
      expect(res.statusCode).toBe(502);
      expect(typeof ((await res.body.json()) as { error: string }).error).toBe('string');
    }
  });

  it.each(MODES)(
    'regression: a provider body that fails before its first byte is a JSON 502, not a 2xx cut short: %s',
    async (_name, mode) => {
      // Found by the hostile-input property test: the head of the stream went out before the
      // broken encoding was noticed, and the error answer could not be sent any more.
      const res = await call(plain, '/broken-gzip', mode);
      expect(res.statusCode).toBe(502);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const body = (await res.body.json()) as { error: string; code: string };
      expect(body.error).toBe('provider sent an invalid response');
      expect(body.code).toMatch(/^UPSTREAM_/);
    },
  );
});

describe('regression: a large answer is filtered off the event loop with the same result (class 3)', () => {
  // 100,000 distinct keys held the event loop of every tenant for ~190 ms while parsed,
  // filtered and serialised; bench/hostile-input.ts measures the stall, this the result.
  it('field rules apply to a 1 MB answer exactly as to a small one', async () => {
    // The small answer is filtered on the request's thread: the reference.
    const small = (await (await call(fields, '/record')).body.json()) as { body: Record<string, unknown> };
    expect(small.body.ssn).toBeUndefined();
    const res = await call(fields, '/wide');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const envelope = (await res.body.json()) as {
      model: string;
      status: number;
      body: unknown;
      auditId: string;
    };
    const { ssn: _ssn, ...kept } = wideAnswer();
    expect(envelope).toMatchObject({ model: 'B', status: 200 });
    expect(envelope.body).toEqual({
      ...kept,
      // `ssn` names the top-level field only; e-mails are redacted everywhere.
      records: kept.records.map((r) => ({ ...r, email: small.body.email })),
    });
    expect(JSON.stringify(envelope)).not.toContain('alice@example.com');
    expect((await auditRow(fields, 'execution_completed', envelope.auditId)).metadata).toMatchObject({
      responseStatus: 200,
    });
  });

  it("with no rule it is the provider's JSON, unchanged", async () => {
    const res = await call(plain, '/wide');
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as { body: unknown }).body).toEqual(wideAnswer());
  });

  it('too deep to parse: text without rules, 502 under field rules, never a 500', async () => {
    const plainRes = await call(plain, '/wide-deep');
    expect(plainRes.statusCode).toBe(200);
    expect(typeof ((await plainRes.body.json()) as { body: unknown }).body).toBe('string');
    const res = await call(fields, '/wide-deep');
    expect(res.statusCode).toBe(502);
    expect(((await res.body.json()) as { error: string }).error).toBe('provider sent an invalid response');
  });
});

describe('regression: provider cookies never reach the agent (class 14)', () => {
  it('Set-Cookie and Set-Cookie2 are dropped from the envelope', async () => {
    const res = await call(plain, '/cookies');
    const body = (await res.body.json()) as { headers: Record<string, string> };
    expect(body.headers['set-cookie']).toBeUndefined();
    expect(body.headers['set-cookie2']).toBeUndefined();
  });
});

describe('regression: provider calls have a total deadline (class 9)', () => {
  it('a provider dripping bytes gets 502 on a buffered call, audited as execution_error', async () => {
    const res = await call(plain, '/drip');
    expect(res.statusCode).toBe(502);
    const body = (await res.body.json()) as { code: string; auditId: string };
    expect(body.code).toBe('UPSTREAM_TIMEOUT');
    const row = await auditRow(plain, 'execution_error', body.auditId);
    expect(row.metadata.error).toBe('timeout');
  });

  it('a dripping stream is cut at the stream deadline and audited as execution_error', async () => {
    const res = await call(plain, '/drip', { stream: true });
    expect(res.statusCode).toBe(200);
    await expect(bodyText(res)).rejects.toThrow();
    const rows = await pollAudit(
      admin,
      { agentId: plain.agentId, action: 'execution_error' },
      (e) => e.some((x) => x.metadata.stream === true && x.metadata.error === 'timeout'),
      10_000,
    );
    expect(rows.filter((x) => x.metadata.stream === true).map((x) => x.metadata.error)).toContain('timeout');
  });
});

describe('regression: approvals count against the rate limit (class 10)', () => {
  it('past the hourly limit, writes needing approval get 429 and file no more approvals', async () => {
    // The plain agent on a second connection: one more enrolment would hit the per-IP limit.
    const { conn, policy } = await approvalBinding(plain, 'second');
    const limits = await http('PUT', `${gw.baseUrl}/v1/policies/${policy.id}/rate-limits`, {
      headers: admin.headers,
      json: { rateLimits: { maxRequestsPerHour: 3 } },
    });
    expect(limits.status).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await call(plain, '/issue', {
        connectionId: conn.id,
        method: 'POST',
        body: { summary: `issue ${i}` },
      });
      await r.body.dump();
      statuses.push(r.statusCode);
    }
    expect(statuses).toEqual([202, 202, 202, 429, 429, 429]);
    expect((await pendingApprovals()).filter((a) => a.connectionId === conn.id)).toHaveLength(3);
  });

  it('an agent has at most 20 pending approvals, even when it files them all at once', async () => {
    // The redact-only agent on a third connection, with no rate limit at all.
    const { conn } = await approvalBinding(redactOnly, 'third');
    const file = async (i: number) => {
      const r = await call(redactOnly, '/issue', {
        connectionId: conn.id,
        method: 'POST',
        body: { summary: `issue ${i}` },
      });
      return { status: r.statusCode, body: (await r.body.json()) as { code?: string } };
    };
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => file(i)));
    expect(results.filter((r) => r.status === 202)).toHaveLength(20);
    const refused = results.filter((r) => r.status !== 202);
    expect(refused).toHaveLength(10);
    for (const r of refused)
      expect(r).toMatchObject({ status: 429, body: { code: 'TOO_MANY_PENDING_APPROVALS' } });
    expect((await pendingApprovals()).filter((a) => a.agentId === redactOnly.agentId)).toHaveLength(20);
  });
});

describe('regression: what reviewers and the audit log see of a paused request (classes 12, 13, 14)', () => {
  it('the canonical URL that will run, a storable copy of odd text, and no query values in audit', async () => {
    const { conn } = await approvalBinding(fields, 'fourth');
    const r = await request(`${gw.baseUrl}/v1/vault/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fields.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'B',
        connectionId: conn.id,
        method: 'POST',
        url: `${site}/rest/api/3/issue/OPS-1/comment/../../OPS-999/comment`,
        query: { apikey: 'sekret-query-value' },
        headers: { 'x-note': 'fine' },
        body: { summary: 'nul \u0000 and lone \ud800 here' },
      }),
    });
    // Postgres refuses NUL in jsonb: this used to be a 503.
    expect(r.statusCode).toBe(202);
    const { approvalRequestId } = (await r.body.json()) as { approvalRequestId: string };
    const got = await http<{ approval: { requestDetails: Record<string, unknown> } }>(
      'GET',
      `${gw.baseUrl}/v1/approvals/${approvalRequestId}`,
      { headers: admin.headers },
    );
    expect(got.status).toBe(200);
    const details = got.body.approval.requestDetails;
    expect(details.url).toBe(`${site}/rest/api/3/issue/OPS-999/comment?apikey=sekret-query-value`);
    expect(details.requestedUrl).toBe(`${site}/rest/api/3/issue/OPS-1/comment/../../OPS-999/comment`);
    expect((details.body as { summary: string }).summary).toBe('nul \ufffd and lone \ufffd here');
    const rows = await pollAudit(
      admin,
      { agentId: fields.agentId, action: 'approval_requested' },
      (e) => e.some((x) => x.metadata.approvalRequestId === approvalRequestId),
      10_000,
    );
    const row = rows.find((x) => x.metadata.approvalRequestId === approvalRequestId)!;
    expect(row.metadata.url).toBe(`${site}/rest/api/3/issue/OPS-999/comment?apikey=`);
    expect(JSON.stringify(rows)).not.toContain('sekret-query-value');
  });

  it('a denial whose reason names a header with NUL or a lone surrogate is still recorded', async () => {
    for (const name of ['x-bad\u0000name', 'x-\ud800']) {
      const res = await call(plain, '/record', { headers: { [name]: 'v' } });
      expect(res.statusCode).toBe(400);
      const body = (await res.body.json()) as { error: string };
      expect(body.error).toMatch(/invalid header name/);
    }
    const rows = await pollAudit(
      admin,
      { agentId: plain.agentId, action: 'execution_denied' },
      (e) => e.filter((x) => String(x.metadata.reason ?? '').startsWith('invalid header name')).length >= 2,
      10_000,
    );
    expect(
      rows.filter((x) => String(x.metadata.reason ?? '').startsWith('invalid header name')).length,
    ).toBeGreaterThanOrEqual(2);
  });
});
