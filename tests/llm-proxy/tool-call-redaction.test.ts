/**
 * ADR 0043: a streamed tool call's JSON arguments through the official SDKs (chat completions,
 * Responses API, messages API), against the local HTTPS mock. The arguments arrive a few
 * characters per event, as text deltas do, so an address split across the pieces must still be
 * redacted when the policy redacts e-mail: in every raw event the agent sees, and in what the
 * SDK accumulates from them.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startLlmGateway, type BindOptions, type LlmGateway } from '../support/mock-llm.js';

/** One address split across three argument pieces: no single event shows it. */
const ARGS = ['{"to":"ali', 'ce@exam', 'ple.com","subject":"Hi"}'];
const PLAIN = { to: 'alice@example.com', subject: 'Hi' };
const REDACTED = { to: '[REDACTED_EMAIL]', subject: 'Hi' };
const REDACT: BindOptions['rules'] = {
  response: [{ label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }],
};
const PROMPT = 'Mail Alice.';
const MAIL_SCHEMA = {
  type: 'object' as const,
  properties: { to: { type: 'string' }, subject: { type: 'string' } },
  required: ['to', 'subject'],
};
const OPENAI_TOOLS: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'send_mail', parameters: MAIL_SCHEMA } },
];
const ANTHROPIC_TOOLS: Anthropic.Tool[] = [{ name: 'send_mail', input_schema: MAIL_SCHEMA }];

/** The JSON value of `text`, or `text` itself when it is not JSON (so a failure shows it). */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Argument text exactly as the provider sent it (proves the mock and the SDK path). */
function expectIntact(args: string) {
  expect(args).toBe(ARGS.join(''));
  expect(parsed(args)).toEqual(PLAIN);
}

/** Argument text with the address redacted, still the same JSON otherwise. */
function expectRedacted(args: string) {
  expect(args).not.toContain('alice');
  expect(args).not.toContain('example.com');
  expect(parsed(args)).toEqual(REDACTED);
}

