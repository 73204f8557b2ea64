/**
 * ADR 0043 through the official `@google/genai` SDK, unmodified except `httpOptions.baseUrl` and
 * `apiKey` (the agent's `vltt_…` token, which the SDK sends in `x-goog-api-key`): llm_c reached
 * through `/v1/vault/llm/llm_c`, against the local HTTPS mock of the provider.
 *
 * The SDK exposes neither the HTTP status of a successful call nor the headers of an `ApiError`,
 * so where a test needs them (the 202 of an approval, `retry-after`, the redirect) it passes the
 * SDK a recording `fetch` (its `httpOptions.fetch` option) that returns the real response.
 *
 * This SDK version calls the Gemini API under `/v1/models/…` by default, which the catalog's
 * llm_c allowlist (`/v1beta/models/*`) does not cover: the first test checks the SDK as it
 * ships; the others pin `httpOptions.apiVersion: 'v1beta'` (an SDK option, the version the
 * catalog names) so that they test the proxy rather than that one gap.
 */
import { ApiError, GoogleGenAI, HarmBlockThreshold, HarmCategory, type HttpOptions } from '@google/genai';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPat } from '../support/api-client.js';
import {
  recordingFetch,
  rejection,
  sightings,
  startLlmGateway,
  type BindOptions,
  type LlmGateway,
} from '../support/mock-llm.js';

const SHAPES = ['embedded', 'services'] as const;
const MODEL = 'gemini-mock';
const CONTENTS = 'Say hello.';

interface Paused {
  approvalRequired: boolean;
  approvalRequestId: string;
  expiresAt: string;
  auditId: string;
  approvalUrl: string;
  error: { code: number; message: string; status: string };
  code: string;
}

/** What the SDK's ApiError carries: the provider-shaped body as JSON text in its message. */
function bodyOf(err: unknown): { error: { code: number; message: string; status: string }; code: string } {
  return JSON.parse((err as ApiError).message) as ReturnType<typeof bodyOf>;
}

