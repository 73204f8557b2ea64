/**
 * ADR 0043 on the SDK paths the other llm-proxy suites leave out, each driven through the real
 * SDK method (unmodified except its base URL and API key, the agent's `vltt_…` token) against
 * the local HTTPS provider mock of `startLlmGateway`: base64 embeddings, usage chunks, aborted
 * streams, the SDKs' own retries, gzip-encoded answers, token counting, model lists with
 * pagination.
 *
 * The mock answers a fixed set of endpoints. Where a test needs the provider to answer
 * something else (another endpoint, a slow stream, a retryable failure, a compressed body), it
 * answers that `METHOD /path` itself with `fx.mock.route`. Such a request is recorded in
 * `fx.mock.requests` like any other, with whether the connection closed before the answer was
 * complete (`closedEarly`: the vault let go of the call). Every route a test adds is removed
 * when the test ends, so each test starts from the mock's built-in answers.
 */
import zlib from 'node:zlib';
import type { ServerResponse } from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI, type HttpOptions } from '@google/genai';
import OpenAI, { type ClientOptions } from 'openai';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pollAudit, type AuditEvent } from '../support/api-client.js';
import {
  rejection,
  sightings,
  startLlmGateway,
  type BindOptions,
  type LlmGateway,
  type LlmProviderId,
  type LlmRecord,
  type LlmRoute,
} from '../support/mock-llm.js';

const SHAPES = ['embedded', 'services'] as const;
const MESSAGES = [{ role: 'user' as const, content: 'Say hello.' }];
const REDACT_EMAIL: BindOptions['rules'] = {
  response: [{ label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }],
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Test-owned answers of the provider mock

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': 'req_edge', ...headers });
  res.end(JSON.stringify(body));
}

/** Writes each event `gapMs` apart, stopping early once the vault has let go. */
async function writeSlowly(res: ServerResponse, events: string[], gapMs: number, headers = {}) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  res.flushHeaders();
  for (const [i, e] of events.entries()) {
    if (res.destroyed || res.writableEnded) return;
    if (i > 0) await sleep(gapMs);
    if (res.destroyed) return;
    res.write(e);
  }
  res.end();
}

/**
 * Whether the vault had let go of the provider call `rec` (its connection closed before the
 * answer was complete) by `deadline` (ms since epoch): only a close seen by then counts.
 */
