/**
 * ADR 0043 through the official `openai` SDK, unmodified except `baseURL` and `apiKey` (the
 * agent's `vltt_…` token): llm_b (and llm_d, OpenAI-compatible) reached through
 * `/v1/vault/llm/<provider>/v1`, against the local HTTPS mock of the provider.
 */
import { randomBytes } from 'node:crypto';
import OpenAI, { type ClientOptions } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPat, expectStatus, putAllowlists } from '../support/api-client.js';
import {
  rejection,
  sightings,
  startLlmGateway,
  type LlmBinding,
  type LlmGateway,
  type LlmProviderId,
} from '../support/mock-llm.js';

const SHAPES = ['embedded', 'services'] as const;
const MESSAGES = [{ role: 'user' as const, content: 'Say hello.' }];

interface Paused {
  approvalRequired: boolean;
  approvalRequestId: string;
  expiresAt: string;
  auditId: string;
  approvalUrl: string;
  error: { message: string; type: string; code: string };
}

describe.each(SHAPES)('openai SDK through the LLM proxy (%s)', (shape) => {
  let fx: LlmGateway;
  const tokens: string[] = [];

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

  async function bind(provider: LlmProviderId = 'llm_b', opts?: Parameters<LlmGateway['bind']>[1]) {
    const b = await fx.bind(provider, opts);
    tokens.push(b.token);
    return b;
  }

  function client(apiKey: string, opts: ClientOptions = {}, provider: LlmProviderId = 'llm_b') {
    return new OpenAI({ apiKey, baseURL: `${fx.base}/v1/vault/llm/${provider}/v1`, maxRetries: 0, ...opts });
  }

  it.each(['llm_b', 'llm_d'] as const)(
    '%s non-streaming: the completion arrives intact; the provider saw the stored key, never the agent token',
    async (provider) => {
      const b = await bind(provider);
      const before = fx.mock.requests.length;
      const { data, response } = await client(b.token, {}, provider)
        .chat.completions.create({ model: 'gpt-mock', messages: MESSAGES })
        .withResponse();
      expect(response.status).toBe(200);
      expect(data.object).toBe('chat.completion');
      expect(data.model).toBe('gpt-mock');
      expect(data.choices[0]!.message.content).toBe('Hello from the mock model.');
      expect(data.usage?.total_tokens).toBe(19);
      expect(response.headers.get('x-vlt-audit-id')).toMatch(/^[0-9a-f-]{36}$/);

      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({
        method: 'POST',
        path: '/v1/chat/completions',
        keyHeader: 'authorization',
        key: fx.keys[provider],
        keyProvider: provider,
      });
      expect(seen[0]!.headers.authorization).toBe(`Bearer ${fx.keys[provider]}`);
      expect(seen[0]!.json).toEqual({ model: 'gpt-mock', messages: MESSAGES });
      expect(sightings(seen, b.token)).toEqual([]);
      // The SDK's own telemetry headers stay with the vault (forwarded headers are an allowlist).
      expect(Object.keys(seen[0]!.headers).filter((h) => h.startsWith('x-stainless'))).toEqual([]);
      expect(JSON.stringify(data)).not.toContain(fx.keys[provider]);
    },
  );

  it.each(['llm_b', 'llm_d'] as const)('%s streaming: every chunk arrives, in order', async (provider) => {
    const b = await bind(provider);
    const before = fx.mock.requests.length;
    const stream = await client(b.token, {}, provider).chat.completions.create({
      model: 'gpt-mock',
      messages: MESSAGES,
      stream: true,
    });
    const deltas: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (c?.delta.content) deltas.push(c.delta.content);
      if (c?.finish_reason) finish = c.finish_reason;
    }
    expect(deltas).toEqual(['Hello', ' from', ' the', ' mock', ' model.']);
    expect(finish).toBe('stop');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ streamed: true, keyHeader: 'authorization', key: fx.keys[provider] });
    expect(sightings(seen, b.token)).toEqual([]);
  });

  // Regression: a binary answer reached the SDK as the base64 text the envelope carries it in.
  // 300 KiB is filtered in the response-filter pool, the other size on the request's thread.
  it.each([2_052, 300 * 1024])(
    'a binary answer (%i bytes of audio) reaches the SDK as the bytes the provider sent',
    async (size) => {
      const b = await bind('llm_b');
      expectStatus(
        await putAllowlists(fx.admin, b.policyId, [
          { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/v1/audio/speech'] },
        ]),
        200,
      );
      const audio = randomBytes(size);
      fx.mock.route('POST /v1/audio/speech', (_req, res) => {
        res.writeHead(200, { 'content-type': 'audio/mpeg' });
        res.end(audio);
      });
      const r = await client(b.token).audio.speech.create({ model: 'tts-mock', voice: 'alloy', input: 'Hi' });
      expect(r.headers.get('content-type')).toBe('audio/mpeg');
      expect(Buffer.from(await r.arrayBuffer()).equals(audio)).toBe(true);
    },
  );

  it("the provider's own response headers reach the SDK, streaming or not (its request id)", async () => {
    const b = await bind();
    const sdk = client(b.token);
    const plain = await sdk.chat.completions.create({ model: 'gpt-mock', messages: MESSAGES }).withResponse();
    const streamed = await sdk.chat.completions
      .create({ model: 'gpt-mock', messages: MESSAGES, stream: true })
      .withResponse();
    for await (const _ of streamed.data) {
      // drained: the request id is read from the head
    }
    expect(plain.response.headers.get('x-request-id')).toMatch(/^req_mock_\d+$/);
    expect(streamed.response.headers.get('x-request-id')).toMatch(/^req_mock_\d+$/);
    expect(streamed.response.headers.get('content-type')).toContain('text/event-stream');
    // The stream's own headers still win over the provider's.
    expect(streamed.response.headers.get('x-vlt-audit-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(streamed.response.headers.get('cache-control')).toBe('no-cache');
  });

  it('a provider header that reflects the stored key reaches the SDK scrubbed, streaming or not', async () => {
    const b = await bind();
    const sdk = client(b.token);
    const plain = await sdk.chat.completions
      .create({ model: 'mock-reflect', messages: MESSAGES })
      .withResponse();
    const streamed = await sdk.chat.completions
      .create({ model: 'mock-reflect', messages: MESSAGES, stream: true })
      .withResponse();
    for await (const _ of streamed.data) {
      // drained
    }
    for (const { response } of [plain, streamed]) {
      const echo = response.headers.get('x-echo-key');
      expect(echo).toMatch(/^seen /);
      expect(echo).not.toContain(fx.keys.llm_b);
      expect([...response.headers.values()].join('\n')).not.toContain(fx.keys.llm_b);
    }
  });

  it("the provider's own refusal comes back as its own error (status, message), streaming or not", async () => {
    const b = await bind('llm_b');
    const before = fx.mock.requests.length;
    for (const stream of [false, true]) {
      const err = await rejection(
        client(b.token).chat.completions.create({ model: 'mock-error-400', messages: MESSAGES, stream }),
      );
      expect(err, `stream: ${stream}`).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as Error).message).toBe('400 the provider refuses model mock-error-400');
    }
    expect(fx.mock.since(before).map((r) => r.status)).toEqual([400, 400]);
  });

  describe('an e-mail redaction rule on the response', () => {
    const REDACT = {
      response: [{ label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }],
    };

    async function streamedText(token: string) {
      const stream = await client(token).chat.completions.create({
        model: 'gpt-mock',
        messages: MESSAGES,
        stream: true,
      });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      return text;
    }

    it('redacts an address split across two SSE chunks (two deltas); the SDK text never shows it', async () => {
      const b = await bind('llm_b', { rules: REDACT });
      fx.mock.stream = { parts: ['Write to alice@exa', 'mple.com today.'] };
      const text = await streamedText(b.token);
      expect(text).not.toContain('alice@');
      expect(text).not.toContain('example.com');
      expect(text).toContain('[REDACTED_EMAIL]');
    });

    // Regression: the per-event filter ran first and redacted `ce@example.com` on its own, so the
    // delta stage let `ali` out: the SDK read `Mail ali[REDACTED_EMAIL] now.`
    it('redacts an address whose second delta is an address on its own; its start never shows', async () => {
      const b = await bind('llm_b', { rules: REDACT });
      fx.mock.stream = { parts: ['Mail ali', 'ce@example.com', ' now.'] };
      expect(await streamedText(b.token)).toBe('Mail [REDACTED_EMAIL] now.');
    });

    it('redacts an address inside one chunk whose bytes arrive in two network writes', async () => {
      const b = await bind('llm_b', { rules: REDACT });
      fx.mock.stream = {
        parts: ['Write to ', 'alice@example.com', ' today.'],
        cutInside: 'alice@example.com',
      };
      const text = await streamedText(b.token);
      expect(text).toBe('Write to [REDACTED_EMAIL] today.');
    });

    it('redacts the non-streamed answer too', async () => {
      const b = await bind('llm_b', { rules: REDACT });
      fx.mock.reply = 'Mail bob@example.org please.';
      const r = await client(b.token).chat.completions.create({ model: 'gpt-mock', messages: MESSAGES });
      expect(r.choices[0]!.message.content).toBe('Mail [REDACTED_EMAIL] please.');
    });
  });

  describe('request rules and rate limits surface as the SDK API errors', () => {
    it('a rule denying a model (body matcher on `model`): PermissionDeniedError 403 with the vault message', async () => {
      const b = await bind('llm_b', {
        rules: {
          request: [
            {
              label: 'no expensive model',
              match: { body: [{ path: 'model', op: 'eq', value: 'gpt-expensive' }] },
              action: 'deny',
            },
          ],
        },
      });
      const before = fx.mock.requests.length;
      const err = await rejection(
        client(b.token).chat.completions.create({ model: 'gpt-expensive', messages: MESSAGES }),
      );
      expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
      const e = err as InstanceType<typeof OpenAI.PermissionDeniedError>;
      expect(e.status).toBe(403);
      expect(e.message).toBe('403 vault: denied by a request rule');
      expect(e.error).toMatchObject({ type: 'permission_error', code: 'policy_denied' });
      // Streaming requests are refused the same way, before any byte of a stream.
      const streamed = await rejection(
        client(b.token).chat.completions.create({ model: 'gpt-expensive', messages: MESSAGES, stream: true }),
      );
      expect(streamed).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect(fx.mock.since(before)).toEqual([]);
      // Another model passes.
      const ok = await client(b.token).chat.completions.create({ model: 'gpt-mock', messages: MESSAGES });
      expect(ok.choices[0]!.message.content).toBe('Hello from the mock model.');
    });

    it('a rule denying a path (embeddings): PermissionDeniedError 403, the provider never asked', async () => {
      const b = await bind('llm_b', {
        rules: {
          request: [{ label: 'no embeddings', match: { urlPattern: '^/v1/embeddings$' }, action: 'deny' }],
        },
      });
      const before = fx.mock.requests.length;
      const err = await rejection(client(b.token).embeddings.create({ model: 'emb-mock', input: 'hello' }));
      expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect((err as Error).message).toBe('403 vault: denied by a request rule');
      expect(fx.mock.since(before)).toEqual([]);
    });

    it('a rate limit: RateLimitError 429 with retry-after (SDK retries off)', async () => {
      const b = await bind('llm_b', { rateLimits: { maxRequestsPerHour: 1 } });
      const before = fx.mock.requests.length;
      await client(b.token).chat.completions.create({ model: 'gpt-mock', messages: MESSAGES });
      const err = await rejection(
        client(b.token).chat.completions.create({ model: 'gpt-mock', messages: MESSAGES }),
      );
      expect(err).toBeInstanceOf(OpenAI.RateLimitError);
      const e = err as InstanceType<typeof OpenAI.RateLimitError>;
      expect(e.status).toBe(429);
      expect(e.message).toContain('vault: ');
      expect(Number(e.headers?.get('retry-after'))).toBeGreaterThan(0);
      expect(e.error).toMatchObject({ type: 'rate_limit_error' });
      expect(fx.mock.since(before)).toHaveLength(1);
    });
  });

  it('approval: 202 through withResponse(); once approved, the replay with x-vlt-approval-id runs once', async () => {
    const b: LlmBinding = await bind('llm_b', {
      rules: {
        request: [
          {
            label: 'expensive model needs a human',
            match: { body: [{ path: 'model', op: 'eq', value: 'gpt-expensive' }] },
            action: 'require_approval',
          },
        ],
      },
    });
    const params = { model: 'gpt-expensive', messages: MESSAGES, temperature: 0.2 };
    const before = fx.mock.requests.length;
    const { data, response } = await client(b.token).chat.completions.create(params).withResponse();
    expect(response.status).toBe(202);
    const paused = data as unknown as Paused;
    expect(paused).toMatchObject({
      approvalRequired: true,
      approvalUrl: 'llm://llm_b/v1/chat/completions',
      error: { type: 'permission_error', code: 'approval_required' },
    });
    expect(paused.approvalRequestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(paused.error.message).toContain(paused.approvalRequestId);
    expect(fx.mock.since(before)).toEqual([]);

    const replaying = client(b.token, { defaultHeaders: { 'x-vlt-approval-id': paused.approvalRequestId } });
    // Not yet approved: refused, nothing sent.
    const early = await rejection(replaying.chat.completions.create(params));
    expect(early).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(fx.mock.since(before)).toEqual([]);

    await fx.approve(paused.approvalRequestId);
    const { data: done, response: res2 } = await replaying.chat.completions.create(params).withResponse();
    expect(res2.status).toBe(200);
    expect(done.choices[0]!.message.content).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.json).toEqual(params);
    expect(seen[0]!.headers['x-vlt-approval-id']).toBeUndefined();
    expect(sightings(seen, b.token)).toEqual([]);

    // Used once: the same replay again is refused (409), nothing sent.
    const again = await rejection(replaying.chat.completions.create(params));
    expect(again).toBeInstanceOf(OpenAI.ConflictError);
    expect(fx.mock.since(before)).toHaveLength(1);
  });

  it('follows the 308 from the legacy /v1/llm/proxy/llm_b path, non-streaming and streaming', async () => {
    const b = await bind('llm_b');
    const legacy = new OpenAI({
      apiKey: b.token,
      baseURL: `${fx.base}/v1/llm/proxy/llm_b/v1`,
      maxRetries: 0,
    });
    const before = fx.mock.requests.length;
    const { data, response } = await legacy.chat.completions
      .create({ model: 'gpt-mock', messages: MESSAGES })
      .withResponse();
    expect(response.status).toBe(200);
    expect(response.redirected).toBe(true);
    expect(response.url).toBe(`${fx.base}/v1/vault/llm/llm_b/v1/chat/completions`);
    expect(data.choices[0]!.message.content).toBe('Hello from the mock model.');

    const stream = await legacy.chat.completions.create({
      model: 'gpt-mock',
      messages: MESSAGES,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen.map((r) => [r.path, r.key])).toEqual([
      ['/v1/chat/completions', fx.keys.llm_b],
      ['/v1/chat/completions', fx.keys.llm_b],
    ]);
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('a PAT or a user JWT as the API key: AuthenticationError 401, nothing sent', async () => {
    const pat = (await createPat(fx.admin, `llm-pat-${shape}`)).plainToken;
    const before = fx.mock.requests.length;
    for (const [name, key] of [
      ['PAT', pat],
      ['user JWT', fx.owner.jwt],
    ] as const) {
      const err = await rejection(
        client(key).chat.completions.create({ model: 'gpt-mock', messages: MESSAGES }),
      );
      expect(err, name).toBeInstanceOf(OpenAI.AuthenticationError);
      expect((err as InstanceType<typeof OpenAI.AuthenticationError>).status, name).toBe(401);
      expect((err as Error).message, name).toContain('vault: ');
    }
    expect(fx.mock.since(before)).toEqual([]);
  });

  it('the agent token in ?key= (defaultQuery) is not forwarded; other query parameters are', async () => {
    const b = await bind('llm_b');
    const before = fx.mock.requests.length;
    const r = await client(b.token, {
      defaultQuery: { key: b.token, 'api-version': '2024-06-01' },
    }).chat.completions.create({ model: 'gpt-mock', messages: MESSAGES });
    expect(r.choices[0]!.message.content).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.query).toEqual({ 'api-version': '2024-06-01' });
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('no agent token ever reached the provider, in any header, path or body', () => {
    expect(tokens.length).toBeGreaterThan(5);
    for (const t of tokens) expect(sightings(fx.mock.requests, t)).toEqual([]);
  });

  it('the gateway logs hold no provider key and no agent token (also not one sent in ?key=)', async () => {
    const b = await bind('llm_b');
    await client(b.token, { defaultQuery: { key: b.token } }).chat.completions.create({
      model: 'gpt-mock',
      messages: MESSAGES,
    });
    const lines = fx.gw.logs;
    for (const s of [...Object.values(fx.keys), ...tokens]) {
      const hits = lines.filter((l) => l.includes(s)).map((l) => l.replace(s, '<secret>').slice(0, 300));
      expect(hits, `${s.slice(0, 8)}… in the logs`).toEqual([]);
    }
  });
});
