/**
 * VLT_LLM_TIMEOUT_MS (ADR 0074): a model may think for minutes before its first byte, or pause
 * between two events, and the official SDKs wait ten minutes for it. LLM proxy calls therefore
 * wait for the provider as long as VLT_LLM_TIMEOUT_MS says, not the brokered calls' limits
 * (VLT_UPSTREAM_TIMEOUT_MS, _IDLE_TIMEOUT_MS, _DEADLINE_MS), which here are far shorter.
 */
import OpenAI, { APIError, APIUserAbortError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollAudit } from '../support/api-client.js';
import { startLlmGateway, type LlmGateway } from '../support/mock-llm.js';

const MESSAGES = [{ role: 'user' as const, content: 'Think, then say hello.' }];

describe('LLM proxy calls wait for the provider as long as VLT_LLM_TIMEOUT_MS', () => {
  let fx: LlmGateway;
  let sdk: OpenAI;

  beforeAll(async () => {
    fx = await startLlmGateway({
      env: {
        VLT_UPSTREAM_TIMEOUT_MS: '200',
        VLT_UPSTREAM_IDLE_TIMEOUT_MS: '200',
        VLT_UPSTREAM_DEADLINE_MS: '300',
        VLT_LLM_TIMEOUT_MS: '4000',
      },
    });
    const b = await fx.bind('llm_b');
    sdk = new OpenAI({ apiKey: b.token, baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await fx?.close();
  });

  it('a model that thinks for 1.5 s before answering, or pauses 1.5 s between events, is waited for', async () => {
    // undici checks time limits on a timer wheel of about half a second, so a 200 ms limit
    // fires within a second: the pauses are longer than that.
    fx.mock.thinkMs = 1_500;
    fx.mock.stream = { parts: ['Hello after a pause.'], gapMs: 1_500 };
    fx.mock.reply = 'Hello after thinking.';
    const [answer, streamed] = await Promise.all([
      sdk.chat.completions.create({ model: 'gpt-mock', messages: MESSAGES }),
      (async () => {
        let text = '';
        const stream = await sdk.chat.completions.create({
          model: 'gpt-mock',
          messages: MESSAGES,
          stream: true,
        });
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
        return text;
      })(),
    ]);
    expect(answer.choices[0]!.message.content).toBe('Hello after thinking.');
    expect(streamed).toBe('Hello after a pause.');
  });

  it('a model that thinks longer than VLT_LLM_TIMEOUT_MS is answered 502 in the provider shape', async () => {
    fx.mock.thinkMs = 6_000;
    const err = await sdk.chat.completions.create({ model: 'gpt-mock', messages: MESSAGES }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).status).toBe(502);
    expect((err as APIError).message).toMatch(/timed out/);
    fx.mock.thinkMs = 0;
  });

  /** Resolves once `ok()` holds, or after `ms` (the assertion after it tells which). */
  async function until(ok: () => boolean, ms: number): Promise<void> {
    for (const end = Date.now() + ms; !ok() && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
  }

  // Regression: the vault waited for the provider after the agent had gone, and a real model
  // kept generating, and billing, for up to VLT_LLM_TIMEOUT_MS (ten minutes by default).
  it.each([false, true])(
    'an agent that gives up while the model thinks cancels the provider call (stream: %s)',
    async (stream) => {
      fx.mock.thinkMs = 3_000;
      const b = await fx.bind('llm_b');
      const agentSdk = new OpenAI({
        apiKey: b.token,
        baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`,
        maxRetries: 0,
      });
      const before = fx.mock.requests.length;
      const gaveUp = new AbortController();
      const call = agentSdk.chat.completions
        .create({ model: 'gpt-mock', messages: MESSAGES, stream }, { signal: gaveUp.signal })
        .then(
          () => null,
          (e: unknown) => e,
        );
      await until(() => fx.mock.requests.length > before, 5_000);
      const atProvider = fx.mock.requests[before]!;
      gaveUp.abort();
      expect(await call).toBeInstanceOf(APIUserAbortError);
      // Well before the model's answer: the vault let go of the provider.
      await until(() => atProvider.closedEarly, 1_500);
      expect(atProvider.closedEarly).toBe(true);
      const errors = await pollAudit(
        fx.admin,
        { agentId: b.agentId, action: 'execution_error' },
        (e) => e.length > 0,
        10_000,
      );
      expect(errors.map((e) => e.metadata.error)).toEqual(['client_closed']);
      fx.mock.thinkMs = 0;
    },
  );
});
