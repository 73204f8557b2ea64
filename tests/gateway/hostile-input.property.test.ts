/**
 * Property test of the request and response path: random nested, large and oddly encoded JSON,
 * header names and values, URLs and methods from a malicious agent, and random content types,
 * encodings, charsets and reflections from a malicious provider. Whatever arrives, the gateway
 * answers with a status it documents (never a 5xx other than 502/503/504, always with an
 * `error` string when it refuses), never returns or logs the injected credential, and is still
 * serving afterwards.
 */
import zlib from 'node:zlib';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http, READ_WRITE_UNATTENDED } from '../support/api-client.js';
import type { InProcessGateway } from '../support/in-process-gateway.js';
import { startProviderGateway, type ProviderGateway } from '../support/provider-gateway.js';

const creds = { email: 'bot@tracker.test', apiToken: `tok-${randomBytes(12).toString('hex')}` };
const BASIC = Buffer.from(`${creds.email}:${creds.apiToken}`).toString('base64');
/** Forms of the credential that must never reach the agent (the scrubber's promise). */
const SECRET_FORMS = [creds.apiToken, BASIC, encodeURIComponent(BASIC)];

// ---------------------------------------------------------------------------------------------
// The malicious provider: answers whatever the current case tells it to.

interface ProviderAnswer {
  status: number;
  contentType: string | null;
  encoding: 'none' | 'gzip' | 'br' | 'deflate' | 'bogus' | 'broken-gzip';
  body: 'reflect' | 'reflect-utf16' | 'record' | 'deep' | 'wide' | 'bytes' | 'sse' | 'empty';
  bytes: Uint8Array;
}

let answer: ProviderAnswer;
let providerCalls = 0;

function providerBody(req: IncomingMessage, requestBody: Buffer): Buffer {
  const record = { id: 'c-1', ssn: '078-05-1120', email: 'alice@example.com', note: 'visible' };
  switch (answer.body) {
    case 'reflect':
      return Buffer.from(JSON.stringify({ headers: req.headers, body: requestBody.toString('latin1') }));
    case 'reflect-utf16':
      return Buffer.from(`auth=${req.headers.authorization ?? ''}`, 'utf16le');
    case 'record':
      return Buffer.from(JSON.stringify(record));
    case 'deep':
      return Buffer.from('{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000));
    case 'wide':
      return Buffer.from(
        `{${Array.from({ length: 20_000 }, (_, i) => `"k${i}":${i}`).join(',')},"ssn":"078-05-1120"}`,
      );
    case 'bytes':
      return Buffer.from(answer.bytes);
    case 'sse':
      return Buffer.from(`data: ${JSON.stringify(record)}\n\ndata: ${req.headers.authorization}\n\n`);
    case 'empty':
      return Buffer.alloc(0);
  }
}

function encode(body: Buffer): Buffer {
  switch (answer.encoding) {
    case 'gzip':
      return zlib.gzipSync(body);
    case 'br':
      return zlib.brotliCompressSync(body);
    case 'deflate':
      return zlib.deflateSync(body);
    case 'broken-gzip':
      return zlib.gzipSync(body).subarray(0, 12);
    default:
      return body;
  }
}

function provider(req: IncomingMessage, res: ServerResponse) {
  providerCalls++;
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = encode(providerBody(req, Buffer.concat(chunks)));
    const headers: Record<string, string> = {};
    if (answer.contentType !== null) headers['content-type'] = answer.contentType;
    if (answer.encoding !== 'none') headers['content-encoding'] = answer.encoding.replace('broken-', '');
    headers['x-echo'] = String(req.headers.authorization ?? '');
    res.writeHead(answer.status, headers);
    res.end(body);
  });
}

// ---------------------------------------------------------------------------------------------
// The malicious agent.

/** JSON text (not values: some cases are deeper than JSON.stringify can go). */
const jsonText: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 6 }).map((v) => JSON.stringify(v) ?? 'null') },
  fc.constantFrom(10, 63, 64, 65, 1_000, 100_000).map((n) => '['.repeat(n) + ']'.repeat(n)),
  fc.constantFrom(10, 63, 64).map((n) => '{"a":'.repeat(n) + '0' + '}'.repeat(n)),
  fc
    .constantFrom(1, 100, 5_000, 40_000, 100_001)
    .map((n) => `{${Array.from({ length: n }, (_, i) => `"k${i}":0`).join(',')}}`),
  fc.constantFrom(
    '{"a":1,"a":2}',
    '"\\u0000"',
    '"\\ud800"',
    '{"\\udfff":1}',
    '1e400',
    '9007199254740993',
    '-0',
    '"\\ufeff{\\"a\\":1}"',
    '"{\'a\': 1,}"',
    '"{\\"a\\":1} {\\"b\\":2}"',
    '"\\u00a0{\\"a\\":1}"',
    '{"fields":{"summary":"x","ssn":"1"}}',
  ),
);

