/**
 * The batch APIs of the LLM providers (ADR 0101): a message batch (`llm_a`) and an inline
 * Gemini batch (`llm_c`) are judged call by call, as the calls they carry would be; a batch
 * whose calls sit in an uploaded file (`llm_b`, `llm_d`, a Gemini batch from a file) is refused.
 */
import { describe, expect, it } from 'vitest';
import type { ExecutionRequest } from './pipeline.js';
import { evaluateExecution } from './pipeline.js';
import type { PolicyInput } from './test-fixtures.js';
import { runtime, outcome, reasonOf, PUBLIC_HOST_CTX } from './test-fixtures.js';

const ctx = PUBLIC_HOST_CTX;

const A = 'https://api.anthropic.com';
const C = 'https://generativelanguage.googleapis.com';

function post(url: string, body: unknown): ExecutionRequest {
  return { method: 'POST', url, headers: { 'content-type': 'application/json' }, body };
}

const rule = (label: string, match: Record<string, unknown>, action: 'deny' | 'require_approval') => ({
  label,
  match,
  action,
});
const modelIs = (value: string) => ({ body: [{ path: 'model', op: 'eq', value }] });

/** `llm_a` with message batches allowlisted beside messages. */
function anthropic(over: PolicyInput = {}, messages = ['/v1/messages']) {
  return runtime(
    {
      allowlists: [
        { baseUrl: A, methods: ['POST'], pathPatterns: [...messages, '/v1/messages/batches'] },
        { baseUrl: A, methods: ['GET'], pathPatterns: ['/v1/messages/batches', '/v1/messages/batches/*'] },
      ],
      ...over,
    },
    { provider: 'llm_a', service: 'llm_a-messages' },
  );
}

const call = (custom_id: string, model = 'claude-small') => ({
  custom_id,
  params: { model, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] },
});
const messageBatch = (requests: unknown[], path = '/v1/messages/batches') =>
  post(`${A}${path}`, { requests });

