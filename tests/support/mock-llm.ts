/**
 * One local HTTPS server that plays the four LLM providers of the catalog closely enough for
 * their official SDKs to parse every answer (ADR 0043):
 *  - llm_a (messages API): `POST /v1/messages` (JSON, or SSE with `event: message_start` …
 *    `message_stop`), `POST /v1/messages/count_tokens`, key in `x-api-key`, `anthropic-version`
 *    required;
 *  - llm_b / llm_d (chat completions): `POST /v1/chat/completions` (JSON, or SSE `data: {chunk}`
 *    … `data: [DONE]`), `POST /v1/responses` (the Responses API: JSON, or SSE
 *    `event: response.created` … `response.completed`), `POST /v1/embeddings`, key in
 *    `Authorization: Bearer`;
 *  - llm_c (generateContent): `POST /v1beta/models/<m>:generateContent` (and `/v1/…`),
 *    `:streamGenerateContent?alt=sse`, `:countTokens`, key in `x-goog-api-key` (or `?key=`);
 *  - the key checks the vault makes when a connection is created (`GET /v1/models`,
 *    `GET /v1beta/models`).
 * Every request is recorded (path, query, headers, body, the key it carried), so tests assert
 * on what the vault really sent. A model named `mock-error-<status>` is refused by the provider
 * itself with that status, in the provider's error shape. The streamed text and its cutting are chosen per test: one SSE
 * event per entry of `stream.parts`, and a network write cut inside `stream.cutInside`. With
 * `stream.toolArgs` the streamed answer is instead one `send_mail` tool call whose JSON arguments
 * arrive one piece per event, in each protocol's own tool-call events.
 *
 * `startLlmGateway` runs an in-process gateway with every LLM provider pointed at the mock, a
 * signed-up workspace owner and one API-key connection per provider.
 */
import https from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import {
  apiKeyConnectionRequest,
  createPolicy,
  expectStatus,
  http,
  type Admin,
  type PolicySettings,
} from './api-client.js';
import { agentToken, enrolledAgent, newUser, type TestUser } from './identity-harness.js';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.js';
import { realServices } from './services.js';
import { readBodyBytes } from './read-body.js';
import { createTestPki, type TestPki } from './test-pki.js';

export type LlmProviderId = 'llm_a' | 'llm_b' | 'llm_c' | 'llm_d';
export const LLM_PROVIDER_IDS: readonly LlmProviderId[] = ['llm_a', 'llm_b', 'llm_c', 'llm_d'];

/** The singleton service of each provider (`POST /v1/connections/api-key`). */
export const LLM_SERVICE: Record<LlmProviderId, string> = {
  llm_a: 'llm_a-messages',
  llm_b: 'llm_b-chat',
  llm_c: 'llm_c-generate',
  llm_d: 'llm_d-chat',
};

export type LlmEndpoint =
  | 'models'
  | 'messages'
  | 'count_tokens'
  | 'chat'
  | 'responses'
  | 'embeddings'
  | 'generate'
  | 'stream_generate'
  | 'gemini_count_tokens'
  | 'unknown';

export interface LlmRecord {
  method: string;
  /** Path exactly as received, with the query. */
  rawPath: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: string;
  /** The body's bytes as received. */
  bytes: Buffer;
  /** The parsed JSON body, undefined when there is none or it is not JSON. */
  json: unknown;
  endpoint: LlmEndpoint;
  /** Where the request carried a key, and the key. */
  keyHeader: 'x-api-key' | 'authorization' | 'x-goog-api-key' | 'query' | null;
  key: string | null;
  /** The provider whose key that is (null: not a key the mock handed out). */
  keyProvider: LlmProviderId | null;
  /** The mock's answer status. */
  status: number;
  streamed: boolean;
  at: number;
  /** The connection closed before the answer was complete: the vault let go of the call. */
  closedEarly: boolean;
}

/** A test's own answer for one `METHOD /path` (`MockLlm.route`). */
export type LlmRoute = (req: IncomingMessage, res: ServerResponse, rec: LlmRecord) => Promise<void> | void;

