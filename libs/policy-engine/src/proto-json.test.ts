/**
 * Google's APIs (`llm_c`, `suite_a`) read a JSON body as proto3 JSON: a field by its JSON name
 * (`safetySettings`) or its proto name (`safety_settings`) alike. A body matcher written with one
 * spelling must hold for the other, or a hand-written request walks past the rule.
 */
import { describe, expect, it } from 'vitest';
import { protoJsonAliases, resolveJsonPath } from './json-path.js';
import type { ExecutionRequest } from './pipeline.js';
import { evaluateExecution } from './pipeline.js';
import type { PolicyInput } from './test-fixtures.js';
import { outcome, runtime, PUBLIC_HOST_CTX } from './test-fixtures.js';

const ctx = PUBLIC_HOST_CTX;
const GEMINI = 'https://generativelanguage.googleapis.com';
const generate = `${GEMINI}/v1beta/models/gemini-pro:generateContent`;

function policyFor(provider: string, service: string, baseUrl: string, over: PolicyInput = {}) {
  return runtime(
    { allowlists: [{ baseUrl, methods: ['GET', 'POST'], pathPatterns: ['/*'] }], ...over },
    { provider, service },
  );
}
const post = (url: string, body: unknown): ExecutionRequest => ({
  method: 'POST',
  url,
  headers: { 'content-type': 'application/json' },
  body,
});
const contents = [{ role: 'user', parts: [{ text: 'hi' }] }];
const noUnsafe = {
  label: 'safety filters stay on',
  match: { body: [{ path: 'safetySettings.*.threshold', op: 'eq', value: 'BLOCK_NONE' }] },
  action: 'deny',
};

describe('proto JSON field names (Google APIs)', () => {
  it('regression: a rule on safetySettings denies the same field sent as safety_settings (llm_c)', () => {
    const rt = policyFor('llm_c', 'llm_c-generate', GEMINI, { rules: { request: [noUnsafe] } });
    const unsafe = [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }];
    expect(outcome(evaluateExecution(post(generate, { contents, safetySettings: unsafe }), rt, ctx))).toBe(
      'deny:request_rules:rule_denied',
    );
    expect(outcome(evaluateExecution(post(generate, { contents, safety_settings: unsafe }), rt, ctx))).toBe(
      'deny:request_rules:rule_denied',
    );
    expect(outcome(evaluateExecution(post(generate, { contents }), rt, ctx))).toBe('allow');
  });

  it('regression: a rule written in snake_case holds for camelCase too, at every level, in a batch as well', () => {
    const rule = {
      label: 'no tools that run code',
      match: { body: [{ path: 'tools.*.code_execution', op: 'exists' }] },
      action: 'deny',
    };
    const rt = policyFor('llm_c', 'llm_c-generate', GEMINI, { rules: { request: [rule] } });
    const body = { contents, tools: [{ codeExecution: {} }] };
    expect(outcome(evaluateExecution(post(generate, body), rt, ctx))).toBe('deny:request_rules:rule_denied');
    const batch = {
      batch: { input_config: { requests: { requests: [{ request: body }] } } },
    };
    const d = evaluateExecution(
      post(`${GEMINI}/v1beta/models/gemini-pro:batchGenerateContent`, batch),
      rt,
      ctx,
    );
    expect(outcome(d)).toBe('deny:request_rules:rule_denied');
  });

  it('an allow rule must hold for the value under either spelling (ambiguity errs restrictive)', () => {
    const rt = policyFor('llm_c', 'llm_c-generate', GEMINI, {
      defaultMode: 'custom',
      rules: {
        request: [
          {
            label: 'small answers only',
            match: { body: [{ path: 'generationConfig.maxOutputTokens', op: 'in', value: [64, 128] }] },
            action: 'allow',
          },
        ],
      },
    });
    const small = { contents, generationConfig: { maxOutputTokens: 64 } };
    expect(outcome(evaluateExecution(post(generate, small), rt, ctx))).toBe('allow');
    const snake = { contents, generation_config: { max_output_tokens: 64 } };
    expect(outcome(evaluateExecution(post(generate, snake), rt, ctx))).toBe('allow');
    const both = {
      contents,
      generationConfig: { maxOutputTokens: 64 },
      generation_config: { max_output_tokens: 9999 },
    };
    expect(outcome(evaluateExecution(post(generate, both), rt, ctx))).not.toBe('allow');
  });

  it('regression: Google Workspace (suite_a) bodies are read the same way', () => {
    const drive = 'https://www.googleapis.com';
    const rule = {
      label: 'no sharing outside',
      match: { body: [{ path: 'emailAddress', op: 'matches', value: '@outside\\.example$' }] },
      action: 'deny',
    };
    const rt = policyFor('suite_a', 'suite_a-drive', drive, { rules: { request: [rule] } });
    const url = `${drive}/drive/v3/files/f1/permissions`;
    const share = { type: 'user', role: 'writer', email_address: 'eve@outside.example' };
    expect(outcome(evaluateExecution(post(url, share), rt, ctx))).toBe('deny:request_rules:rule_denied');
  });

  it('other providers read their JSON exactly: no second spelling', () => {
    const openai = 'https://api.openai.com';
    const rule = { label: 'no o1', match: { body: [{ path: 'maxTokens', op: 'exists' }] }, action: 'deny' };
    const rt = policyFor('llm_b', 'llm_b-chat', openai, { rules: { request: [rule] } });
    expect(
      outcome(
        evaluateExecution(post(`${openai}/v1/chat/completions`, { max_tokens: 5, messages: [] }), rt, ctx),
      ),
    ).toBe('allow');
  });

  it('protoJsonAliases gives the other spelling of each name segment, none for wildcards and indexes', () => {
    expect(protoJsonAliases(['generationConfig', null, '0', 'topK', 'text'])).toEqual([
      'generation_config',
      null,
      null,
      'top_k',
      null,
    ]);
    expect(protoJsonAliases(['safety_settings', 'threshold'])).toEqual(['safetySettings', null]);
    expect(protoJsonAliases(['contents', 'parts', 'text'])).toBeNull();
    const body = { generation_config: { topK: 3 }, generationConfig: { top_k: 4 } };
    const path = ['generationConfig', 'topK'];
    expect(resolveJsonPath(body, path)).toEqual([]);
    expect(resolveJsonPath(body, path, protoJsonAliases(path)).sort()).toEqual([3, 4]);
  });
});
