/**
 * ADR 0043 through the official `openai` SDK's Responses API (`client.responses`), unmodified
 * except `baseURL` and `apiKey` (the agent's `vltt_…` token): llm_b reached through
 * `/v1/vault/llm/llm_b/v1`, against the local HTTPS mock of the provider. Its stream is named
 * SSE events (`response.output_text.delta` …), not chat chunks, so redaction must hold across them.
 */
import OpenAI, { type ClientOptions } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sightings, startLlmGateway, type LlmGateway } from '../support/mock-llm.js';

const PARTS = ['Hello', ' from', ' the', ' mock', ' model.'];
const INPUT = 'Say hello.';

describe('openai SDK Responses API through the LLM proxy (embedded)', () => {
  let fx: LlmGateway;

  beforeAll(async () => {
    fx = await startLlmGateway({ shape: 'embedded' });
  });
  afterAll(async () => {
    await fx?.close();
  });
  beforeEach(() => {
    fx.mock.reply = 'Hello from the mock model.';
    fx.mock.stream = { parts: [...PARTS] };
  });

  function client(apiKey: string, opts: ClientOptions = {}) {
    return new OpenAI({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`, maxRetries: 0, ...opts });
  }

  /** Every `response.output_text.delta` of a streamed response, concatenated, and the event types. */
  async function streamedDeltas(token: string) {
    const stream = await client(token).responses.create({ model: 'gpt-mock', input: INPUT, stream: true });
    let text = '';
    const types: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
    }
    return { text, types };
  }

  /** The SDK's accumulated response from `responses.stream()`. */
  async function finalResponse(token: string) {
    return client(token).responses.stream({ model: 'gpt-mock', input: INPUT }).finalResponse();
  }

  it('non-streaming: output_text arrives intact; the provider saw the stored key, never the agent token', async () => {
    const b = await fx.bind('llm_b');
    const before = fx.mock.requests.length;
    const { data, response } = await client(b.token)
      .responses.create({ model: 'gpt-mock', input: INPUT })
      .withResponse();
    expect(response.status).toBe(200);
    expect(data.object).toBe('response');
    expect(data.status).toBe('completed');
    expect(data.output_text).toBe('Hello from the mock model.');
    expect(data.usage?.total_tokens).toBe(19);

    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      method: 'POST',
      path: '/v1/responses',
      endpoint: 'responses',
      keyHeader: 'authorization',
      key: fx.keys.llm_b,
      keyProvider: 'llm_b',
      status: 200,
      streamed: false,
    });
    expect(seen[0]!.json).toEqual({ model: 'gpt-mock', input: INPUT });
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('streaming: the deltas rebuild the text in order; responses.stream() accumulates the same text', async () => {
    const b = await fx.bind('llm_b');
    const before = fx.mock.requests.length;
    const { text, types } = await streamedDeltas(b.token);
    expect(text).toBe(PARTS.join(''));
    expect(types[0]).toBe('response.created');
    expect(types.at(-1)).toBe('response.completed');
    expect(types.filter((t) => t === 'response.output_text.delta')).toHaveLength(PARTS.length);

    const final = await finalResponse(b.token);
    expect(final.status).toBe('completed');
    expect(final.output_text).toBe(PARTS.join(''));

    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(2);
    for (const r of seen) {
      expect(r).toMatchObject({ path: '/v1/responses', streamed: true, key: fx.keys.llm_b });
    }
    expect(sightings(seen, b.token)).toEqual([]);
  });

  describe('an e-mail redaction rule on the response', () => {
    const REDACT = {
      response: [{ label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }],
    };
    // One address split across three `response.output_text.delta` events.
    const SPLIT = ['Write to ali', 'ce@exam', 'ple.com today.'];

    async function expectRedactedStream(token: string) {
      const { text } = await streamedDeltas(token);
      expect(text).not.toContain('alice');
      expect(text).not.toContain('@exam');
      expect(text).not.toContain('example.com');
      expect(text).toBe('Write to [REDACTED_EMAIL] today.');
      const final = await finalResponse(token);
      expect(final.output_text).not.toContain('alice@example.com');
      // Not vacuous: the accumulated text is the redacted one, not an empty or dropped message.
      expect(final.output_text).toBe('Write to [REDACTED_EMAIL] today.');
    }

    it('redacts an address split across three deltas; neither the deltas nor the final response show it', async () => {
      const b = await fx.bind('llm_b', { rules: REDACT });
      fx.mock.stream = { parts: SPLIT };
      await expectRedactedStream(b.token);
    });

    it('redacts it too when the bytes of one event arrive in two network writes', async () => {
      const b = await fx.bind('llm_b', { rules: REDACT });
      fx.mock.stream = { parts: SPLIT, cutInside: 'ce@' };
      await expectRedactedStream(b.token);
    });

    it('redacts the non-streamed output_text too', async () => {
      const b = await fx.bind('llm_b', { rules: REDACT });
      fx.mock.reply = 'Mail alice@example.com now.';
      const r = await client(b.token).responses.create({ model: 'gpt-mock', input: INPUT });
      expect(r.output_text).toBe('Mail [REDACTED_EMAIL] now.');
    });
  });
});