export interface StreamScript {
  /** The streamed text, one SSE event per part (the SDK's chunks / deltas). */
  parts: string[];
  /**
   * Wherever an event's bytes contain this text, the event leaves in two network writes cut
   * in the middle of it (one SSE event split across two TCP chunks).
   */
  cutInside?: string | undefined;
  /** Pause between network writes (ms), so that each leaves on its own. Default 15. */
  gapMs?: number | undefined;
  /**
   * The streamed answer is one tool call named `send_mail` whose JSON arguments arrive in these
   * pieces, one event each, instead of text (`parts` is then unused by the streams).
   */
  toolArgs?: string[] | undefined;
}

/** The tool the mock calls when `stream.toolArgs` is set. */
export const MOCK_TOOL_NAME = 'send_mail';

export interface MockLlm {
  /** `https://127.0.0.1:<port>`: every provider lives here. */
  readonly url: string;
  readonly pki: TestPki;
  /** The text of non-streamed answers. */
  reply: string;
  /** What streamed answers carry and how they are cut. */
  stream: StreamScript;
  /** Pause before answering a completion (ms): a model thinking before its first byte. Default 0. */
  thinkMs: number;
  readonly requests: LlmRecord[];
  /**
   * Answers `METHOD /path` (say `POST /v1/files`) with `answer` instead of the built-in
   * endpoints: an endpoint the mock does not know, or a provider that answers oddly. The
   * request is recorded as any other, its key checked by no one. Returns what removes the
   * route again (the built-in answer, if any, is back).
   */
  route(methodAndPath: string, answer: LlmRoute): () => void;
  /** A fresh key the mock accepts for `provider`. */
  newKey(provider: LlmProviderId): string;
  /** Every key handed out, by provider. */
  readonly keys: Map<string, LlmProviderId>;
  /** Requests after the first `from` (a count taken earlier). */
  since(from: number): LlmRecord[];
  close(): Promise<void>;
}

/** Over the data plane's limits (10 MiB, 32 MiB for an upload): the vault's limit is what a test meets. */
const MAX_BODY = 40 * 1024 * 1024;

const KEY_PREFIX: Record<LlmProviderId, string> = {
  llm_a: 'sk-ant-api03-',
  llm_b: 'sk-proj-',
  llm_c: 'AIzaSy',
  llm_d: 'mis-',
};