const knownHeaderName = fc.constantFrom(
  'accept-encoding',
  'authorization',
  'host',
  'content-length',
  'transfer-encoding',
  'x-original-url',
  'cookie2',
  'content-type',
  'x-forwarded-for',
  'connection',
  'te',
  'X-Atlassian-Token',
);
const tokenName = fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/);
const printableValue = fc.oneof(
  fc.constantFrom(
    'gzip',
    'br, gzip',
    'identity',
    'chunked',
    'application/json; charset=utf-16le',
    'Basic eA==',
  ),
  fc.stringMatching(/^[ -~]{0,40}$/),
);
/** Mostly well-formed headers (so cases reach the provider), sometimes hostile ones. */
const headersArbitrary = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.dictionary(fc.oneof(knownHeaderName, tokenName), printableValue, { maxKeys: 5 }),
  },
  {
    weight: 1,
    arbitrary: fc.dictionary(
      fc.oneof(
        knownHeaderName,
        fc.string({ minLength: 1, maxLength: 20 }),
        fc.string({ unit: 'binary', maxLength: 10 }),
      ),
      fc.oneof(printableValue, fc.constant('\r\nx: y'), fc.string({ unit: 'binary', maxLength: 20 })),
      { maxKeys: 4 },
    ),
  },
);

const segment = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.oneof(
      fc.constantFrom('issue', 'record', 'search'),
      fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/),
    ),
  },
  fc.constantFrom(
    '..',
    '.',
    'issue;jsessionid=x',
    '%3B',
    '%2F',
    '%2e%2e',
    '%00',
    '%20',
    '%ZZ',
    'é',
    '%E9',
    '',
    '%F0%9F%98%80',
    '%ED%A0%80',
  ),
  fc.string({ maxLength: 12 }).map(encodeURIComponent),
);

function urlArbitrary(site: string): fc.Arbitrary<string> {
  return fc.oneof(
    {
      weight: 8,
      arbitrary: fc.array(segment, { maxLength: 5 }).map((s) => `${site}/rest/api/3/${s.join('/')}`),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        'http://169.254.169.254/latest/meta-data/',
        'file:///etc/passwd',
        'not a url',
        `${site.replace('https', 'http')}/rest/api/3/issue`,
        `${site}@evil.test/rest/api/3/issue`,
        `https://[::1]:1/rest/api/3/issue`,
        `${site}/rest/api/3/issue?${'q=1&'.repeat(2_000)}`,
      ),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
  );
}

const providerAnswer: fc.Arbitrary<ProviderAnswer> = fc.record({
  status: fc.constantFrom(200, 201, 204, 400, 404, 429),
  contentType: fc.constantFrom(
    'application/json',
    'application/json; charset=utf-16le',
    'text/event-stream',
    'text/event-stream; charset=utf-16le',
    'application/x-ndjson',
    'application/octet-stream',
    'image/png',
    'multipart/mixed; boundary=x',
    'application/jsonp',
    'text/csv',
    'text/html; charset=iso-8859-1',
    'application/xml',
    'text/plain',
    'garbage',
    null,
  ),
  encoding: fc.constantFrom('none', 'none', 'none', 'gzip', 'br', 'deflate', 'bogus', 'broken-gzip'),
  body: fc.constantFrom('reflect', 'reflect-utf16', 'record', 'deep', 'wide', 'bytes', 'sse', 'empty'),
  bytes: fc.uint8Array({ maxLength: 256 }),
});

// ---------------------------------------------------------------------------------------------

let fx: ProviderGateway;
let gw: InProcessGateway;
let site: string;
let connectionId: string;
/** [no rules, request body rules + response filters] */
const tokens: string[] = [];

beforeAll(async () => {
  // The embedded default (PGlite, in-process bus); response-hardening.test.ts runs on PostgreSQL and NATS.
  fx = await startProviderGateway(provider, { VLT_UPSTREAM_DEADLINE_MS: '5000' }, creds, 'embedded');
  ({ gw, site, connectionId } = fx);
  for (const rules of [
    { request: [], response: [] },
    {
      request: [
        { label: 'no ssn writes', match: { body: [{ path: 'fields.ssn', op: 'exists' }] }, action: 'deny' },
      ],
      response: [
        {
          label: 'no ssn, no e-mail',
          match: {},
          filter: { denyFields: ['ssn'], redact: [{ type: 'email' }] },
        },
      ],
    },
  ]) {
    const b = await fx.bind(rules, {
      ...READ_WRITE_UNATTENDED,
      methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
    });
    tokens.push(b.token);
  }
}, 60_000);

