/**
 * The providers' batch APIs through the LLM proxy (ADR 0101), driven by the official SDKs
 * unmodified except their base URL and key: a message batch (`@anthropic-ai/sdk`,
 * `messages.batches.create`) and an inline Gemini batch (`@google/genai`, `batches.create`) are
 * judged call by call, so a rule on the calls holds for a batch of them; an OpenAI batch job
 * (`openai`, `batches.create`), whose calls sit in an uploaded file, is refused.
 *
 * One shape (embedded): what is tested is the pipeline's reading of a body, the same code in
 * both shapes.
 */
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectStatus, putAllowlists } from '../support/api-client.js';
import { answerJson, rejection, sightings, startLlmGateway, type LlmGateway } from '../support/mock-llm.js';

const OPUS = 'claude-opus-mock';
const call = (custom_id: string, model = 'claude-mock') => ({
  custom_id,
  params: { model, max_tokens: 16, messages: [{ role: 'user' as const, content: 'Hi' }] },
});
const noOpus = (action: 'deny' | 'require_approval') => ({
  label: 'opus is not for agents',
  match: { body: [{ path: 'model', op: 'eq', value: OPUS }] },
  action,
});

describe('LLM batch APIs through the proxy, with the official SDKs (ADR 0101)', () => {
  let fx: LlmGateway;
  const unroute: (() => void)[] = [];

  beforeAll(async () => {
    fx = await startLlmGateway({ shape: 'embedded' });
    unroute.push(
      fx.mock.route(
        'POST /v1/messages/batches',
        answerJson({
          id: 'msgbatch_mock1',
          type: 'message_batch',
          processing_status: 'in_progress',
          request_counts: { processing: 2, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
          created_at: '2026-01-01T00:00:00Z',
          expires_at: '2026-01-02T00:00:00Z',
          ended_at: null,
          archived_at: null,
          cancel_initiated_at: null,
          results_url: null,
        }),
      ),
      fx.mock.route(
        'POST /v1beta/models/gemini-mock:batchGenerateContent',
        answerJson({
          name: 'batches/mock1',
          metadata: { name: 'batches/mock1', displayName: 'nightly', state: 'BATCH_STATE_PENDING' },
        }),
      ),
    );
  });
  afterAll(async () => {
    for (const u of unroute) u();
    await fx?.close();
  });

  describe('@anthropic-ai/sdk messages.batches.create', () => {
    async function bindBatches(request: unknown[]) {
      const b = await fx.bind('llm_a', { rules: { request } });
      expectStatus(
        await putAllowlists(fx.admin, b.policyId, [
          { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/v1/messages', '/v1/messages/batches'] },
        ]),
        200,
      );
      return {
        ...b,
        client: new Anthropic({ apiKey: b.token, baseURL: `${fx.base}/v1/vault/llm/llm_a`, maxRetries: 0 }),
      };
    }

    it('a batch of allowed calls reaches the provider as the SDK wrote it, with the stored key', async () => {
      const b = await bindBatches([noOpus('deny')]);
      const before = fx.mock.requests.length;
      const requests = [call('first'), call('second')];
      const batch = await b.client.messages.batches.create({ requests });
      expect(batch).toMatchObject({ id: 'msgbatch_mock1', processing_status: 'in_progress' });
      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ path: '/v1/messages/batches', key: fx.keys.llm_a, json: { requests } });
      expect(sightings(seen, b.token)).toEqual([]);
    });

    it('regression: a call naming a denied model denies the batch: PermissionDeniedError naming the call, nothing sent', async () => {
      const b = await bindBatches([noOpus('deny')]);
      const before = fx.mock.requests.length;
      const err = await rejection(
        b.client.messages.batches.create({ requests: [call('first'), call('second', OPUS)] }),
      );
      expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
      expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(403);
      expect((err as InstanceType<typeof Anthropic.PermissionDeniedError>).apiMessage).toBe(
        'vault: batch request second: denied by a request rule',
      );
      expect(fx.mock.since(before)).toEqual([]);
    });

    it('regression: a call that needs a reviewer holds the batch (202); once approved, the replay sends it once', async () => {
      const b = await bindBatches([noOpus('require_approval')]);
      const before = fx.mock.requests.length;
      const params = { requests: [call('first'), call('second', OPUS)] };
      const { data, response } = await b.client.messages.batches.create(params).withResponse();
      expect(response.status).toBe(202);
      const paused = data as unknown as { approvalRequestId: string; approvalUrl: string; code: string };
      expect(paused).toMatchObject({
        approvalUrl: 'llm://llm_a/v1/messages/batches',
        code: 'APPROVAL_REQUIRED',
      });
      expect(fx.mock.since(before)).toEqual([]);
      await fx.approve(paused.approvalRequestId);
      const headers = { 'x-vlt-approval-id': paused.approvalRequestId };
      const done = await b.client.messages.batches.create(params, { headers });
      expect(done.id).toBe('msgbatch_mock1');
      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.json).toEqual(params);
    });
  });

  describe('@anthropic-ai/sdk messages.batches results', () => {
    const BATCH = 'msgbatch_mock2';
    const ended = () => ({
      id: BATCH,
      type: 'message_batch',
      processing_status: 'ended',
      request_counts: { processing: 0, succeeded: 2, errored: 0, canceled: 0, expired: 0 },
      created_at: '2026-01-01T00:00:00Z',
      expires_at: '2026-01-02T00:00:00Z',
      ended_at: '2026-01-01T01:00:00Z',
      archived_at: null,
      cancel_initiated_at: null,
      results_url: `${fx.mock.url}/v1/messages/batches/${BATCH}/results`,
    });
    const line = (custom_id: string, text: string) =>
      JSON.stringify({
        custom_id,
        result: {
          type: 'succeeded',
          message: {
            id: `msg_${custom_id}`,
            type: 'message',
            role: 'assistant',
            model: 'claude-mock',
            content: [{ type: 'text', text }],
            stop_reason: 'end_turn',
            stop_sequence: null,
            usage: { input_tokens: 3, output_tokens: 5 },
          },
        },
      });

    it('regression: results_url addresses the vault: results() reads them through it, redacted, and the agent token never reaches the provider', async () => {
      const routes = [
        fx.mock.route(`GET /v1/messages/batches/${BATCH}`, answerJson(ended())),
        fx.mock.route(
          'GET /v1/messages/batches',
          answerJson({ data: [ended()], has_more: false, first_id: BATCH, last_id: BATCH }),
        ),
        fx.mock.route(`GET /v1/messages/batches/${BATCH}/results`, (_req, res, rec) => {
          rec.status = 200;
          // What the API sends for results: one JSON object a line.
          res.writeHead(200, { 'content-type': 'application/x-jsonl' });
          res.end(`${line('first', 'Write to ann@example.com.')}\n${line('second', 'Nothing to hide.')}\n`);
        }),
      ];
      try {
        const b = await fx.bind('llm_a', {
          rules: { response: [{ label: 'e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }] },
        });
        expectStatus(
          await putAllowlists(fx.admin, b.policyId, [
            {
              baseUrl: fx.mock.url,
              methods: ['GET'],
              pathPatterns: ['/v1/messages/batches', '/v1/messages/batches/*'],
            },
          ]),
          200,
        );
        const client = new Anthropic({
          apiKey: b.token,
          baseURL: `${fx.base}/v1/vault/llm/llm_a`,
          maxRetries: 0,
        });
        const before = fx.mock.requests.length;
        const through = `${fx.base}/v1/vault/llm/llm_a/v1/messages/batches/${BATCH}/results`;
        expect((await client.messages.batches.retrieve(BATCH)).results_url).toBe(through);
        const listed = [];
        for await (const batch of client.messages.batches.list()) listed.push(batch.results_url);
        expect(listed).toEqual([through]);
        const texts: Record<string, string> = {};
        for await (const r of await client.messages.batches.results(BATCH)) {
          if (r.result.type === 'succeeded') {
            texts[r.custom_id] = r.result.message.content
              .map((c) => (c.type === 'text' ? c.text : ''))
              .join('');
          }
        }
        expect(texts).toEqual({ first: 'Write to [REDACTED_EMAIL].', second: 'Nothing to hide.' });
        const seen = fx.mock.since(before);
        expect(seen.map((r) => r.path)).toEqual([
          `/v1/messages/batches/${BATCH}`,
          '/v1/messages/batches',
          `/v1/messages/batches/${BATCH}`,
          `/v1/messages/batches/${BATCH}/results`,
        ]);
        expect(seen.every((r) => r.key === fx.keys.llm_a)).toBe(true);
        expect(sightings(seen, b.token)).toEqual([]);
      } finally {
        for (const u of routes) u();
      }
    });
  });

  describe('@google/genai batches.create (inline requests)', () => {
    const secretRule = {
      label: 'no secrets to the model',
      match: {
        urlPattern: ':generateContent$',
        body: [{ path: 'contents.*.parts.*.text', op: 'contains', value: 'secret' }],
      },
      action: 'deny',
    };
    const client = (apiKey: string) =>
      new GoogleGenAI({
        apiKey,
        httpOptions: {
          baseUrl: `${fx.base}/v1/vault/llm/llm_c`,
          apiVersion: 'v1beta',
          retryOptions: { attempts: 1 },
        },
      });
    const src = (...texts: string[]) =>
      texts.map((t) => ({ contents: [{ role: 'user', parts: [{ text: t }] }] }));

    it('the catalog allowlist admits a batch of allowed calls; it reaches the provider with the stored key', async () => {
      const b = await fx.bind('llm_c', { rules: { request: [secretRule] } });
      const before = fx.mock.requests.length;
      const job = await client(b.token).batches.create({
        model: 'gemini-mock',
        src: src('Say hello.', 'Say goodbye.'),
        config: { displayName: 'nightly' },
      });
      expect(job.name).toBe('batches/mock1');
      const seen = fx.mock.since(before);
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({
        path: '/v1beta/models/gemini-mock:batchGenerateContent',
        key: fx.keys.llm_c,
      });
      expect(sightings(seen, b.token)).toEqual([]);
    });

    it('regression: a rule on generateContent calls holds for a batch of them: ApiError 403 naming the call, nothing sent', async () => {
      const b = await fx.bind('llm_c', { rules: { request: [secretRule] } });
      const before = fx.mock.requests.length;
      const err = await rejection(
        client(b.token).batches.create({ model: 'gemini-mock', src: src('Say hello.', 'The secret is 42.') }),
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(403);
      expect((err as ApiError).message).toContain('vault: batch request #2: denied by a request rule');
      expect(fx.mock.since(before)).toEqual([]);
    });

    it('a redaction must also cover the batch results: then batches.get reads the inline answers redacted', async () => {
      const redactOn = (urlPattern?: string) => ({
        label: 'e-mail',
        match: urlPattern === undefined ? {} : { urlPattern },
        filter: { redact: [{ type: 'email' }] },
      });
      const bindRedacting = async (rule: ReturnType<typeof redactOn>) => {
        const b = await fx.bind('llm_c', { rules: { response: [rule] } });
        expectStatus(
          await putAllowlists(fx.admin, b.policyId, [
            { baseUrl: fx.mock.url, methods: ['GET', 'POST'], pathPatterns: ['/v1beta/models/*'] },
            { baseUrl: fx.mock.url, methods: ['GET'], pathPatterns: ['/v1beta/batches/*'] },
          ]),
          200,
        );
        return b;
      };
      // Only on generateContent: the answers would come back at the batch, unredacted.
      const narrow = await bindRedacting(redactOn(':generateContent$'));
      const before = fx.mock.requests.length;
      const err = await rejection(
        client(narrow.token).batches.create({ model: 'gemini-mock', src: src('Hi.') }),
      );
      expect((err as ApiError).status).toBe(403);
      expect((err as ApiError).message).toContain('response rules apply to its path');
      expect(fx.mock.since(before)).toEqual([]);

      const everywhere = await bindRedacting(redactOn());
      const job = await client(everywhere.token).batches.create({ model: 'gemini-mock', src: src('Hi.') });
      const answer = {
        candidates: [{ content: { role: 'model', parts: [{ text: 'Write to ann@example.com.' }] } }],
      };
      const unroute = fx.mock.route(
        `GET /v1beta/${job.name!}`,
        answerJson({
          name: job.name,
          metadata: {
            state: 'BATCH_STATE_SUCCEEDED',
            output: { inlinedResponses: { inlinedResponses: [{ response: answer }] } },
          },
          done: true,
        }),
      );
      try {
        const done = await client(everywhere.token).batches.get({ name: job.name! });
        const text = done.dest?.inlinedResponses?.[0]?.response?.candidates?.[0]?.content?.parts?.[0]?.text;
        expect(text).toBe('Write to [REDACTED_EMAIL].');
      } finally {
        unroute();
      }
    });

    it('regression: a batch read from an uploaded file is refused: ApiError 403, nothing sent', async () => {
      const b = await fx.bind('llm_c');
      const before = fx.mock.requests.length;
      const err = await rejection(
        client(b.token).batches.create({ model: 'gemini-mock', src: 'files/requests-1' }),
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(403);
      expect((err as ApiError).message).toContain('send its requests inline');
      expect(fx.mock.since(before)).toEqual([]);
    });
  });

  it('regression: openai batches.create (calls in an uploaded file) is refused though the allowlist names it', async () => {
    const b = await fx.bind('llm_b');
    expectStatus(
      await putAllowlists(fx.admin, b.policyId, [
        { baseUrl: fx.mock.url, methods: ['GET', 'POST'], pathPatterns: ['/v1/batches', '/v1/batches/*'] },
      ]),
      200,
    );
    const before = fx.mock.requests.length;
    const client = new OpenAI({
      apiKey: b.token,
      baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`,
      maxRetries: 0,
    });
    const err = await rejection(
      client.batches.create({
        input_file_id: 'file-mock1',
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      }),
    );
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((err as InstanceType<typeof OpenAI.APIError>).message).toContain('send each request on its own');
    expect(fx.mock.since(before)).toEqual([]);
  });
});
