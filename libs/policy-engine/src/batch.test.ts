import { describe, expect, it } from 'vitest';
import type { ExecutionRequest } from './pipeline.js';
import { evaluateExecution } from './pipeline.js';
import { requestFingerprint } from './fingerprint.js';
import type { PolicyInput } from './test-fixtures.js';
import { runtime, outcome, reasonOf, PUBLIC_HOST_CTX } from './test-fixtures.js';

const GRAPH = 'https://graph.microsoft.com';
const BATCH = `${GRAPH}/v1.0/$batch`;
const ctx = PUBLIC_HOST_CTX;

/** A Graph policy that allowlists the batch endpoint and reading mail, nothing else. */
function graphPolicy(over: PolicyInput = {}) {
  return runtime(
    {
      allowlists: [
        { baseUrl: GRAPH, methods: ['POST'], pathPatterns: ['/v1.0/$batch', '/v1.0/%24batch'] },
        { baseUrl: GRAPH, methods: ['GET'], pathPatterns: ['/v1.0/me/messages', '/v1.0/me/messages/*'] },
        { baseUrl: GRAPH, methods: ['POST'], pathPatterns: ['/v1.0/me/sendMail'] },
        { baseUrl: GRAPH, methods: ['DELETE'], pathPatterns: ['/v1.0/me/messages/*'] },
      ],
      ...over,
    },
    { provider: 'suite_b', service: 'suite_b-mail' },
  );
}

function batch(requests: unknown[], url = BATCH): ExecutionRequest {
  return { method: 'POST', url, headers: { 'content-type': 'application/json' }, body: { requests } };
}

const read = (id: string, url = '/me/messages') => ({ id, method: 'GET', url });
const rule = (label: string, match: Record<string, unknown>, action: 'deny' | 'require_approval') => ({
  label,
  match,
  action,
});
/** Any Graph path allowed, to chat 19:ok@thread.v2 only. */
const chatConstrained = () =>
  graphPolicy({
    allowlists: [{ baseUrl: GRAPH, methods: ['GET', 'POST'], pathPatterns: ['/*'] }],
    providerConstraints: {
      provider: 'suite_b',
      allowedTenantIds: [],
      allowedChatIds: ['19:ok@thread.v2'],
      allowedChannelIds: [],
    },
  });
/** The Graph policy with these request rules. */
const withRules = (...request: unknown[]) => graphPolicy({ rules: { request } });