async function closedEarlyBy(rec: LlmRecord, deadline: number): Promise<boolean> {
  while (Date.now() <= deadline) {
    if (rec.closedEarly) return true;
    await sleep(10);
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Provider answers

const created = () => Math.floor(Date.now() / 1000);

function chatCompletion(model: string, content: string) {
  return {
    id: 'chatcmpl-edge',
    object: 'chat.completion',
    created: created(),
    model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
    system_fingerprint: 'fp_edge',
  };
}

/**
 * Chat chunks as the API streams them; with `usage` (stream_options.include_usage) every chunk
 * carries `"usage":null` and one more chunk with no choices carries the usage.
 */
function chatChunks(model: string, parts: string[], usage: boolean): string[] {
  const base = { id: 'chatcmpl-edge', object: 'chat.completion.chunk', created: created(), model };
  const chunk = (delta: unknown, finish: string | null) =>
    `data: ${JSON.stringify({
      ...base,
      system_fingerprint: 'fp_edge',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(usage && { usage: null }),
    })}\n\n`;
  return [
    chunk({ role: 'assistant', content: '', refusal: null }, null),
    ...parts.map((content) => chunk({ content }, null)),
    chunk({}, 'stop'),
    ...(usage
      ? [
          `data: ${JSON.stringify({
            ...base,
            system_fingerprint: 'fp_edge',
            choices: [],
            usage: { prompt_tokens: 12, completion_tokens: parts.length, total_tokens: 12 + parts.length },
          })}\n\n`,
        ]
      : []),
    'data: [DONE]\n\n',
  ];
}

/** Twenty parts: a stream that runs for seconds at the gaps below unless someone hangs up. */
const LONG = Array.from({ length: 20 }, (_, i) => `part${i} `);

// ---------------------------------------------------------------------------------------------

describe.each(SHAPES)('SDK edge paths through the LLM proxy (%s)', (shape) => {
  let fx: LlmGateway;
  const tokens: string[] = [];
  /** What removes each route the running test added. */
  const removers: (() => void)[] = [];

  beforeAll(async () => {
    fx = await startLlmGateway({ shape });
  });
  afterAll(async () => {
    await fx?.close();
  });
  beforeEach(() => {
    fx.mock.reply = 'Hello from the mock model.';
    fx.mock.stream = { parts: ['Hello', ' from', ' the', ' mock', ' model.'] };
  });
  afterEach(() => {
    for (const remove of removers.splice(0)) remove();
  });

  /** A new agent bound to `provider`. */
  async function bind(provider: LlmProviderId, opts?: BindOptions) {
    const b = await fx.bind(provider, opts);
    tokens.push(b.token);
    return b;
  }

  /**
   * The mock answers `METHOD /path` with `answer` until the test ends (or `remove()`: the
   * built-in answer is back); `seen()`: the requests for it since, as recorded.
   */
  function route(methodAndPath: string, answer: LlmRoute): { seen: () => LlmRecord[]; remove: () => void } {
    const from = fx.mock.requests.length;
    const remove = fx.mock.route(methodAndPath, answer);
    removers.push(remove);
    const [method, path] = methodAndPath.split(' ');
    return { seen: () => fx.mock.since(from).filter((r) => r.method === method && r.path === path), remove };
  }

  function openai(apiKey: string, opts: ClientOptions = {}) {
    return new OpenAI({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`, maxRetries: 0, ...opts });
  }

  /** The text of a streamed chat completion, as the SDK accumulates it. */
  async function streamedText(sdk: OpenAI): Promise<string> {
    const stream = await sdk.chat.completions.create({ model: 'gpt-mock', messages: MESSAGES, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    return text;
  }

  /** The terminal audit events of one call, by the request audit id its head named. */
  async function terminalOf(agentId: string, requestAuditId: string | null) {
    const ofCall = (rows: AuditEvent[]) => rows.filter((x) => x.metadata.requestAuditId === requestAuditId);
    const errors = ofCall(
      await pollAudit(fx.admin, { agentId, action: 'execution_error' }, (e) => ofCall(e).length > 0, 10_000),
    );
    const completed = ofCall(
      await pollAudit(fx.admin, { agentId, action: 'execution_completed' }, () => true),
    );
    return { errors: errors.map((e) => e.metadata.error), completed: completed.length };
  }

  function expectStoredKey(recs: LlmRecord[], provider: LlmProviderId, token: string) {
    expect(recs.length).toBeGreaterThan(0);
    for (const r of recs) expect(r.key, `${r.method} ${r.path}`).toBe(fx.keys[provider]);
    expect(sightings(recs, token)).toEqual([]);
  }

  // -------------------------------------------------------------------------------------------
  describe('openai', () => {
    it('embeddings.create: the SDK asks for base64 and decodes it; an explicit float request is kept', async () => {
      const b = await bind('llm_b');
      const vector = [0.25, -1.5, 3.125, 1e-7];
      const edge = route('POST /v1/embeddings', (_req, res, rec) => {
        const asked = (rec.json as { encoding_format?: string }).encoding_format;
        const embedding =
          asked === 'base64' ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
        sendJson(res, 200, {
          object: 'list',
          data: [{ object: 'embedding', index: 0, embedding }],
          model: 'emb-mock',
          usage: { prompt_tokens: 2, total_tokens: 2 },
        });
      });
      const sdk = openai(b.token);
      const dflt = await sdk.embeddings.create({ model: 'emb-mock', input: 'hello' });
      expect(dflt.data[0]!.embedding).toEqual(Array.from(new Float32Array(vector)));
      const floats = await sdk.embeddings.create({
        model: 'emb-mock',
        input: 'hello',
        encoding_format: 'float',
      });
      expect(floats.data[0]!.embedding).toEqual(vector);
      const seen = edge.seen();
      expect(seen.map((r) => r.json)).toEqual([
        { model: 'emb-mock', input: 'hello', encoding_format: 'base64' },
        { model: 'emb-mock', input: 'hello', encoding_format: 'float' },
      ]);
      expectStoredKey(seen, 'llm_b', b.token);
    });

    it.each([
      ['without', undefined],
      ['with', REDACT_EMAIL],
    ] as const)(
      'chat stream with stream_options.include_usage (%s a redaction rule): text and the usage chunk arrive',
      async (_, rules) => {
        const b = await bind('llm_b', rules ? { rules } : undefined);
        const parts = ['Write to alice@exa', 'mple.com', ' today.'];
        const edge = route('POST /v1/chat/completions', (_req, res) =>
          writeSlowly(res, chatChunks('gpt-mock', parts, true), 5),
        );
        const stream = await openai(b.token).chat.completions.create({
          model: 'gpt-mock',
          messages: MESSAGES,
          stream: true,
          stream_options: { include_usage: true },
        });
        let text = '';
        let finish: string | null = null;
        const usages: unknown[] = [];
        let emptyChoiceChunks = 0;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? '';
          finish = chunk.choices[0]?.finish_reason ?? finish;
          if (chunk.choices.length === 0) emptyChoiceChunks++;
          if (chunk.usage) usages.push(chunk.usage);
        }
        expect(text).toBe(rules ? 'Write to [REDACTED_EMAIL] today.' : parts.join(''));
        expect(finish).toBe('stop');
        expect(emptyChoiceChunks).toBe(1);
        expect(usages).toEqual([{ prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 }]);
        const seen = edge.seen();
        expect(seen).toHaveLength(1);
        expect(seen[0]!.json).toMatchObject({ stream: true, stream_options: { include_usage: true } });
        expectStoredKey(seen, 'llm_b', b.token);
      },
    );

    it('a stream aborted mid-way: the SDK stops, the vault lets go of the provider and records client_closed', async () => {
      const b = await bind('llm_b');
      const edge = route('POST /v1/chat/completions', (_req, res) =>
        writeSlowly(res, chatChunks('gpt-mock', LONG, false), 150),
      );
      const ac = new AbortController();
      const { data: stream, response } = await openai(b.token)
        .chat.completions.create(
          { model: 'gpt-mock', messages: MESSAGES, stream: true },
          { signal: ac.signal },
        )
        .withResponse();
      const requestAuditId = response.headers.get('x-vlt-audit-id');
      expect(requestAuditId).toMatch(/^[0-9a-f-]{36}$/);
      const deltas: string[] = [];
      let finish: string | null = null;
      const abortedAt = { t: 0 };
      // The SDK ends the iteration without an error when its own signal aborts it.
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) deltas.push(chunk.choices[0].delta.content);
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (deltas.length === 2 && abortedAt.t === 0) {
          abortedAt.t = Date.now();
          ac.abort();
        }
      }
      expect(deltas.slice(0, 2)).toEqual(['part0 ', 'part1 ']);
      expect(deltas.length).toBeLessThan(LONG.length);
      expect(finish).toBeNull();
      const seen = edge.seen();
      expect(seen).toHaveLength(1);
      expect(await closedEarlyBy(seen[0]!, abortedAt.t + 2_000)).toBe(true);
      expect(await terminalOf(b.agentId, requestAuditId)).toEqual({
        errors: ['client_closed'],
        completed: 0,
      });
      expectStoredKey(seen, 'llm_b', b.token);
      // The vault is not stuck: the next call runs (the mock's own answer).
      edge.remove();
      const ok = await openai(b.token).chat.completions.create({ model: 'gpt-mock', messages: MESSAGES });
      expect(ok.choices[0]!.message.content).toBe('Hello from the mock model.');
    });

    it.each([
      [429, { 'retry-after-ms': '10' }],
      [500, {}],
    ] as const)(
      "the SDK's own retry after a provider %i goes through the vault again and succeeds",
      async (status, headers) => {
        const b = await bind('llm_b');
        let n = 0;
        const edge = route('POST /v1/chat/completions', (_req, res, rec) => {
          n++;
          const stream = (rec.json as { stream?: boolean }).stream === true;
          if (n % 2 === 1)
            return sendJson(
              res,
              status,
              { error: { message: `try again (${status})`, type: 'server_error', code: null, param: null } },
              headers,
            );
          if (stream) return writeSlowly(res, chatChunks('gpt-mock', ['Hello', ' again.'], false), 5);
          sendJson(res, 200, chatCompletion('gpt-mock', 'Hello again.'));
        });
        const sdk = openai(b.token, { maxRetries: 1 });
        const { data, response } = await sdk.chat.completions
          .create({ model: 'gpt-mock', messages: MESSAGES })
          .withResponse();
        expect(response.status).toBe(200);
        expect(data.choices[0]!.message.content).toBe('Hello again.');
        const text = await streamedText(sdk);
        expect(text).toBe('Hello again.');
        const seen = edge.seen();
        expect(seen.map((r) => r.json)).toEqual([
          { model: 'gpt-mock', messages: MESSAGES },
          { model: 'gpt-mock', messages: MESSAGES },
          { model: 'gpt-mock', messages: MESSAGES, stream: true },
          { model: 'gpt-mock', messages: MESSAGES, stream: true },
        ]);
        expectStoredKey(seen, 'llm_b', b.token);
        // The retry bookkeeping of the SDK stays with the vault, like its other telemetry.
        for (const r of seen) expect(r.headers['x-stainless-retry-count']).toBeUndefined();
      },
    );

    describe('a provider that compresses its answer anyway (content-encoding: gzip)', () => {
      function gzipRoutes() {
        return route('POST /v1/chat/completions', async (_req, res, rec) => {
          const stream = (rec.json as { stream?: boolean }).stream === true;
          if (!stream) {
            const body = zlib.gzipSync(
              JSON.stringify(chatCompletion('gpt-mock', 'Mail bob@example.org please.')),
            );
            res.writeHead(200, {
              'content-type': 'application/json',
              'content-encoding': 'gzip',
              'content-length': String(body.length),
              'x-request-id': 'req_gzip',
            });
            res.end(body);
            return;
          }
          res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
          const gz = zlib.createGzip();
          gz.pipe(res);
          for (const e of chatChunks('gpt-mock', ['Write to alice@exa', 'mple.com today.'], false)) {
            gz.write(e);
            await new Promise<void>((r) => gz.flush(() => r()));
            await sleep(10);
          }
          gz.end();
        });
      }

      it.each([
        ['without', undefined],
        ['with', REDACT_EMAIL],
      ] as const)('%s a redaction rule: the SDK reads the answer, streamed or not', async (_, rules) => {
        const b = await bind('llm_b', rules ? { rules } : undefined);
        const edge = gzipRoutes();
        const sdk = openai(b.token);
        const { data, response } = await sdk.chat.completions
          .create({ model: 'gpt-mock', messages: MESSAGES })
          .withResponse();
        expect(data.choices[0]!.message.content).toBe(
          rules ? 'Mail [REDACTED_EMAIL] please.' : 'Mail bob@example.org please.',
        );
        expect(response.headers.get('content-encoding')).toBeNull();
        expect(response.headers.get('x-request-id')).toBe('req_gzip');
        const text = await streamedText(sdk);
        expect(text).toBe(rules ? 'Write to [REDACTED_EMAIL] today.' : 'Write to alice@example.com today.');
        const seen = edge.seen();
        expect(seen).toHaveLength(2);
        // The vault asks for an uncompressed answer; the provider compressed anyway.
        for (const r of seen) expect(r.headers['accept-encoding']).toBe('identity');
        expectStoredKey(seen, 'llm_b', b.token);
      });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('@anthropic-ai/sdk', () => {
    const MODEL = 'claude-mock';
    const PARAMS = { model: MODEL, max_tokens: 64, messages: MESSAGES };

    function anthropic(apiKey: string) {
      return new Anthropic({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_a`, maxRetries: 0 });
    }

    it('messages.countTokens: the count arrives; the provider saw the body, its version header and the stored key', async () => {
      const b = await bind('llm_a');
      const before = fx.mock.requests.length;
      const r = await anthropic(b.token).messages.countTokens({
        model: MODEL,
        messages: MESSAGES,
        system: 'Be brief.',
      });
      expect(r).toEqual({ input_tokens: 12 });
      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({
        method: 'POST',
        path: '/v1/messages/count_tokens',
        keyHeader: 'x-api-key',
      });
      expect(seen[0]!.json).toEqual({ model: MODEL, messages: MESSAGES, system: 'Be brief.' });
      expect(seen[0]!.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expectStoredKey(seen, 'llm_a', b.token);
    });

    it('models.list: GET with query parameters, every page followed through after_id', async () => {
      const b = await bind('llm_a');
      const all = ['claude-a', 'claude-b', 'claude-c'];
      const edge = route('GET /v1/models', (_req, res, rec) => {
        const limit = Number(rec.query.limit ?? 20);
        const from = rec.query.after_id ? all.indexOf(rec.query.after_id) + 1 : 0;
        const page = all.slice(from, from + limit);
        sendJson(res, 200, {
          data: page.map((id) => ({
            type: 'model',
            id,
            display_name: id,
            created_at: '2025-01-01T00:00:00Z',
          })),
          has_more: from + limit < all.length,
          first_id: page[0] ?? null,
          last_id: page.at(-1) ?? null,
        });
      });
      const ids: string[] = [];
      for await (const m of anthropic(b.token).models.list({ limit: 2 })) ids.push(m.id);
      expect(ids).toEqual(all);
      const seen = edge.seen();
      expect(seen.map((r) => r.query)).toEqual([{ limit: '2' }, { limit: '2', after_id: 'claude-b' }]);
      for (const r of seen) {
        expect(r.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
        expect(r.body).toBe('');
      }
      expectStoredKey(seen, 'llm_a', b.token);
    });

    it('messages.stream(...).abort() mid-way: APIUserAbortError; the vault lets go and records client_closed', async () => {
      const b = await bind('llm_a');
      const before = fx.mock.requests.length;
      fx.mock.stream = { parts: LONG, gapMs: 150 };
      const stream = anthropic(b.token).messages.stream(PARAMS);
      const texts: string[] = [];
      let abortedAt = 0;
      stream.on('text', (t) => {
        texts.push(t);
        if (texts.length === 2) {
          abortedAt = Date.now();
          stream.abort();
        }
      });
      const err = await rejection(stream.finalMessage());
      expect(err).toBeInstanceOf(Anthropic.APIUserAbortError);
      expect(texts.slice(0, 2)).toEqual(['part0 ', 'part1 ']);
      expect(texts.length).toBeLessThan(LONG.length);
      const requestAuditId = stream.response?.headers.get('x-vlt-audit-id') ?? null;
      expect(requestAuditId).toMatch(/^[0-9a-f-]{36}$/);
      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(await closedEarlyBy(seen[0]!, abortedAt + 2_000)).toBe(true);
      expect(await terminalOf(b.agentId, requestAuditId)).toEqual({
        errors: ['client_closed'],
        completed: 0,
      });
      expectStoredKey(seen, 'llm_a', b.token);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('@google/genai', () => {
    const MODEL = 'gemini-mock';

    function genai(apiKey: string, httpOptions: HttpOptions = {}) {
      return new GoogleGenAI({
        apiKey,
        httpOptions: {
          baseUrl: `${fx.base}/v1/vault/llm/llm_c`,
          apiVersion: 'v1beta',
          retryOptions: { attempts: 1 },
          ...httpOptions,
        },
      });
    }

    it('models.embedContent (:batchEmbedContents): the values arrive; the provider saw the requests', async () => {
      const b = await bind('llm_c');
      const edge = route('POST /v1beta/models/gemini-embedding-001:batchEmbedContents', (_req, res, rec) => {
        const n = (rec.json as { requests: unknown[] }).requests.length;
        sendJson(res, 200, {
          embeddings: Array.from({ length: n }, (_, i) => ({ values: [0.5 + i, -0.25, 1e-7] })),
        });
      });
      const r = await genai(b.token).models.embedContent({
        model: 'gemini-embedding-001',
        contents: ['first text', 'second text'],
        config: { outputDimensionality: 3 },
      });
      expect(r.embeddings?.map((e) => e.values)).toEqual([
        [0.5, -0.25, 1e-7],
        [1.5, -0.25, 1e-7],
      ]);
      const seen = edge.seen();
      expect(seen).toHaveLength(1);
      expect(seen[0]!.json).toMatchObject({
        requests: [
          { model: 'models/gemini-embedding-001', content: { parts: [{ text: 'first text' }] } },
          { model: 'models/gemini-embedding-001', content: { parts: [{ text: 'second text' }] } },
        ],
      });
      expectStoredKey(seen, 'llm_c', b.token);
    });

    it('models.countTokens: the count arrives; the provider saw the contents and the stored key', async () => {
      const b = await bind('llm_c');
      const before = fx.mock.requests.length;
      const r = await genai(b.token).models.countTokens({ model: MODEL, contents: 'Count me.' });
      expect(r.totalTokens).toBe(12);
      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({
        method: 'POST',
        path: `/v1beta/models/${MODEL}:countTokens`,
        keyHeader: 'x-goog-api-key',
      });
      expect(seen[0]!.json).toMatchObject({ contents: [{ parts: [{ text: 'Count me.' }], role: 'user' }] });
      expectStoredKey(seen, 'llm_c', b.token);
    });

    it('models.list: every page, the page token (with + / =) reaching the provider as the SDK sent it', async () => {
      const b = await bind('llm_c');
      const TOKEN = 'Cg5t/b2R+lbHM=';
      const edge = route('GET /v1beta/models', (_req, res, rec) => {
        if (rec.query.pageToken === undefined)
          return sendJson(res, 200, {
            models: [{ name: 'models/gemini-a', displayName: 'A', version: '001' }],
            nextPageToken: TOKEN,
          });
        if (rec.query.pageToken === TOKEN)
          return sendJson(res, 200, {
            models: [{ name: 'models/gemini-b', displayName: 'B', version: '001' }],
          });
        sendJson(res, 400, { error: { code: 400, message: 'bad page token', status: 'INVALID_ARGUMENT' } });
      });
      const names: string[] = [];
      for await (const m of await genai(b.token).models.list({ config: { pageSize: 1 } }))
        names.push(m.name ?? '');
      expect(names).toEqual(['models/gemini-a', 'models/gemini-b']);
      const seen = edge.seen();
      expect(seen.map((r) => r.query)).toEqual([{ pageSize: '1' }, { pageSize: '1', pageToken: TOKEN }]);
      expectStoredKey(seen, 'llm_c', b.token);
    });

    it('a stream aborted mid-way through config.abortSignal: the SDK stops, the vault lets go and records client_closed', async () => {
      const b = await bind('llm_c');
      const before = fx.mock.requests.length;
      fx.mock.stream = { parts: LONG, gapMs: 150 };
      const ac = new AbortController();
      const chunks: string[] = [];
      let abortedAt = 0;
      let requestAuditId: string | null = null;
      const err = await rejection(
        (async () => {
          const stream = await genai(b.token).models.generateContentStream({
            model: MODEL,
            contents: 'Say many things.',
            config: { abortSignal: ac.signal },
          });
          for await (const chunk of stream) {
            requestAuditId ??= chunk.sdkHttpResponse?.headers?.['x-vlt-audit-id'] ?? null;
            chunks.push(chunk.text ?? '');
            if (chunks.length === 2) {
              abortedAt = Date.now();
              ac.abort();
            }
          }
          throw new Error(`the stream ended without an error after ${chunks.length} chunks`);
        })(),
      );
      expect((err as Error).name).toBe('AbortError');
      expect(chunks.slice(0, 2)).toEqual(['part0 ', 'part1 ']);
      expect(chunks.length).toBeLessThan(LONG.length);
      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.query).toEqual({ alt: 'sse' });
      expect(await closedEarlyBy(seen[0]!, abortedAt + 2_000)).toBe(true);
      expect(requestAuditId).toMatch(/^[0-9a-f-]{36}$/);
      expect(await terminalOf(b.agentId, requestAuditId)).toEqual({
        errors: ['client_closed'],
        completed: 0,
      });
      expectStoredKey(seen, 'llm_c', b.token);
    });
  });

  it('no agent token ever reached the provider, in any header, path or body', () => {
    expect(tokens.length).toBeGreaterThan(5);
    for (const t of tokens) expect(sightings(fx.mock.requests, t)).toEqual([]);
  });
});