describe.each(SHAPES)('@google/genai SDK through the LLM proxy (%s)', (shape) => {
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

  async function bind(opts?: BindOptions) {
    const b = await fx.bind('llm_c', opts);
    tokens.push(b.token);
    return b;
  }

  function client(apiKey: string, httpOptions: HttpOptions = {}) {
    return new GoogleGenAI({
      apiKey,
      httpOptions: {
        baseUrl: `${fx.base}/v1/vault/llm/llm_c`,
        apiVersion: 'v1beta',
        // attempts: 1 is the SDK's "no retries".
        retryOptions: { attempts: 1 },
        ...httpOptions,
      },
    });
  }

  async function streamedText(ai: GoogleGenAI) {
    let text = '';
    const chunks: string[] = [];
    for await (const chunk of await ai.models.generateContentStream({ model: MODEL, contents: CONTENTS })) {
      chunks.push(chunk.text ?? '');
      text += chunk.text ?? '';
    }
    return { text, chunks };
  }

  it('the SDK as it ships (its default API version, /v1/models/…) is allowed by a new policy', async () => {
    const b = await bind();
    const ai = new GoogleGenAI({
      apiKey: b.token,
      httpOptions: { baseUrl: `${fx.base}/v1/vault/llm/llm_c` },
    });
    const before = fx.mock.requests.length;
    const r = await ai.models.generateContent({ model: MODEL, contents: CONTENTS });
    expect(r.text).toBe('Hello from the mock model.');
    expect((await streamedText(ai)).text).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen.map((x) => [x.endpoint, x.key])).toEqual([
      ['generate', fx.keys.llm_c],
      ['stream_generate', fx.keys.llm_c],
    ]);
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('non-streaming: the answer arrives intact; the provider saw the stored key, never the agent token', async () => {
    const b = await bind();
    const before = fx.mock.requests.length;
    const r = await client(b.token).models.generateContent({ model: MODEL, contents: CONTENTS });
    expect(r.text).toBe('Hello from the mock model.');
    expect(r.candidates?.[0]?.finishReason).toBe('STOP');
    expect(r.usageMetadata?.totalTokenCount).toBe(19);
    expect(r.sdkHttpResponse?.headers?.['x-vlt-audit-id']).toMatch(/^[0-9a-f-]{36}$/);

    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      method: 'POST',
      path: `/v1beta/models/${MODEL}:generateContent`,
      query: {},
      keyHeader: 'x-goog-api-key',
      key: fx.keys.llm_c,
      keyProvider: 'llm_c',
    });
    expect(seen[0]!.headers['x-goog-api-key']).toBe(fx.keys.llm_c);
    expect(seen[0]!.headers.authorization).toBeUndefined();
    expect(seen[0]!.json).toMatchObject({ contents: [{ parts: [{ text: CONTENTS }], role: 'user' }] });
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('streaming (:streamGenerateContent?alt=sse): every chunk arrives, in order', async () => {
    const b = await bind();
    const before = fx.mock.requests.length;
    const { chunks } = await streamedText(client(b.token));
    expect(chunks).toEqual(['Hello', ' from', ' the', ' mock', ' model.']);
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      path: `/v1beta/models/${MODEL}:streamGenerateContent`,
      query: { alt: 'sse' },
      streamed: true,
      keyHeader: 'x-goog-api-key',
      key: fx.keys.llm_c,
    });
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it("the provider's own refusal comes back as its own error (status, message), streaming or not", async () => {
    const b = await bind();
    const before = fx.mock.requests.length;
    const req = { model: 'mock-error-400', contents: CONTENTS };
    const plain = await rejection(client(b.token).models.generateContent(req));
    const streamed = await rejection(client(b.token).models.generateContentStream(req));
    for (const err of [plain, streamed]) {
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(400);
      expect(bodyOf(err).error).toMatchObject({
        code: 400,
        message: 'the provider refuses model mock-error-400',
        status: 'INVALID_ARGUMENT',
      });
    }
    expect(fx.mock.since(before).map((r) => r.status)).toEqual([400, 400]);
  });

  describe('an e-mail redaction rule on the response', () => {
    const REDACT = {
      response: [{ label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }],
    };

    it('redacts an address split across two SSE chunks; the SDK text never shows it', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.stream = { parts: ['Write to alice@exa', 'mple.com today.'] };
      const { text } = await streamedText(client(b.token));
      expect(text).not.toContain('alice@');
      expect(text).not.toContain('example.com');
      expect(text).toContain('[REDACTED_EMAIL]');
    });

    // Regression: the per-event filter ran first and redacted `ce@example.com` on its own, so the
    // delta stage let `ali` out: the SDK read `Mail ali[REDACTED_EMAIL] now.`
    it('redacts an address whose second delta is an address on its own; its start never shows', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.stream = { parts: ['Mail ali', 'ce@example.com', ' now.'] };
      const { text } = await streamedText(client(b.token));
      expect(text).toBe('Mail [REDACTED_EMAIL] now.');
    });

    it('redacts an address inside one chunk whose bytes arrive in two network writes', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.stream = {
        parts: ['Write to ', 'alice@example.com', ' today.'],
        cutInside: 'alice@example.com',
      };
      const { text, chunks } = await streamedText(client(b.token));
      expect(text).toBe('Write to [REDACTED_EMAIL] today.');
      expect(chunks).toHaveLength(3);
    });

    it('redacts the non-streamed answer too', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.reply = 'Mail bob@example.org please.';
      const r = await client(b.token).models.generateContent({ model: MODEL, contents: CONTENTS });
      expect(r.text).toBe('Mail [REDACTED_EMAIL] please.');
    });
  });

  describe('request rules and rate limits surface as the SDK API errors', () => {
    // The Gemini API names the model in the path, not the body: denying a model is a path rule.
    it('a rule denying a model (its path): ApiError 403 with the vault message, in the Google error shape', async () => {
      const b = await bind({
        rules: {
          request: [{ label: 'no pro', match: { urlPattern: '/models/gemini-pro-mock:' }, action: 'deny' }],
        },
      });
      const before = fx.mock.requests.length;
      const err = await rejection(
        client(b.token).models.generateContent({ model: 'gemini-pro-mock', contents: CONTENTS }),
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(403);
      expect(bodyOf(err)).toMatchObject({
        error: { code: 403, status: 'PERMISSION_DENIED' },
        code: 'POLICY_DENIED',
      });
      expect(bodyOf(err).error.message).toBe('vault: denied by a request rule');
      const streamed = await rejection(
        client(b.token).models.generateContentStream({ model: 'gemini-pro-mock', contents: CONTENTS }),
      );
      expect(streamed).toBeInstanceOf(ApiError);
      expect((streamed as ApiError).status).toBe(403);
      expect(fx.mock.since(before)).toEqual([]);
      const ok = await client(b.token).models.generateContent({ model: MODEL, contents: CONTENTS });
      expect(ok.text).toBe('Hello from the mock model.');
    });

    it('a rule with a body matcher (on the prompt text): ApiError 403', async () => {
      const b = await bind({
        rules: {
          request: [
            {
              label: 'no secrets in prompts',
              match: { body: [{ path: 'contents.parts.text', op: 'contains', value: 'password' }] },
              action: 'deny',
            },
          ],
        },
      });
      const before = fx.mock.requests.length;
      const err = await rejection(
        client(b.token).models.generateContent({ model: MODEL, contents: 'my password is hunter2' }),
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(403);
      expect(bodyOf(err).error.message).toBe('vault: denied by a request rule');
      expect(fx.mock.since(before)).toEqual([]);
      const ok = await client(b.token).models.generateContent({ model: MODEL, contents: 'nothing secret' });
      expect(ok.text).toBe('Hello from the mock model.');
    });

    it('regression: a rule on a camelCase field holds for a REST client that spells it in snake_case (proto JSON)', async () => {
      const b = await bind({
        rules: {
          request: [
            {
              label: 'safety filters stay on',
              match: { body: [{ path: 'safetySettings.*.threshold', op: 'eq', value: 'BLOCK_NONE' }] },
              action: 'deny',
            },
          ],
        },
      });
      const before = fx.mock.requests.length;
      const unsafe = [
        { category: HarmCategory.HARM_CATEGORY_HARASSMENT, threshold: HarmBlockThreshold.BLOCK_NONE },
      ];
      const viaSdk = await rejection(
        client(b.token).models.generateContent({
          model: MODEL,
          contents: CONTENTS,
          config: { safetySettings: unsafe },
        }),
      );
      expect((viaSdk as ApiError).status).toBe(403);
      // What the API also reads: the proto field name, as a hand-written request may send it.
      const r = await request(`${fx.base}/v1/vault/llm/llm_c/v1beta/models/${MODEL}:generateContent`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': b.token },
        body: JSON.stringify({
          contents: [{ role: 'user', parts: [{ text: CONTENTS }] }],
          safety_settings: unsafe,
        }),
      });
      expect(r.statusCode).toBe(403);
      expect(((await r.body.json()) as { error: { message: string } }).error.message).toBe(
        'vault: denied by a request rule',
      );
      expect(fx.mock.since(before)).toEqual([]);
    });

    it('a rule denying a path (countTokens): ApiError 403, the provider never asked', async () => {
      const b = await bind({
        rules: {
          request: [{ label: 'no counting', match: { urlPattern: ':countTokens$' }, action: 'deny' }],
        },
      });
      const before = fx.mock.requests.length;
      const err = await rejection(client(b.token).models.countTokens({ model: MODEL, contents: CONTENTS }));
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(403);
      expect(bodyOf(err).error.message).toBe('vault: denied by a request rule');
      expect(fx.mock.since(before)).toEqual([]);
    });

    it('a rate limit: ApiError 429 (retries off), retry-after on the response', async () => {
      const b = await bind({ rateLimits: { maxRequestsPerHour: 1 } });
      const rec = recordingFetch();
      const ai = client(b.token, { fetch: rec.fetch });
      const before = fx.mock.requests.length;
      await ai.models.generateContent({ model: MODEL, contents: CONTENTS });
      const err = await rejection(ai.models.generateContent({ model: MODEL, contents: CONTENTS }));
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(429);
      expect(bodyOf(err)).toMatchObject({ error: { code: 429, status: 'RESOURCE_EXHAUSTED' } });
      expect(bodyOf(err).error.message).toMatch(/^vault: /);
      expect(rec.responses.map((r) => r.status)).toEqual([200, 429]);
      expect(Number(rec.responses[1]!.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(fx.mock.since(before)).toHaveLength(1);
    });
  });

  it('approval: 202 (seen through the SDK fetch option); once approved, the replay with x-vlt-approval-id runs once', async () => {
    const b = await bind({
      rules: {
        request: [
          {
            label: 'pro needs a human',
            match: { urlPattern: '/models/gemini-pro-mock:' },
            action: 'require_approval',
          },
        ],
      },
    });
    const req = { model: 'gemini-pro-mock', contents: CONTENTS };
    const rec = recordingFetch();
    const before = fx.mock.requests.length;
    // A 2xx for the SDK: it returns an empty answer; the 202 and its body are in the response.
    const first = await client(b.token, { fetch: rec.fetch }).models.generateContent(req);
    expect(first.candidates).toBeUndefined();
    expect(rec.responses).toHaveLength(1);
    expect(rec.responses[0]!.status).toBe(202);
    const paused = JSON.parse(await rec.responses[0]!.text) as Paused;
    expect(paused).toMatchObject({
      approvalRequired: true,
      approvalUrl: `llm://llm_c/v1beta/models/gemini-pro-mock:generateContent`,
      error: { code: 403, status: 'PERMISSION_DENIED' },
      code: 'APPROVAL_REQUIRED',
    });
    expect(paused.error.message).toContain(paused.approvalRequestId);
    expect(fx.mock.since(before)).toEqual([]);

    const replaying = client(b.token, { headers: { 'x-vlt-approval-id': paused.approvalRequestId } });
    const early = await rejection(replaying.models.generateContent(req));
    expect((early as ApiError).status).toBe(403);
    expect(fx.mock.since(before)).toEqual([]);

    await fx.approve(paused.approvalRequestId);
    const done = await replaying.models.generateContent(req);
    expect(done.text).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.path).toBe('/v1beta/models/gemini-pro-mock:generateContent');
    expect(seen[0]!.headers['x-vlt-approval-id']).toBeUndefined();
    expect(sightings(seen, b.token)).toEqual([]);

    const again = await rejection(replaying.models.generateContent(req));
    expect((again as ApiError).status).toBe(409);
    expect(fx.mock.since(before)).toHaveLength(1);
  });

  it('follows the 308 from the legacy /v1/llm/proxy/llm_c path, non-streaming and streaming', async () => {
    const b = await bind();
    const rec = recordingFetch();
    const legacy = client(b.token, { baseUrl: `${fx.base}/v1/llm/proxy/llm_c`, fetch: rec.fetch });
    const before = fx.mock.requests.length;
    const r = await legacy.models.generateContent({ model: MODEL, contents: CONTENTS });
    expect(r.text).toBe('Hello from the mock model.');
    expect((await streamedText(legacy)).text).toBe('Hello from the mock model.');
    expect(rec.responses.map((x) => [x.status, x.redirected, x.url])).toEqual([
      [200, true, `${fx.base}/v1/vault/llm/llm_c/v1beta/models/${MODEL}:generateContent`],
      [200, true, `${fx.base}/v1/vault/llm/llm_c/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`],
    ]);
    const seen = fx.mock.since(before);
    expect(seen.map((x) => [x.path, x.query, x.key])).toEqual([
      [`/v1beta/models/${MODEL}:generateContent`, {}, fx.keys.llm_c],
      [`/v1beta/models/${MODEL}:streamGenerateContent`, { alt: 'sse' }, fx.keys.llm_c],
    ]);
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('the legacy path answers 308 with the query kept, without authentication', async () => {
    const r = await request(
      `${fx.base}/v1/llm/proxy/llm_c/v1beta/models/${MODEL}:streamGenerateContent?alt=sse&x=1`,
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' },
    );
    await r.body.dump();
    expect(r.statusCode).toBe(308);
    expect(r.headers.location).toBe(
      `/v1/vault/llm/llm_c/v1beta/models/${MODEL}:streamGenerateContent?alt=sse&x=1`,
    );
  });

  it('a PAT or a user JWT as the API key: ApiError 401, nothing sent', async () => {
    const pat = (await createPat(fx.admin, `llm-pat-${shape}`)).plainToken;
    const before = fx.mock.requests.length;
    for (const [name, key] of [
      ['PAT', pat],
      ['user JWT', fx.owner.jwt],
    ] as const) {
      const err = await rejection(client(key).models.generateContent({ model: MODEL, contents: CONTENTS }));
      expect(err, name).toBeInstanceOf(ApiError);
      expect((err as ApiError).status, name).toBe(401);
      expect(bodyOf(err), name).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } });
      expect(bodyOf(err).error.message, name).toMatch(/^vault: /);
    }
    expect(fx.mock.since(before)).toEqual([]);
  });

  it('the agent token in ?key= is not forwarded, and is no credential on its own (plain HTTP)', async () => {
    const b = await bind();
    const path = `/v1/vault/llm/llm_c/v1beta/models/${MODEL}:streamGenerateContent`;
    const before = fx.mock.requests.length;
    // The Gemini REST API's own spelling: the key in the query, next to the header.
    const both = await request(`${fx.base}${path}?alt=sse&key=${b.token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': b.token },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: CONTENTS }] }] }),
    });
    expect(both.statusCode).toBe(200);
    const text = await both.body.text();
    expect(text).toContain('"text":" model."');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.query).toEqual({ alt: 'sse' });
    expect(seen[0]!.key).toBe(fx.keys.llm_c);
    expect(sightings(seen, b.token)).toEqual([]);

    // The query alone: no credential (the token is read from headers only).
    const queryOnly = await request(`${fx.base}${path}?alt=sse&key=${b.token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: CONTENTS }] }] }),
    });
    expect(queryOnly.statusCode).toBe(401);
    expect(await queryOnly.body.json()).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } });
    expect(fx.mock.since(before)).toHaveLength(1);
  });

  it('no agent token ever reached the provider, in any header, path or body', () => {
    expect(tokens.length).toBeGreaterThan(5);
    for (const t of tokens) expect(sightings(fx.mock.requests, t)).toEqual([]);
  });
});