describe('a Graph $batch is judged operation by operation (ADR 0101)', () => {
  it('reads that the allowlist allows go through as one batch', () => {
    const d = evaluateExecution(
      batch([read('1'), read('2', 'me/messages/AAMk=?$select=subject')]),
      graphPolicy(),
      ctx,
    );
    expect(outcome(d)).toBe('allow');
  });

  it('regression: an operation the allowlist does not allow is refused, though the batch endpoint is allowlisted', () => {
    const d = evaluateExecution(
      batch([read('1'), { id: 'two', method: 'PATCH', url: '/me/mailboxSettings', body: { x: 1 } }]),
      graphPolicy(),
      ctx,
    );
    expect(outcome(d)).toBe('deny:allowlist:not_allowlisted');
    expect(reasonOf(d)).toBe('batch request two: no allowlist entry matches this method and URL');
    if (d.outcome === 'deny') expect(d.audit.batchOperation).toBe('two');
  });

  it('regression: a request rule denying an operation denies the batch that carries it', () => {
    const rt = withRules(rule('no deletes', { methods: ['DELETE'], urlPattern: '/me/messages/' }, 'deny'));
    expect(
      outcome(evaluateExecution({ method: 'DELETE', url: `${GRAPH}/v1.0/me/messages/m1` }, rt, ctx)),
    ).toBe('deny:request_rules:rule_denied');
    const d = evaluateExecution(
      batch([read('1'), { id: '2', method: 'DELETE', url: '/me/messages/m1' }]),
      rt,
      ctx,
    );
    expect(outcome(d)).toBe('deny:request_rules:rule_denied');
    expect(reasonOf(d)).toBe('batch request 2: denied by a request rule');
    if (d.outcome === 'deny') expect(d.audit.rule?.label).toBe('no deletes');
  });

  it('regression: a rule that requires approval for an operation holds the whole batch, bound to every operation', () => {
    const rt = withRules(
      rule('sending needs a human', { methods: ['POST'], urlPattern: '/me/sendMail$' }, 'require_approval'),
    );
    const send = {
      id: 's',
      method: 'POST',
      url: '/me/sendMail',
      body: { message: { toRecipients: [{ emailAddress: { address: 'x@example.com' } }] } },
    };
    const d = evaluateExecution(batch([read('1'), send]), rt, ctx);
    expect(outcome(d)).toBe('approval:rule_requires_approval');
    expect(reasonOf(d)).toBe('batch request s: a request rule requires approval');
    // Another operation in the same batch is another request for the approval.
    const other = evaluateExecution(batch([read('1', '/me/messages/m2'), send]), rt, ctx);
    if (d.outcome !== 'require_approval' || other.outcome !== 'require_approval')
      throw new Error('no approval');
    expect(other.fingerprint).not.toBe(d.fingerprint);
    expect(d.fingerprint).toBe(
      requestFingerprint({
        method: 'POST',
        href: BATCH,
        body: JSON.stringify({ requests: [read('1'), send] }),
        bodyIsJson: true,
        requestFullFields: false,
        headers: { 'content-type': 'application/json' },
      }),
    );
  });

  it('a deny after an approval still denies; the approval is no way around it', () => {
    const rt = withRules(
      rule('ask', { methods: ['POST'], urlPattern: '/me/sendMail$' }, 'require_approval'),
      rule('never delete', { methods: ['DELETE'] }, 'deny'),
    );
    const d = evaluateExecution(
      batch([
        { id: 'a', method: 'POST', url: '/me/sendMail', body: {} },
        { id: 'b', method: 'DELETE', url: '/me/messages/m1' },
      ]),
      rt,
      ctx,
    );
    expect(outcome(d)).toBe('deny:request_rules:rule_denied');
    expect(reasonOf(d)).toContain('batch request b');
  });

  it('a body matcher reads the operation’s own body', () => {
    const outside = {
      path: 'message.toRecipients.*.emailAddress.address',
      op: 'matches',
      value: '@outside\\.example$',
    };
    const rt = withRules(rule('no outside recipients', { body: [outside] }, 'deny'));
    const send = (address: string) => ({
      id: '1',
      method: 'POST',
      url: '/me/sendMail',
      body: { message: { toRecipients: [{ emailAddress: { address } }] } },
    });
    expect(outcome(evaluateExecution(batch([send('a@inside.example')]), rt, ctx))).toBe('allow');
    expect(outcome(evaluateExecution(batch([send('a@outside.example')]), rt, ctx))).toBe(
      'deny:request_rules:rule_denied',
    );
  });

  it('regression: an operation whose path has response rules is refused, its answer could not be filtered', () => {
    const rt = graphPolicy({
      rules: {
        response: [
          {
            label: 'no bodies of mail',
            match: { urlPattern: '/me/messages' },
            filter: { denyFields: ['body', 'value.*.body'] },
          },
        ],
      },
    });
    const d = evaluateExecution(batch([read('1')]), rt, ctx);
    expect(outcome(d)).toBe('deny:request_rules:batch_response_rules');
    expect(reasonOf(d)).toContain('batch request 1: response rules apply to its path');
    // A redaction that guards every path reads every string of the batch's answer too.
    const everywhere = graphPolicy({
      rules: { response: [{ label: 'e-mail', match: {}, filter: { redact: [{ type: 'email' }] } }] },
    });
    expect(outcome(evaluateExecution(batch([read('1')]), everywhere, ctx))).toBe('allow');
    // Field paths are paths in the operation's answer, not in the batch's: they never carry over.
    const fields = graphPolicy({
      rules: { response: [{ label: 'no bodies', match: {}, filter: { denyFields: ['value.*.body'] } }] },
    });
    expect(outcome(evaluateExecution(batch([read('1')]), fields, ctx))).toBe(
      'deny:request_rules:batch_response_rules',
    );
  });

  it('an operation whose answer the provider constraints filter is refused too', () => {
    const rt = chatConstrained();
    expect(outcome(evaluateExecution({ method: 'GET', url: `${GRAPH}/v1.0/me/chats` }, rt, ctx))).toBe(
      'allow',
    );
    expect(outcome(evaluateExecution(batch([read('1', '/me/chats')]), rt, ctx))).toBe(
      'deny:request_rules:batch_response_rules',
    );
  });

  it('regression: %24batch is a batch too (Graph may decode it); its operations are judged', () => {
    const d = evaluateExecution(
      batch([{ id: '1', method: 'PATCH', url: '/me/mailboxSettings', body: {} }], `${GRAPH}/v1.0/%24batch`),
      graphPolicy(),
      ctx,
    );
    expect(outcome(d)).toBe('deny:allowlist:not_allowlisted');
  });

  it('regression: the provider constraints read the operations of a %24batch too', () => {
    const rt = chatConstrained();
    const post = (chat: string) => ({ id: '1', method: 'POST', url: `/chats/${chat}/messages`, body: {} });
    expect(
      outcome(evaluateExecution(batch([post('19:ok@thread.v2')], `${GRAPH}/v1.0/%24batch`), rt, ctx)),
    ).toBe('allow');
    expect(
      outcome(evaluateExecution(batch([post('19:bad@thread.v2')], `${GRAPH}/v1.0/%24batch`), rt, ctx)),
    ).toBe('deny:provider_constraints:provider_constraint');
  });

  it.each<[string, unknown, string]>([
    ['no requests array', { notRequests: [] }, 'a batch must be a JSON object with a requests array'],
    [
      'more than 20 operations',
      { requests: Array.from({ length: 21 }, (_, i) => read(String(i))) },
      'at most 20',
    ],
    ['an operation that is not an object', { requests: ['GET /me'] }, 'batch request 1 is not an object'],
    ['no method', { requests: [{ id: '1', url: '/me/messages' }] }, 'batch request 1: method must be'],
    ['an unknown method', { requests: [{ id: '1', method: 'MOVE', url: '/me/messages' }] }, 'method must be'],
    ['no url', { requests: [{ id: '1', method: 'GET' }] }, 'batch request 1: url is required'],
    [
      'an absolute url',
      { requests: [{ id: '1', method: 'GET', url: 'https://evil.example/v1.0/me/messages' }] },
      'url must be relative',
    ],
    [
      'a scheme-relative url',
      { requests: [{ id: '1', method: 'GET', url: '//evil.example/me' }] },
      'relative',
    ],
    ['a backslash', { requests: [{ id: '1', method: 'GET', url: '\\\\evil.example\\me' }] }, 'relative'],
    [
      'a batch in the batch',
      { requests: [{ id: '1', method: 'POST', url: '/$batch', body: {} }] },
      'another batch',
    ],
    [
      'a method override in an operation’s headers',
      {
        requests: [
          { id: '1', method: 'GET', url: '/me/messages/m1', headers: { 'X-HTTP-Method-Override': 'DELETE' } },
        ],
      },
      'batch request 1: header "X-HTTP-Method-Override" is not allowed',
    ],
    [
      'headers that are not an object',
      { requests: [{ id: '1', method: 'GET', url: '/me', headers: 'x' }] },
      'headers',
    ],
  ])('refuses a batch with %s (403, nothing sent)', (_name, body, reason) => {
    const d = evaluateExecution(
      { method: 'POST', url: BATCH, headers: { 'content-type': 'application/json' }, body },
      graphPolicy(),
      ctx,
    );
    expect(outcome(d)).toBe('deny:allowlist:batch_refused');
    expect(reasonOf(d)).toContain(reason);
  });

  it('names an operation whose id could not be stored by its position, never by the id', () => {
    for (const id of ['a\u0000b', '\ud800', 'x'.repeat(65), 'two words', 7]) {
      const d = evaluateExecution(
        batch([read('1'), { id, method: 'PATCH', url: '/me/x', body: {} }]),
        graphPolicy(),
        ctx,
      );
      expect(reasonOf(d), JSON.stringify(id)).toBe(
        'batch request #2: no allowlist entry matches this method and URL',
      );
      if (d.outcome === 'deny') expect(d.audit.batchOperation).toBe('#2');
    }
  });

  it('refuses a batch body a lenient parser would read otherwise (400), though no rule reads bodies', () => {
    const d = evaluateExecution(
      {
        method: 'POST',
        url: BATCH,
        headers: { 'content-type': 'application/json' },
        body: '\uFEFF{"requests":[{"id":"1","method":"DELETE","url":"/me/messages/m1"}]}',
      },
      graphPolicy(),
      ctx,
    );
    expect(d.outcome).toBe('bad_request');
  });

  it('regression: a Google batch (suite_a) is refused, its operations unread, though the allowlist names it', () => {
    const rt = runtime(
      {
        allowlists: [
          {
            baseUrl: 'https://gmail.googleapis.com',
            methods: ['POST'],
            pathPatterns: ['/batch/*', '/batch', '/corp-proxy/*'],
          },
        ],
      },
      { provider: 'suite_a', service: 'suite_a-mail' },
    );
    const body = [
      '--b',
      'Content-Type: application/http',
      '',
      'DELETE /gmail/v1/users/me/messages/m1',
      '',
      '--b--',
      '',
    ].join('\r\n');
    // Also under the path of an API URL that goes through a proxy.
    for (const path of ['/batch/gmail/v1', '/batch', '/corp-proxy/batch/gmail/v1']) {
      const d = evaluateExecution(
        {
          method: 'POST',
          url: `https://gmail.googleapis.com${path}`,
          headers: { 'content-type': 'multipart/mixed; boundary=b' },
          body,
        },
        rt,
        ctx,
      );
      expect(outcome(d), path).toBe('deny:allowlist:batch_refused');
      expect(reasonOf(d)).toContain('send each request on its own');
    }
  });

  it('leaves other providers’ paths named $batch alone', () => {
    const rt = runtime({
      allowlists: [{ baseUrl: 'https://api.example.com', methods: ['POST'], pathPatterns: ['/v1/$batch'] }],
    });
    const d = evaluateExecution(
      { method: 'POST', url: 'https://api.example.com/v1/$batch', body: { anything: true } },
      rt,
      ctx,
    );
    expect(outcome(d)).toBe('allow');
  });
});