/** `text` cut into `n` parts of about equal length (the default stream script). */
export function splitText(text: string, n: number): string[] {
  const size = Math.ceil(text.length / n);
  const parts: string[] = [];
  for (let i = 0; i < text.length; i += size) parts.push(text.slice(i, i + size));
  return parts;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startMockLlm(opts: { pki?: TestPki } = {}): Promise<MockLlm> {
  const ownPki = !opts.pki;
  const pki = opts.pki ?? (await createTestPki());
  const requests: LlmRecord[] = [];
  const keys = new Map<string, LlmProviderId>();
  const routes = new Map<string, LlmRoute>();
  const now = () => Math.floor(Date.now() / 1000);
  let seq = 0;

  const mock: MockLlm = {
    url: '',
    pki,
    reply: 'Hello from the mock model.',
    stream: { parts: ['Hello', ' from', ' the', ' mock', ' model.'] },
    thinkMs: 0,
    requests,
    keys,
    route(methodAndPath, answer) {
      routes.set(methodAndPath, answer);
      return () => {
        if (routes.get(methodAndPath) === answer) routes.delete(methodAndPath);
      };
    },
    newKey(provider) {
      const key = `${KEY_PREFIX[provider]}${randomBytes(20).toString('hex')}`;
      keys.set(key, provider);
      return key;
    },
    since(from) {
      return requests.slice(from);
    },
    close: async () => undefined,
  };

  function keyOf(req: IncomingMessage, u: URL): Pick<LlmRecord, 'keyHeader' | 'key'> {
    const h = req.headers;
    if (typeof h['x-api-key'] === 'string') return { keyHeader: 'x-api-key', key: h['x-api-key'] };
    if (typeof h['x-goog-api-key'] === 'string')
      return { keyHeader: 'x-goog-api-key', key: h['x-goog-api-key'] };
    const auth = h.authorization ?? '';
    if (/^bearer /i.test(auth)) return { keyHeader: 'authorization', key: auth.slice(7).trim() };
    const q = u.searchParams.get('key');
    if (q !== null) return { keyHeader: 'query', key: q };
    return { keyHeader: null, key: null };
  }

  function endpointOf(method: string, path: string): LlmEndpoint {
    if (method === 'GET' && (path === '/v1/models' || path === '/v1beta/models')) return 'models';
    if (method !== 'POST') return 'unknown';
    if (path === '/v1/messages') return 'messages';
    if (path === '/v1/messages/count_tokens') return 'count_tokens';
    if (path === '/v1/chat/completions') return 'chat';
    if (path === '/v1/responses') return 'responses';
    if (path === '/v1/embeddings') return 'embeddings';
    // The Gemini API answers under both of its versions.
    const g = /^\/v1(?:beta)?\/models\/[^/:]+:(generateContent|streamGenerateContent|countTokens)$/.exec(
      path,
    );
    if (g?.[1] === 'generateContent') return 'generate';
    if (g?.[1] === 'streamGenerateContent') return 'stream_generate';
    if (g?.[1] === 'countTokens') return 'gemini_count_tokens';
    return 'unknown';
  }

  /** The provider each endpoint belongs to (chat completions: llm_b or llm_d, by key). */
  function familyOf(endpoint: LlmEndpoint, path: string): 'a' | 'openai' | 'c' | null {
    if (endpoint === 'messages' || endpoint === 'count_tokens') return 'a';
    if (endpoint === 'chat' || endpoint === 'responses' || endpoint === 'embeddings') return 'openai';
    if (endpoint === 'generate' || endpoint === 'stream_generate' || endpoint === 'gemini_count_tokens')
      return 'c';
    if (endpoint === 'models') return path === '/v1beta/models' ? 'c' : null;
    return null;
  }

  function errorBody(family: 'a' | 'openai' | 'c' | null, status: number, message: string): unknown {
    if (family === 'a')
      return {
        type: 'error',
        error: {
          type: status === 401 ? 'authentication_error' : 'invalid_request_error',
          message,
        },
      };
    if (family === 'c')
      return {
        error: {
          code: status,
          message,
          status: status === 401 ? 'UNAUTHENTICATED' : status === 404 ? 'NOT_FOUND' : 'INVALID_ARGUMENT',
        },
      };
    return {
      error: {
        message,
        type: 'invalid_request_error',
        code: status === 401 ? 'invalid_api_key' : null,
        param: null,
      },
    };
  }

  function sendJson(res: ServerResponse, status: number, body: unknown) {
    res.writeHead(status, {
      'content-type': 'application/json',
      'x-request-id': `req_mock_${++seq}`,
    });
    res.end(JSON.stringify(body));
  }

  /** Writes SSE events, cutting the write inside `stream.cutInside` where an event contains it. */
  async function writeEvents(res: ServerResponse, events: string[]) {
    const gap = mock.stream.gapMs ?? 15;
    const cut = mock.stream.cutInside;
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'x-request-id': `req_mock_${++seq}`,
    });
    res.flushHeaders();
    const writes: string[] = [];
    for (const e of events) {
      const at = cut ? e.indexOf(cut) : -1;
      if (at === -1) writes.push(e);
      else {
        const mid = at + Math.max(1, Math.floor(cut!.length / 2));
        writes.push(e.slice(0, mid), e.slice(mid));
      }
    }
    for (const [i, w] of writes.entries()) {
      if (i > 0) await sleep(gap);
      // The vault let go of the call (an agent that hung up): nothing more to write.
      if (res.destroyed) return;
      res.write(w);
    }
    res.end();
  }

  const usage = { input_tokens: 12, output_tokens: 7 };

  function anthropicMessage(model: string) {
    return {
      id: `msg_mock${++seq}`,
      type: 'message',
      role: 'assistant',
      model,
      content: [{ type: 'text', text: mock.reply }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage,
    };
  }

  function anthropicEvents(model: string): string[] {
    const ev = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
    const start = ev('message_start', {
      type: 'message_start',
      message: {
        id: `msg_mock${++seq}`,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 12, output_tokens: 1 },
      },
    });
    /** One content block from start to stop (`extra` right after its start), then the message's end. */
    const oneBlock = (contentBlock: unknown, deltas: unknown[], stopReason: string, extra: string[] = []) => [
      start,
      ev('content_block_start', { type: 'content_block_start', index: 0, content_block: contentBlock }),
      ...extra,
      ...deltas.map((delta) => ev('content_block_delta', { type: 'content_block_delta', index: 0, delta })),
      ev('content_block_stop', { type: 'content_block_stop', index: 0 }),
      ev('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage: { output_tokens: 7 },
      }),
      ev('message_stop', { type: 'message_stop' }),
    ];
    const toolArgs = mock.stream.toolArgs;
    if (toolArgs) {
      // The API opens a tool_use block with an empty input and streams the input as JSON text.
      return oneBlock(
        { type: 'tool_use', id: `toolu_mock_${++seq}`, name: MOCK_TOOL_NAME, input: {} },
        toolArgs.map((partial_json) => ({ type: 'input_json_delta', partial_json })),
        'tool_use',
      );
    }
    return oneBlock(
      { type: 'text', text: '' },
      mock.stream.parts.map((text) => ({ type: 'text_delta', text })),
      'end_turn',
      [ev('ping', { type: 'ping' })],
    );
  }

  function chatCompletion(model: string) {
    return {
      id: `chatcmpl-mock${++seq}`,
      object: 'chat.completion',
      created: now(),
      model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: mock.reply, refusal: null },
          logprobs: null,
          finish_reason: 'stop',
        },
      ],
      usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
      system_fingerprint: 'fp_mock',
    };
  }

  function chatChunks(model: string): string[] {
    const id = `chatcmpl-mock${++seq}`;
    const created = now();
    const chunk = (delta: unknown, finish: string | null) =>
      `data: ${JSON.stringify({
        id,
        object: 'chat.completion.chunk',
        created,
        model,
        system_fingerprint: 'fp_mock',
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      })}\n\n`;
    const toolArgs = mock.stream.toolArgs;
    if (toolArgs) {
      // The API names the call once (id, name, empty arguments), then sends only argument text.
      return [
        chunk({ role: 'assistant', content: '', refusal: null }, null),
        chunk(
          {
            tool_calls: [
              {
                index: 0,
                id: `call_mock_${++seq}`,
                type: 'function',
                function: { name: MOCK_TOOL_NAME, arguments: '' },
              },
            ],
          },
          null,
        ),
        ...toolArgs.map((args) => chunk({ tool_calls: [{ index: 0, function: { arguments: args } }] }, null)),
        chunk({}, 'tool_calls'),
        'data: [DONE]\n\n',
      ];
    }
    return [
      chunk({ role: 'assistant', content: '', refusal: null }, null),
      ...mock.stream.parts.map((content) => chunk({ content }, null)),
      chunk({}, 'stop'),
      'data: [DONE]\n\n',
    ];
  }

  /** A Responses API `Response` (`resp_mock_<n>`); its message is `msg_mock_<n>`. */
  function responseObject(
    n: number,
    createdAt: number,
    model: string,
    status: 'in_progress' | 'completed',
    output: unknown[],
  ) {
    return {
      id: `resp_mock_${n}`,
      object: 'response',
      created_at: createdAt,
      status,
      model,
      output,
      // The API reports usage only once the response is done.
      usage:
        status === 'completed'
          ? {
              input_tokens: 12,
              output_tokens: 7,
              total_tokens: 19,
              input_tokens_details: { cached_tokens: 0 },
              output_tokens_details: { reasoning_tokens: 0 },
            }
          : null,
      error: null,
      incomplete_details: null,
      instructions: null,
      metadata: {},
      parallel_tool_calls: true,
      temperature: 1,
      tool_choice: 'auto',
      tools: [],
      top_p: 1,
    };
  }

  const outputText = (text: string) => ({ type: 'output_text', text, annotations: [] });

  function responseMessage(n: number, status: 'in_progress' | 'completed', content: unknown[]) {
    return { id: `msg_mock_${n}`, type: 'message', status, role: 'assistant', content };
  }

  function responsesReply(model: string) {
    const n = ++seq;
    const message = responseMessage(n, 'completed', [outputText(mock.reply)]);
    return responseObject(n, now(), model, 'completed', [message]);
  }

  /** A Responses API function call item (`fc_mock_<n>`, call `call_mock_<n>`) to `send_mail`. */
  function responseFunctionCall(n: number, status: 'in_progress' | 'completed', args: string) {
    return {
      id: `fc_mock_${n}`,
      type: 'function_call',
      status,
      call_id: `call_mock_${n}`,
      name: MOCK_TOOL_NAME,
      arguments: args,
    };
  }

  function responsesEvents(model: string): string[] {
    const n = ++seq;
    const createdAt = now();
    let sequence = 0;
    const ev = (type: string, fields: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...fields })}\n\n`;
    const opening = [
      ev('response.created', { response: responseObject(n, createdAt, model, 'in_progress', []) }),
      ev('response.in_progress', { response: responseObject(n, createdAt, model, 'in_progress', []) }),
    ];
    const toolArgs = mock.stream.toolArgs;
    if (toolArgs) {
      const args = toolArgs.join('');
      const done = responseFunctionCall(n, 'completed', args);
      const at = { item_id: `fc_mock_${n}`, output_index: 0 };
      return [
        ...opening,
        ev('response.output_item.added', {
          output_index: 0,
          item: responseFunctionCall(n, 'in_progress', ''),
        }),
        ...toolArgs.map((delta) => ev('response.function_call_arguments.delta', { ...at, delta })),
        ev('response.function_call_arguments.done', { ...at, arguments: args }),
        ev('response.output_item.done', { output_index: 0, item: done }),
        ev('response.completed', { response: responseObject(n, createdAt, model, 'completed', [done]) }),
      ];
    }
    const text = mock.stream.parts.join('');
    const done = responseMessage(n, 'completed', [outputText(text)]);
    // Where the text lives: the SDK checks every event's routing against its snapshot.
    const at = { item_id: `msg_mock_${n}`, output_index: 0, content_index: 0 };
    return [
      ...opening,
      ev('response.output_item.added', { output_index: 0, item: responseMessage(n, 'in_progress', []) }),
      ev('response.content_part.added', { ...at, part: outputText('') }),
      ...mock.stream.parts.map((delta) => ev('response.output_text.delta', { ...at, delta, logprobs: [] })),
      ev('response.output_text.done', { ...at, text, logprobs: [] }),
      ev('response.content_part.done', { ...at, part: outputText(text) }),
      ev('response.output_item.done', { output_index: 0, item: done }),
      ev('response.completed', { response: responseObject(n, createdAt, model, 'completed', [done]) }),
    ];
  }

  function geminiResponse(model: string, text: string, finish: boolean) {
    return {
      candidates: [
        {
          content: { parts: [{ text }], role: 'model' },
          ...(finish && { finishReason: 'STOP' }),
          index: 0,
        },
      ],
      usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 7, totalTokenCount: 19 },
      modelVersion: model,
      responseId: `resp-mock${++seq}`,
    };
  }

  function geminiEvents(model: string): string[] {
    const parts = mock.stream.parts;
    // Gemini ends its events with CRLF CRLF.
    return parts.map(
      (text, i) => `data: ${JSON.stringify(geminiResponse(model, text, i === parts.length - 1))}\r\n\r\n`,
    );
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const u = new URL(req.url ?? '/', 'https://mock.invalid');
    const method = req.method ?? 'GET';
    const bytes = await readBodyBytes(req, MAX_BODY);
    const body = bytes.toString('utf8');
    let json: unknown;
    try {
      json = body ? JSON.parse(body) : undefined;
    } catch {
      json = undefined;
    }
    const endpoint = endpointOf(method, u.pathname);
    const { keyHeader, key } = keyOf(req, u);
    const rec: LlmRecord = {
      method,
      rawPath: req.url ?? '',
      path: u.pathname,
      query: Object.fromEntries(u.searchParams),
      headers: req.headers,
      body,
      bytes,
      json,
      endpoint,
      keyHeader,
      key,
      keyProvider: key === null ? null : (keys.get(key) ?? null),
      status: 0,
      streamed: false,
      at: Date.now(),
      closedEarly: false,
    };
    requests.push(rec);
    res.once('close', () => {
      rec.closedEarly = !res.writableFinished;
    });
    const own = routes.get(`${method} ${u.pathname}`);
    if (own) return own(req, res, rec);
    const family = familyOf(endpoint, u.pathname);
    const fail = (status: number, message: string) => {
      rec.status = status;
      sendJson(res, status, errorBody(family, status, message));
    };
    if (endpoint === 'unknown') return fail(404, `no route ${method} ${u.pathname}`);

    // Each provider reads its key from its own place; any other place is no key at all.
    const expected: Record<'a' | 'openai' | 'c', LlmRecord['keyHeader'][]> = {
      a: ['x-api-key'],
      openai: ['authorization'],
      c: ['x-goog-api-key', 'query'],
    };
    const fam = family ?? (keyHeader === 'x-api-key' ? 'a' : 'openai');
    const okKey =
      rec.keyProvider !== null &&
      expected[fam].includes(keyHeader) &&
      (fam === 'a'
        ? rec.keyProvider === 'llm_a'
        : fam === 'c'
          ? rec.keyProvider === 'llm_c'
          : rec.keyProvider === 'llm_b' || rec.keyProvider === 'llm_d');
    if (!okKey) return fail(401, 'invalid api key');

    const model = (json as { model?: unknown } | undefined)?.model;
    const modelName = typeof model === 'string' ? model : 'mock-model';
    // A model named `mock-error-<status>` (in the body, or in the Gemini path) makes the
    // provider itself refuse, in its own error shape.
    const forced = /(?:^|\/models\/)mock-error-(\d{3})(?::|$)/.exec(fam === 'c' ? u.pathname : modelName);
    if (forced) return fail(Number(forced[1]), `the provider refuses model mock-error-${forced[1]}`);
    // A model named `mock-reflect` answers with the key it was sent in a response header, as a
    // debugging provider might: the vault must scrub it.
    if (modelName === 'mock-reflect' && key !== null) res.setHeader('x-echo-key', `seen ${key}`);
    rec.status = 200;
    if (mock.thinkMs > 0 && endpoint !== 'models') await sleep(mock.thinkMs);
    switch (endpoint) {
      case 'models':
        if (fam === 'c')
          return sendJson(res, 200, {
            models: [{ name: 'models/gemini-mock', displayName: 'Gemini mock', version: '001' }],
          });
        if (fam === 'a')
          return sendJson(res, 200, {
            data: [
              {
                type: 'model',
                id: 'claude-mock',
                display_name: 'Claude mock',
                created_at: '2025-01-01T00:00:00Z',
              },
            ],
            has_more: false,
            first_id: 'claude-mock',
            last_id: 'claude-mock',
          });
        return sendJson(res, 200, {
          object: 'list',
          data: [{ id: 'gpt-mock', object: 'model', created: 1700000000, owned_by: 'mock' }],
        });
      case 'messages':
        if (typeof req.headers['anthropic-version'] !== 'string')
          return fail(400, 'anthropic-version header is required');
        if ((json as { stream?: unknown } | undefined)?.stream === true) {
          rec.streamed = true;
          return writeEvents(res, anthropicEvents(modelName));
        }
        return sendJson(res, 200, anthropicMessage(modelName));
      case 'count_tokens':
        return sendJson(res, 200, { input_tokens: 12 });
      case 'chat':
        if ((json as { stream?: unknown } | undefined)?.stream === true) {
          rec.streamed = true;
          return writeEvents(res, chatChunks(modelName));
        }
        return sendJson(res, 200, chatCompletion(modelName));
      case 'responses':
        if ((json as { stream?: unknown } | undefined)?.stream === true) {
          rec.streamed = true;
          return writeEvents(res, responsesEvents(modelName));
        }
        return sendJson(res, 200, responsesReply(modelName));
      case 'embeddings':
        return sendJson(res, 200, {
          object: 'list',
          data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2, 0.3] }],
          model: modelName,
          usage: { prompt_tokens: 3, total_tokens: 3 },
        });
      case 'generate':
      case 'stream_generate': {
        const gModel = /^\/v1(?:beta)?\/models\/([^/:]+):/.exec(u.pathname)![1]!;
        if (endpoint === 'stream_generate') {
          if (u.searchParams.get('alt') !== 'sse') return fail(400, 'this mock streams with alt=sse only');
          rec.streamed = true;
          return writeEvents(res, geminiEvents(gModel));
        }
        return sendJson(res, 200, geminiResponse(gModel, mock.reply, true));
      }
      case 'gemini_count_tokens':
        return sendJson(res, 200, { totalTokens: 12 });
    }
  }

  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `mock failure: ${err.message}` } }));
      } else res.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  (mock as { url: string }).url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  mock.close = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    if (ownPki) await pki.dispose();
  };
  return mock;
}

/** A route (`MockLlm.route`) that answers 200 with `body` as JSON. */
export function answerJson(body: unknown): LlmRoute {
  return (_req, res, rec) => {
    rec.status = 200;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
}

/** The error an SDK call rejects with; fails the test when the call succeeds. */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the SDK call to fail, it succeeded');
}

/** Where `secret` appears in what the mock received (headers, path and query, body). */
export function sightings(records: LlmRecord[], secret: string): string[] {
  const out: string[] = [];
  records.forEach((r, i) => {
    for (const [name, value] of Object.entries(r.headers)) {
      if ([value].flat().some((v) => typeof v === 'string' && v.includes(secret)))
        out.push(`request ${i} header ${name}`);
    }
    if (r.rawPath.includes(secret)) out.push(`request ${i} path ${r.path}`);
    if (r.body.includes(secret)) out.push(`request ${i} body`);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// A gateway in front of the mock

export interface LlmBinding {
  agentId: string;
  /** The agent's `vltt_…` access token: what the SDK is given as its API key. */
  token: string;
  policyId: string;
}

export interface BindOptions {
  settings?: PolicySettings;
  rules?: { request?: unknown[]; response?: unknown[] };
  rateLimits?: { maxRequestsPerHour: number };
}

export interface LlmGateway {
  mock: MockLlm;
  gw: InProcessGateway;
  /** `http://127.0.0.1:<port>` */
  base: string;
  owner: TestUser;
  admin: Admin;
  /** The provider key each connection holds (what the provider must see). */
  keys: Record<LlmProviderId, string>;
  connections: Record<LlmProviderId, string>;
  /** A new agent with a policy on `provider`'s connection (read-write, no step-up by default). */
  bind(provider: LlmProviderId, opts?: BindOptions): Promise<LlmBinding>;
  /** `POST /v1/approvals/:id/approve` as the owner. */
  approve(approvalRequestId: string): Promise<void>;
  close(): Promise<void>;
}

