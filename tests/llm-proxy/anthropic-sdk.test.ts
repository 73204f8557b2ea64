/**
 * ADR 0043 through the official `@anthropic-ai/sdk`, unmodified except `baseURL` and `apiKey`
 * (the agent's `vltt_…` token, which the SDK sends in `x-api-key`): llm_a reached through
 * `/v1/vault/llm/llm_a`, against the local HTTPS mock of the provider.
 */
import Anthropic, { type ClientOptions } from '@anthropic-ai/sdk';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPat } from '../support/api-client.js';
import {
  rejection,
  sightings,
  startLlmGateway,
  type BindOptions,
  type LlmGateway,
} from '../support/mock-llm.js';

const SHAPES = ['embedded', 'services'] as const;
const MODEL = 'claude-mock';
const MESSAGES = [{ role: 'user' as const, content: 'Say hello.' }];
const PARAMS = { model: MODEL, max_tokens: 64, messages: MESSAGES };

interface Paused {
  approvalRequired: boolean;
  approvalRequestId: string;
  expiresAt: string;
  auditId: string;
  approvalUrl: string;
  type: string;
  error: { type: string; message: string };
  code: string;
}

const textOf = (m: Anthropic.Message) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');

describe.each(SHAPES)('@anthropic-ai/sdk through the LLM proxy (%s)', (shape) => {
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
    const b = await fx.bind('llm_a', opts);
    tokens.push(b.token);
    return b;
  }

  function client(apiKey: string, opts: ClientOptions = {}) {
    return new Anthropic({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_a`, maxRetries: 0, ...opts });
  }

  it('non-streaming: the message arrives intact; the provider saw the stored key, never the agent token', async () => {
    const b = await bind();
    const before = fx.mock.requests.length;
    const { data, response } = await client(b.token).messages.create(PARAMS).withResponse();
    expect(response.status).toBe(200);
    expect(data).toMatchObject({ type: 'message', role: 'assistant', model: MODEL, stop_reason: 'end_turn' });
    expect(textOf(data)).toBe('Hello from the mock model.');
    expect(data.usage.output_tokens).toBe(7);
    expect(response.headers.get('x-vlt-audit-id')).toMatch(/^[0-9a-f-]{36}$/);

    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      method: 'POST',
      path: '/v1/messages',
      keyHeader: 'x-api-key',
      key: fx.keys.llm_a,
      keyProvider: 'llm_a',
    });
    expect(seen[0]!.headers['x-api-key']).toBe(fx.keys.llm_a);
    expect(seen[0]!.headers.authorization).toBeUndefined();
    // The SDK's own API version header is forwarded (allowlisted), whatever version it pins.
    expect(seen[0]!.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(seen[0]!.json).toEqual(PARAMS);
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('streaming: every event arrives in order (raw events and the MessageStream helper)', async () => {
    const b = await bind();
    const before = fx.mock.requests.length;
    const stream = await client(b.token).messages.create({ ...PARAMS, stream: true });
    const types: string[] = [];
    const deltas: string[] = [];
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') deltas.push(ev.delta.text);
    }
    expect(types).toEqual([
      'message_start',
      'content_block_start',
      ...Array<string>(5).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(deltas).toEqual(['Hello', ' from', ' the', ' mock', ' model.']);

    const helper = client(b.token).messages.stream(PARAMS);
    expect(await helper.finalText()).toBe('Hello from the mock model.');
    const final = await helper.finalMessage();
    expect(final.stop_reason).toBe('end_turn');

    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(2);
    for (const r of seen)
      expect(r).toMatchObject({ streamed: true, keyHeader: 'x-api-key', key: fx.keys.llm_a });
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it("the provider's own refusal comes back as its own error (status, message), streaming or not", async () => {
    const b = await bind();
    const before = fx.mock.requests.length;
    const plain = await rejection(client(b.token).messages.create({ ...PARAMS, model: 'mock-error-400' }));
    const streamed = await rejection(
      client(b.token)
        .messages.stream({ ...PARAMS, model: 'mock-error-400' })
        .finalText(),
    );
    for (const err of [plain, streamed]) {
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      expect((err as InstanceType<typeof Anthropic.APIError>).apiMessage).toBe(
        'the provider refuses model mock-error-400',
      );
    }
    expect(fx.mock.since(before).map((r) => r.status)).toEqual([400, 400]);
  });

  describe('an e-mail redaction rule on the response', () => {
    const REDACT = {
      response: [{ label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }],
    };

    it('redacts an address split across two SSE events (two text deltas); the SDK text never shows it', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.stream = { parts: ['Write to alice@exa', 'mple.com today.'] };
      const text = await client(b.token).messages.stream(PARAMS).finalText();
      expect(text).not.toContain('alice@');
      expect(text).not.toContain('example.com');
      expect(text).toContain('[REDACTED_EMAIL]');
    });

    // Regression: the per-event filter ran first and redacted `ce@example.com` on its own, so the
    // delta stage let `ali` out: the SDK read `Mail ali[REDACTED_EMAIL] now.`
    it('redacts an address whose second delta is an address on its own; its start never shows', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.stream = { parts: ['Mail ali', 'ce@example.com', ' now.'] };
      const text = await client(b.token).messages.stream(PARAMS).finalText();
      expect(text).toBe('Mail [REDACTED_EMAIL] now.');
    });

    it('redacts an address inside one event whose bytes arrive in two network writes', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.stream = {
        parts: ['Write to ', 'alice@example.com', ' today.'],
        cutInside: 'alice@example.com',
      };
      const stream = await client(b.token).messages.create({ ...PARAMS, stream: true });
      const types: string[] = [];
      let text = '';
      for await (const ev of stream) {
        types.push(ev.type);
        if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
      }
      expect(text).toBe('Write to [REDACTED_EMAIL] today.');
      // The rewritten events kept their `event:` line (the SDK drops events without one, and the
      // text above would miss a piece). The tail held back for redaction across deltas comes in
      // one more delta before the block stops (ADR 0043).
      expect(types.filter((t) => t === 'content_block_delta').length).toBeGreaterThanOrEqual(3);
      expect(types.indexOf('content_block_stop')).toBeGreaterThan(types.lastIndexOf('content_block_delta'));
    });

    it('redacts the non-streamed answer too', async () => {
      const b = await bind({ rules: REDACT });
      fx.mock.reply = 'Mail bob@example.org please.';
      expect(textOf(await client(b.token).messages.create(PARAMS))).toBe('Mail [REDACTED_EMAIL] please.');
    });
  });

  describe('request rules and rate limits surface as the SDK API errors', () => {
    it('a rule denying a model (body matcher on `model`): PermissionDeniedError 403 with the vault message', async () => {
      const b = await bind({
        rules: {
          request: [
            {
              label: 'no opus',
              match: { body: [{ path: 'model', op: 'eq', value: 'claude-opus-mock' }] },
              action: 'deny',
            },
          ],
        },
      });
      const before = fx.mock.requests.length;
      const err = await rejection(client(b.token).messages.create({ ...PARAMS, model: 'claude-opus-mock' }));
      expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
      const e = err as InstanceType<typeof Anthropic.PermissionDeniedError>;
      expect(e.status).toBe(403);
      expect(e.type).toBe('permission_error');
      expect(e.apiMessage).toBe('vault: denied by a request rule');
      expect(e.message).toContain('vault: denied by a request rule');
      const streamed = await rejection(
        (async () => {
          for await (const ev of await client(b.token).messages.create({
            ...PARAMS,
            model: 'claude-opus-mock',
            stream: true,
          }))
            void ev;
        })(),
      );
      expect(streamed).toBeInstanceOf(Anthropic.PermissionDeniedError);
      expect(fx.mock.since(before)).toEqual([]);
      expect(textOf(await client(b.token).messages.create(PARAMS))).toBe('Hello from the mock model.');
    });

    it('a rule denying a path (count_tokens): PermissionDeniedError 403, the provider never asked', async () => {
      const b = await bind({
        rules: {
          request: [{ label: 'no token counting', match: { urlPattern: '/count_tokens$' }, action: 'deny' }],
        },
      });
      const before = fx.mock.requests.length;
      const err = await rejection(client(b.token).messages.countTokens({ model: MODEL, messages: MESSAGES }));
      expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
      expect((err as InstanceType<typeof Anthropic.APIError>).apiMessage).toBe(
        'vault: denied by a request rule',
      );
      expect(fx.mock.since(before)).toEqual([]);
    });

    it('a rate limit: RateLimitError 429 with retry-after (SDK retries off)', async () => {
      const b = await bind({ rateLimits: { maxRequestsPerHour: 1 } });
      const before = fx.mock.requests.length;
      await client(b.token).messages.create(PARAMS);
      const err = await rejection(client(b.token).messages.create(PARAMS));
      expect(err).toBeInstanceOf(Anthropic.RateLimitError);
      const e = err as InstanceType<typeof Anthropic.RateLimitError>;
      expect(e.status).toBe(429);
      expect(e.type).toBe('rate_limit_error');
      expect(e.apiMessage).toMatch(/^vault: /);
      expect(Number(e.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(fx.mock.since(before)).toHaveLength(1);
    });
  });

  it('approval: 202 through withResponse(); once approved, the replay with x-vlt-approval-id (per-request header) runs once', async () => {
    const b = await bind({
      rules: {
        request: [
          {
            label: 'opus needs a human',
            match: { body: [{ path: 'model', op: 'eq', value: 'claude-opus-mock' }] },
            action: 'require_approval',
          },
        ],
      },
    });
    const params = { ...PARAMS, model: 'claude-opus-mock', temperature: 0.5 };
    const before = fx.mock.requests.length;
    const { data, response } = await client(b.token).messages.create(params).withResponse();
    expect(response.status).toBe(202);
    const paused = data as unknown as Paused;
    expect(paused).toMatchObject({
      approvalRequired: true,
      approvalUrl: 'llm://llm_a/v1/messages',
      type: 'error',
      error: { type: 'permission_error' },
      code: 'APPROVAL_REQUIRED',
    });
    expect(paused.error.message).toContain(paused.approvalRequestId);
    expect(fx.mock.since(before)).toEqual([]);

    const headers = { 'x-vlt-approval-id': paused.approvalRequestId };
    const early = await rejection(client(b.token).messages.create(params, { headers }));
    expect(early).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(fx.mock.since(before)).toEqual([]);

    await fx.approve(paused.approvalRequestId);
    const { data: done, response: res2 } = await client(b.token)
      .messages.create(params, { headers })
      .withResponse();
    expect(res2.status).toBe(200);
    expect(textOf(done)).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.json).toEqual(params);
    expect(seen[0]!.headers['x-vlt-approval-id']).toBeUndefined();
    expect(sightings(seen, b.token)).toEqual([]);

    const again = await rejection(client(b.token).messages.create(params, { headers }));
    expect(again).toBeInstanceOf(Anthropic.ConflictError);
    expect(fx.mock.since(before)).toHaveLength(1);
  });

  it('follows the 308 from the legacy /v1/llm/proxy/llm_a path, non-streaming and streaming', async () => {
    const b = await bind();
    const legacy = client(b.token, { baseURL: `${fx.base}/v1/llm/proxy/llm_a` });
    const before = fx.mock.requests.length;
    const { data, response } = await legacy.messages.create(PARAMS).withResponse();
    expect(response.status).toBe(200);
    expect(response.redirected).toBe(true);
    expect(response.url).toBe(`${fx.base}/v1/vault/llm/llm_a/v1/messages`);
    expect(textOf(data)).toBe('Hello from the mock model.');
    expect(await legacy.messages.stream(PARAMS).finalText()).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen.map((r) => [r.path, r.key])).toEqual([
      ['/v1/messages', fx.keys.llm_a],
      ['/v1/messages', fx.keys.llm_a],
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
      const err = await rejection(client(key).messages.create(PARAMS));
      expect(err, name).toBeInstanceOf(Anthropic.AuthenticationError);
      const e = err as InstanceType<typeof Anthropic.AuthenticationError>;
      expect(e.status, name).toBe(401);
      expect(e.type, name).toBe('authentication_error');
      expect(e.apiMessage, name).toMatch(/^vault: /);
    }
    expect(fx.mock.since(before)).toEqual([]);
  });

  it('the agent token in ?key= is not forwarded', async () => {
    const b = await bind();
    const before = fx.mock.requests.length;
    const c = client(b.token, { defaultQuery: { key: b.token, beta: 'true' } });
    expect(textOf(await c.messages.create(PARAMS))).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.query).toEqual({ beta: 'true' });
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('no agent token ever reached the provider, in any header, path or body', () => {
    expect(tokens.length).toBeGreaterThan(5);
    for (const t of tokens) expect(sightings(fx.mock.requests, t)).toEqual([]);
  });
});