afterAll(async () => {
  await fx?.close();
});

interface Outcome {
  status: number;
  text: string;
  headers: string;
  contentType: string;
  /** The connection was cut after the head: how a stream that fails mid-way ends. */
  cut: boolean;
}

async function send(token: string, envelope: string): Promise<Outcome> {
  const res = await request(`${gw.baseUrl}/v1/vault/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: envelope,
    headersTimeout: 20_000,
    bodyTimeout: 20_000,
  });
  const chunks: Buffer[] = [];
  let cut = false;
  try {
    for await (const chunk of res.body) chunks.push(chunk as Buffer);
  } catch {
    cut = true;
  }
  return {
    status: res.statusCode,
    text: Buffer.concat(chunks).toString('latin1'),
    headers: JSON.stringify(res.headers),
    contentType: String(res.headers['content-type'] ?? ''),
    cut,
  };
}

function assertDocumented(o: Outcome, label: string, streamed: boolean) {
  // Only a stream may be cut, and only after a 2xx head: before its first byte a failure is
  // still a JSON error.
  if (o.cut) expect(streamed && o.status >= 200 && o.status < 300, `${label}: cut ${o.status}`).toBe(true);
  expect(
    o.status < 500 || [502, 503, 504].includes(o.status),
    `${label}: ${o.status} ${o.text.slice(0, 300)}`,
  ).toBe(true);
  if (o.status >= 500) {
    expect(o.contentType, label).toMatch(/application\/json/);
    expect(typeof (JSON.parse(o.text) as { error?: unknown }).error, label).toBe('string');
  }
  for (const form of SECRET_FORMS) {
    expect(o.text.includes(form), `${label}: credential in body`).toBe(false);
    expect(o.headers.includes(form), `${label}: credential in headers`).toBe(false);
  }
}

describe('hostile input on the request and response path (property)', () => {
  it('answers every input with a documented status, never leaks the credential, keeps serving', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          rules: fc.constantFrom(0, 1),
          method: fc.oneof(
            { weight: 8, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE') },
            fc.constantFrom('HEAD', 'get', 'TRACE', 'CONNECT'),
          ),
          url: urlArbitrary(site),
          headers: headersArbitrary,
          body: fc.option(jsonText, { nil: undefined }),
          mode: fc.constantFrom('{}', '{"stream":true}', '{"download":true}', '{"requestFullFields":true}'),
          provider: providerAnswer,
        }),
        async (c) => {
          answer = c.provider;
          const mode = c.mode.slice(1, -1);
          const envelope =
            `{"model":"B","connectionId":"${connectionId}","method":${JSON.stringify(c.method)},` +
            `"url":${JSON.stringify(c.url)},"headers":${JSON.stringify(c.headers)}` +
            (c.body === undefined ? '' : `,"body":${c.body}`) +
            (mode ? `,${mode}` : '') +
            '}';
          const o = await send(tokens[c.rules]!, envelope);
          assertDocumented(
            o,
            `${c.method} ${c.url.slice(0, 120)} ${c.mode} ${JSON.stringify(c.provider).slice(0, 200)}`,
            c.mode.includes('stream') || c.mode.includes('download'),
          );
        },
      ),
      {
        numRuns: Number(process.env.FC_RUNS ?? 300),
        endOnFailure: true,
        // FC_SEED=<seed from a failure> replays that run.
        ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED) } : {}),
      },
    );

    // The generators must keep reaching the provider, or the response half tests nothing.
    expect(providerCalls).toBeGreaterThan(Number(process.env.FC_RUNS ?? 300) / 6);
    // Still serving, for every tenant: health, and a plain call through the whole pipeline.
    const health = await http('GET', `${gw.baseUrl}/health`);
    expect(health.status).toBe(200);
    answer = {
      status: 200,
      contentType: 'application/json',
      encoding: 'none',
      body: 'record',
      bytes: new Uint8Array(),
    };
    const ok = await send(
      tokens[1]!,
      JSON.stringify({ model: 'B', connectionId, method: 'GET', url: `${site}/rest/api/3/record` }),
    );
    expect(ok.status, ok.text).toBe(200);
    const body = (JSON.parse(ok.text) as { body: Record<string, unknown> }).body;
    expect(body.ssn).toBeUndefined();
    expect(body.note).toBe('visible');
    for (const form of SECRET_FORMS) expect(gw.logs.join('\n')).not.toContain(form);
  }, 240_000);
});