describe('llm_a message batches are judged call by call (ADR 0101)', () => {
  it('calls the policy allows go through as one batch', () => {
    const d = evaluateExecution(messageBatch([call('a'), call('b')]), anthropic(), ctx);
    expect(outcome(d)).toBe('allow');
  });

  it('regression: a call naming a model a rule denies denies the batch, though the batch endpoint is allowlisted', () => {
    const rt = anthropic({ rules: { request: [rule('no opus', modelIs('claude-opus'), 'deny')] } });
    expect(
      outcome(evaluateExecution(post(`${A}/v1/messages`, call('x', 'claude-opus').params), rt, ctx)),
    ).toBe('deny:request_rules:rule_denied');
    const d = evaluateExecution(messageBatch([call('first'), call('second', 'claude-opus')]), rt, ctx);
    expect(outcome(d)).toBe('deny:request_rules:rule_denied');
    expect(reasonOf(d)).toBe('batch request second: denied by a request rule');
    if (d.outcome !== 'deny') throw new Error('not denied');
    expect(d.audit.batchOperation).toBe('second');
    expect(d.audit.rule?.label).toBe('no opus');
  });

  it('regression: a call a rule holds for a reviewer holds the whole batch', () => {
    const rt = anthropic({
      rules: { request: [rule('opus needs a human', modelIs('claude-opus'), 'require_approval')] },
    });
    const d = evaluateExecution(messageBatch([call('a'), call('b', 'claude-opus')]), rt, ctx);
    expect(outcome(d)).toBe('approval:rule_requires_approval');
    expect(reasonOf(d)).toBe('batch request b: a request rule requires approval');
  });

  it('regression: a batch is refused when the messages endpoint its calls go to is not allowlisted', () => {
    const rt = anthropic({}, ['/v1/messages/count_tokens']);
    const d = evaluateExecution(messageBatch([call('only')]), rt, ctx);
    expect(outcome(d)).toBe('deny:allowlist:not_allowlisted');
    expect(reasonOf(d)).toBe('batch request only: no allowlist entry matches this method and URL');
  });

  it('a batch under the path of an API URL that goes through a proxy is a batch too', () => {
    const rt = runtime(
      { allowlists: [{ baseUrl: A, methods: ['POST'], pathPatterns: ['/corp/v1/messages/batches'] }] },
      { provider: 'llm_a', service: 'llm_a-messages' },
    );
    const d = evaluateExecution(messageBatch([call('a')], '/corp/v1/messages/batches'), rt, ctx);
    expect(reasonOf(d)).toBe('batch request a: no allowlist entry matches this method and URL');
  });

  it('refuses what cannot be read as the provider reads it, naming the call', () => {
    const rt = anthropic();
    const cases: [unknown, string][] = [
      [{ requests: 'all' }, 'a batch must be a JSON object with a requests array'],
      [{ requests: [call('a'), 7] }, 'batch request 2 is not an object'],
      [{ requests: [{ custom_id: 'p', params: 'hello' }] }, 'batch request p: params must be an object'],
      [{ requests: [{ custom_id: 'q' }] }, 'batch request q: params must be an object'],
    ];
    for (const [body, reason] of cases) {
      const d = evaluateExecution(post(`${A}/v1/messages/batches`, body), rt, ctx);
      expect(outcome(d), reason).toBe('deny:allowlist:batch_refused');
      expect(reasonOf(d)).toBe(reason);
    }
  });

  it('refuses a batch of more than 10,000 calls, and judges one of 10,000', () => {
    const rt = anthropic({ rules: { request: [rule('no opus', modelIs('claude-opus'), 'deny')] } });
    const many = Array.from({ length: 10_000 }, (_, i) => call(`c${i}`));
    expect(outcome(evaluateExecution(messageBatch(many), rt, ctx))).toBe('allow');
    many[9_999] = call('last', 'claude-opus');
    expect(reasonOf(evaluateExecution(messageBatch(many), rt, ctx))).toBe(
      'batch request last: denied by a request rule',
    );
    const d = evaluateExecution(messageBatch([...many, call('one-more')]), rt, ctx);
    expect(reasonOf(d)).toBe('a batch holds at most 10000 requests here');
  });

  it('reading batches back (GET, cancel) is not a batch of calls', () => {
    const rt = anthropic({ rules: { request: [rule('no opus', modelIs('claude-opus'), 'deny')] } });
    for (const path of ['/v1/messages/batches', '/v1/messages/batches/msgbatch_1/results']) {
      expect(outcome(evaluateExecution({ method: 'GET', url: `${A}${path}` }, rt, ctx)), path).toBe('allow');
    }
  });

  it('regression: a call whose answer a redaction guards is refused unless the redaction guards the results too', () => {
    const onMessages = anthropic({
      rules: {
        response: [
          {
            label: 'e-mail',
            match: { urlPattern: '/v1/messages$' },
            filter: { redact: [{ type: 'email' }] },
          },
        ],
      },
    });
    const d = evaluateExecution(messageBatch([call('a')]), onMessages, ctx);
    expect(outcome(d)).toBe('deny:request_rules:batch_response_rules');
    expect(reasonOf(d)).toContain('batch request a: response rules apply to its path');
    const everywhere = anthropic({
      rules: { response: [{ label: 'e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }] },
    });
    expect(outcome(evaluateExecution(messageBatch([call('a')]), everywhere, ctx))).toBe('allow');
    const alsoResults = anthropic({
      rules: {
        response: [
          {
            label: 'e-mail',
            match: { urlPattern: '^/v1/messages(/batches/[^/]+/results)?$' },
            filter: { redact: [{ type: 'email' }] },
          },
        ],
      },
    });
    expect(outcome(evaluateExecution(messageBatch([call('a')]), alsoResults, ctx))).toBe('allow');
    // Field paths name fields of a message, not of a results line: they never carry over.
    const fields = anthropic({
      rules: { response: [{ label: 'no usage', match: {}, filter: { denyFields: ['usage'] } }] },
    });
    expect(outcome(evaluateExecution(messageBatch([call('a')]), fields, ctx))).toBe(
      'deny:request_rules:batch_response_rules',
    );
  });
});

/** `llm_c` with its catalog allowlist (`/v1beta/models/*` admits `:batchGenerateContent`). */
function gemini(over: PolicyInput = {}) {
  return runtime(
    {
      allowlists: [
        { baseUrl: C, methods: ['GET', 'POST'], pathPatterns: ['/v1beta/models', '/v1beta/models/*'] },
      ],
      ...over,
    },
    { provider: 'llm_c', service: 'llm_c-generate' },
  );
}

const generate = (text: string, extra: Record<string, unknown> = {}) => ({
  request: { contents: [{ role: 'user', parts: [{ text }] }], ...extra },
  metadata: { key: text },
});
/** What `@google/genai` sends for `ai.batches.create({ model, src: [...] })`. */
const inline = (requests: unknown[]) => ({
  batch: { displayName: 'b', inputConfig: { requests: { requests } } },
});
const geminiBatch = (body: unknown, model = 'gemini-pro', verb = ':batchGenerateContent') =>
  post(`${C}/v1beta/models/${model}${verb}`, body);

describe('llm_c inline batches are judged call by call (ADR 0101)', () => {
  it('calls the policy allows go through as one batch', () => {
    const d = evaluateExecution(geminiBatch(inline([generate('a'), generate('b')])), gemini(), ctx);
    expect(outcome(d)).toBe('allow');
  });

  it('regression: a rule on the calls’ own path and body holds for the calls of a batch', () => {
    const rt = gemini({
      rules: {
        request: [
          rule(
            'no secrets to the model',
            {
              urlPattern: ':generateContent$',
              body: [{ path: 'contents.*.parts.*.text', op: 'contains', value: 'secret' }],
            },
            'deny',
          ),
        ],
      },
    });
    expect(outcome(evaluateExecution(geminiBatch(inline([generate('hello')])), rt, ctx))).toBe('allow');
    const d = evaluateExecution(geminiBatch(inline([generate('hello'), generate('the secret')])), rt, ctx);
    expect(outcome(d)).toBe('deny:request_rules:rule_denied');
    expect(reasonOf(d)).toBe('batch request #2: denied by a request rule');
    // The proto JSON spelling in snake_case is read the same way.
    const snake = { batch: { input_config: { requests: { requests: [generate('the secret')] } } } };
    expect(outcome(evaluateExecution(geminiBatch(snake), rt, ctx))).toBe('deny:request_rules:rule_denied');
    // So is a colon sent percent-encoded.
    const encoded = geminiBatch(inline([generate('the secret')]), 'gemini-pro', '%3AbatchGenerateContent');
    expect(outcome(evaluateExecution(encoded, rt, ctx))).toBe('deny:request_rules:rule_denied');
  });

  it('a rule denying a model by its path holds for a batch on that model (the path names it)', () => {
    const rt = gemini({
      rules: { request: [rule('no pro', { urlPattern: '/models/gemini-pro:' }, 'deny')] },
    });
    expect(outcome(evaluateExecution(geminiBatch(inline([generate('a')])), rt, ctx))).toBe(
      'deny:request_rules:rule_denied',
    );
    expect(outcome(evaluateExecution(geminiBatch(inline([generate('a')]), 'gemini-flash'), rt, ctx))).toBe(
      'allow',
    );
  });

  it('regression: a call naming a model other than the batch’s is refused', () => {
    const rt = gemini();
    const naming = (model: string) =>
      evaluateExecution(geminiBatch(inline([generate('a', { model })])), rt, ctx);
    expect(reasonOf(naming('gemini-flash'))).toBe('batch request #1: model must be the batch’s model');
    expect(reasonOf(naming('models/gemini-flash'))).toBe('batch request #1: model must be the batch’s model');
    expect(outcome(naming('models/gemini-pro'))).toBe('allow');
    expect(outcome(naming('gemini-pro'))).toBe('allow');
  });

  it('refuses a batch it cannot read call by call, naming why', () => {
    const rt = gemini();
    const cases: [unknown, string][] = [
      [
        { batch: { inputConfig: { fileName: 'files/abc' } } },
        'a batch read from a file is not judged request by request: send its requests inline',
      ],
      [
        { batch: { input_config: { file_name: 'files/abc' } } },
        'a batch read from a file is not judged request by request: send its requests inline',
      ],
      [
        { batch: { inputConfig: { requests: { requests: [] } }, input_config: { file_name: 'files/abc' } } },
        'a batch names inputConfig twice (as inputConfig and input_config)',
      ],
      [{ batch: {} }, 'a batch must hold its requests inline'],
      [inline([{ metadata: { key: 'k' } }]), 'batch request #1: request must be an object'],
    ];
    for (const [body, reason] of cases) {
      const d = evaluateExecution(geminiBatch(body), rt, ctx);
      expect(outcome(d), reason).toBe('deny:allowlist:batch_refused');
      expect(reasonOf(d)).toBe(reason);
    }
  });

  it('an embeddings batch is judged as the embedContent calls it carries; batchEmbedContents answers at once', () => {
    const rt = gemini({
      rules: { request: [rule('no embedding', { urlPattern: ':embedContent$' }, 'deny')] },
    });
    const embed = {
      batch: { inputConfig: { requests: { requests: [{ request: { content: { parts: [] } } }] } } },
    };
    expect(
      outcome(evaluateExecution(geminiBatch(embed, 'embed-1', ':asyncBatchEmbedContent'), rt, ctx)),
    ).toBe('deny:request_rules:rule_denied');
    // A synchronous call whose answer is its own: not a batch, judged on its own path.
    const sync = geminiBatch(
      { requests: [{ model: 'models/embed-1', content: { parts: [] } }] },
      'embed-1',
      ':batchEmbedContents',
    );
    expect(outcome(evaluateExecution(sync, rt, ctx))).toBe('allow');
  });
});

describe('batches whose calls sit in an uploaded file are refused (ADR 0101)', () => {
  const cases = [
    { provider: 'llm_b', service: 'llm_b-chat', base: 'https://api.openai.com', path: '/v1/batches' },
    { provider: 'llm_d', service: 'llm_d-chat', base: 'https://api.mistral.ai', path: '/v1/batch/jobs' },
  ];
  for (const c of cases) {
    it(`regression: ${c.provider} POST ${c.path} is refused though the allowlist names it; reading batches is not`, () => {
      const rt = runtime(
        {
          allowlists: [{ baseUrl: c.base, methods: ['GET', 'POST'], pathPatterns: [c.path, `${c.path}/*`] }],
        },
        { provider: c.provider, service: c.service },
      );
      const body = { input_file_id: 'file-abc', endpoint: '/v1/chat/completions', completion_window: '24h' };
      const d = evaluateExecution(post(`${c.base}${c.path}`, body), rt, ctx);
      expect(outcome(d)).toBe('deny:allowlist:batch_refused');
      expect(reasonOf(d)).toContain('send each request on its own');
      expect(outcome(evaluateExecution({ method: 'GET', url: `${c.base}${c.path}` }, rt, ctx))).toBe('allow');
      expect(outcome(evaluateExecution(post(`${c.base}${c.path}/b1/cancel`, {}), rt, ctx))).toBe('allow');
    });
  }
});