export const RW_UNATTENDED: PolicySettings = {
  allowedModels: ['B'],
  defaultMode: 'read_write',
  stepUpApproval: 'never',
};

/**
 * The in-process gateway with `VLT_LLM_*_API_URL` pointing at the mock, trusting the mock's CA
 * and the test process as its edge proxy. `embedded`: PGlite and the in-process bus;
 * `services`: the run's PostgreSQL and NATS.
 */
export async function startLlmGateway(
  opts: { shape?: 'embedded' | 'services'; env?: Record<string, string> } = {},
): Promise<LlmGateway> {
  const shape = opts.shape ?? 'embedded';
  const mock = await startMockLlm();
  const bus: Record<string, string> =
    shape === 'services' && realServices.hasNats() ? { NATS_URL: realServices.natsUrl() } : {};
  let gw: InProcessGateway;
  try {
    gw = await startInProcessGateway(
      {
        VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32',
        VLT_TRUST_PROXY: '127.0.0.1/32',
        LOG_LEVEL: 'info',
        VLT_LLM_A_API_URL: mock.url,
        VLT_LLM_B_API_URL: mock.url,
        VLT_LLM_C_API_URL: mock.url,
        VLT_LLM_D_API_URL: mock.url,
        ...bus,
        ...opts.env,
      },
      { upstreamCa: [mock.pki.caPem] },
      { embeddedDatabase: shape === 'embedded' },
    );
  } catch (err) {
    await mock.close();
    throw err;
  }
  try {
    const owner = await newUser(gw.baseUrl, 'llm-owner');
    const admin = owner.admin;
    const keys = {} as Record<LlmProviderId, string>;
    const connections = {} as Record<LlmProviderId, string>;
    for (const p of LLM_PROVIDER_IDS) {
      keys[p] = mock.newKey(p);
      const r = expectStatus(
        await apiKeyConnectionRequest(admin, { service: LLM_SERVICE[p], apiKey: keys[p] }),
        201,
      );
      connections[p] = r.body.connection.id;
    }
    return {
      mock,
      gw,
      base: gw.baseUrl,
      owner,
      admin,
      keys,
      connections,
      async bind(provider, o = {}) {
        const agent = await enrolledAgent(admin);
        const { policy } = await createPolicy(
          admin,
          agent.id,
          connections[provider],
          o.settings ?? RW_UNATTENDED,
        );
        if (o.rules) {
          expectStatus(
            await http('PUT', `${gw.baseUrl}/v1/policies/${policy.id}/rules`, {
              headers: admin.headers,
              json: { rules: { request: o.rules.request ?? [], response: o.rules.response ?? [] } },
            }),
            200,
          );
        }
        if (o.rateLimits) {
          expectStatus(
            await http('PUT', `${gw.baseUrl}/v1/policies/${policy.id}/rate-limits`, {
              headers: admin.headers,
              json: { rateLimits: o.rateLimits },
            }),
            200,
          );
        }
        return { agentId: agent.id, token: await agentToken(gw.baseUrl, agent), policyId: policy.id };
      },
      async approve(id) {
        expectStatus(
          await http('POST', `${gw.baseUrl}/v1/approvals/${id}/approve`, { headers: admin.headers }),
          200,
        );
      },
      async close() {
        await gw.close();
        await mock.close();
      },
    };
  } catch (err) {
    await gw.close();
    await mock.close();
    throw err;
  }
}

/**
 * A `fetch` that records every response it returns (status, headers, a copy of the body), for
 * SDKs that do not expose the raw response (their `fetch` option; the SDK itself is unchanged).
 */
export function recordingFetch(): {
  fetch: typeof fetch;
  responses: { url: string; status: number; redirected: boolean; headers: Headers; text: Promise<string> }[];
} {
  const responses: {
    url: string;
    status: number;
    redirected: boolean;
    headers: Headers;
    text: Promise<string>;
  }[] = [];
  const wrapped: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const copy = res.clone();
    responses.push({
      url: res.url,
      status: res.status,
      redirected: res.redirected,
      headers: res.headers,
      text: copy.text().catch(() => ''),
    });
    return res;
  };
  return { fetch: wrapped, responses };
}