describe('streamed tool call arguments through the LLM proxy (embedded)', () => {
  let fx: LlmGateway;

  beforeAll(async () => {
    fx = await startLlmGateway({ shape: 'embedded' });
  });
  afterAll(async () => {
    await fx?.close();
  });
  beforeEach(() => {
    fx.mock.reply = 'Hello from the mock model.';
    fx.mock.stream = { parts: ['Hello', ' from', ' the', ' mock', ' model.'], toolArgs: [...ARGS] };
  });

  describe('openai chat completions (llm_b)', () => {
    const MESSAGES = [{ role: 'user' as const, content: PROMPT }];

    function client(apiKey: string) {
      return new OpenAI({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`, maxRetries: 0 });
    }

    /** Every `delta.tool_calls[index 0].function.arguments` of a plain streamed create(). */
    async function rawArgs(token: string) {
      const stream = await client(token).chat.completions.create({
        model: 'gpt-mock',
        messages: MESSAGES,
        tools: OPENAI_TOOLS,
        stream: true,
      });
      let args = '';
      let finish: string | null = null;
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        for (const call of c?.delta.tool_calls ?? [])
          if (call.index === 0) args += call.function?.arguments ?? '';
        if (c?.finish_reason) finish = c.finish_reason;
      }
      return { args, finish };
    }

    /** The tool call `chat.completions.stream()` accumulated. */
    async function finalCall(token: string) {
      const final = await client(token)
        .chat.completions.stream({ model: 'gpt-mock', messages: MESSAGES, tools: OPENAI_TOOLS })
        .finalChatCompletion();
      expect(final.choices[0]!.finish_reason).toBe('tool_calls');
      const calls = final.choices[0]!.message.tool_calls ?? [];
      expect(calls).toHaveLength(1);
      const call = calls[0]!;
      if (call.type !== 'function') throw new Error(`expected a function tool call, got ${call.type}`);
      expect(call.function.name).toBe('send_mail');
      return call.function.arguments;
    }

    it('no rule: the argument pieces and the accumulated tool call arrive intact', async () => {
      const b = await fx.bind('llm_b');
      const raw = await rawArgs(b.token);
      expect(raw.finish).toBe('tool_calls');
      expectIntact(raw.args);
      expectIntact(await finalCall(b.token));
    });

    it('e-mail rule: the concatenated argument deltas of a streamed create() are redacted', async () => {
      const b = await fx.bind('llm_b', { rules: REDACT });
      expectRedacted((await rawArgs(b.token)).args);
    });

    it("e-mail rule: finalChatCompletion()'s tool call arguments are redacted", async () => {
      const b = await fx.bind('llm_b', { rules: REDACT });
      expectRedacted(await finalCall(b.token));
    });
  });

  describe('openai Responses API (llm_b)', () => {
    function client(apiKey: string) {
      return new OpenAI({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`, maxRetries: 0 });
    }

    /** Every `response.function_call_arguments.delta` of a streamed create(), concatenated. */
    async function rawArgs(token: string) {
      const stream = await client(token).responses.create({ model: 'gpt-mock', input: 'x', stream: true });
      let args = '';
      const types: string[] = [];
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === 'response.function_call_arguments.delta') args += event.delta;
      }
      return { args, types };
    }

    /** The function call item of the response `responses.stream()` accumulated. */
    async function finalCall(token: string) {
      const final = await client(token).responses.stream({ model: 'gpt-mock', input: 'x' }).finalResponse();
      expect(final.status).toBe('completed');
      const calls = final.output.filter((item) => item.type === 'function_call');
      expect(calls).toHaveLength(1);
      expect(calls[0]!.name).toBe('send_mail');
      return calls[0]!.arguments;
    }

    it('no rule: the argument deltas and the final function call item arrive intact', async () => {
      const b = await fx.bind('llm_b');
      const raw = await rawArgs(b.token);
      expect(raw.types[0]).toBe('response.created');
      expect(raw.types.at(-1)).toBe('response.completed');
      expect(raw.types.filter((t) => t === 'response.function_call_arguments.delta')).toHaveLength(
        ARGS.length,
      );
      expectIntact(raw.args);
      expectIntact(await finalCall(b.token));
    });

    it('e-mail rule: the concatenated response.function_call_arguments.delta deltas are redacted', async () => {
      const b = await fx.bind('llm_b', { rules: REDACT });
      expectRedacted((await rawArgs(b.token)).args);
    });

    it("e-mail rule: finalResponse()'s function_call item arguments are redacted", async () => {
      const b = await fx.bind('llm_b', { rules: REDACT });
      expectRedacted(await finalCall(b.token));
    });
  });

  describe('anthropic messages (llm_a)', () => {
    const PARAMS = {
      model: 'claude-mock',
      max_tokens: 64,
      messages: [{ role: 'user' as const, content: PROMPT }],
      tools: ANTHROPIC_TOOLS,
    };

    function client(apiKey: string) {
      return new Anthropic({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_a`, maxRetries: 0 });
    }

    /** Every `input_json_delta.partial_json` of a raw streamed create(), concatenated. */
    async function rawArgs(token: string) {
      const stream = await client(token).messages.create({ ...PARAMS, stream: true });
      let args = '';
      let stop: string | null = null;
      for await (const ev of stream) {
        if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta')
          args += ev.delta.partial_json;
        if (ev.type === 'message_delta') stop = ev.delta.stop_reason;
      }
      return { args, stop };
    }

    /** The tool_use block's input of the message `messages.stream()` accumulated. */
    async function finalInput(token: string) {
      const final = await client(token).messages.stream(PARAMS).finalMessage();
      expect(final.stop_reason).toBe('tool_use');
      const uses = final.content.filter((block) => block.type === 'tool_use');
      expect(uses).toHaveLength(1);
      expect(uses[0]!.name).toBe('send_mail');
      return uses[0]!.input;
    }

    it('no rule: the partial_json pieces and the final tool_use input arrive intact', async () => {
      const b = await fx.bind('llm_a');
      const raw = await rawArgs(b.token);
      expect(raw.stop).toBe('tool_use');
      expectIntact(raw.args);
      expect(await finalInput(b.token)).toEqual(PLAIN);
    });

    it('e-mail rule: the concatenated partial_json of a raw streamed create() is redacted', async () => {
      const b = await fx.bind('llm_a', { rules: REDACT });
      expectRedacted((await rawArgs(b.token)).args);
    });

    it("e-mail rule: finalMessage()'s tool_use input is redacted", async () => {
      const b = await fx.bind('llm_a', { rules: REDACT });
      const input = await finalInput(b.token);
      expect(JSON.stringify(input)).not.toContain('alice');
      expect(JSON.stringify(input)).not.toContain('example.com');
      expect(input).toEqual(REDACTED);
    });
  });
});
