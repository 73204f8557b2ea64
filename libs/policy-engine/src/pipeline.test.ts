import { describe, expect, it } from 'vitest';
import type { ExecutionContext, ExecutionRequest } from './pipeline.js';
import { evaluateExecution, evaluatePrepared, evaluateTokenVending, prepareExecution } from './pipeline.js';
import { requestFingerprint } from './fingerprint.js';
import type { PolicyInput } from './test-fixtures.js';
import { runtime, outcome } from './test-fixtures.js';

const PUBLIC = ['93.184.216.34'];
const NOW = new Date('2024-01-01T12:00:00Z'); // a Monday

function ctx(over: Partial<ExecutionContext> = {}): ExecutionContext {
  return {
    now: NOW,
    requestsInLastHour: 0,
    ssrfAllowCidrs: [],
    model: 'B',
    resolvedAddresses: PUBLIC,
    ...over,
  };
}

const GET: ExecutionRequest = { method: 'GET', url: 'https://api.example.com/v1/items' };
const POST: ExecutionRequest = {
  method: 'POST',
  url: 'https://api.example.com/v1/items',
  body: { name: 'x' },
};

describe('evaluateExecution: request validation (400)', () => {
  const rt = runtime();
  it.each<[ExecutionRequest, string]>([
    [{ method: 'HEAD', url: GET.url }, 'method'],
    [{ method: 'TRACE', url: GET.url }, 'method'],
    [{ method: 'GET', url: '' }, 'url is required'],
    [{ method: 'GET', url: 'not a url' }, 'invalid url'],
    [{ method: 'GET', url: GET.url, query: { a: 1 as unknown as string } }, 'query'],
    [{ method: 'GET', url: GET.url, headers: { 'X-HTTP-Method-Override': 'DELETE' } }, 'not allowed'],
    [{ method: 'GET', url: GET.url, headers: { 'x-ok': 'a\r\nInjected: 1' } }, 'invalid value'],
    [{ method: 'POST', url: GET.url, body: '{"to":"a","to":"b"}' }, 'repeats the key "to"'],
  ])('%j → 400 (%s)', (req, reason) => {
    const d = evaluateExecution(req, rt, ctx());
    expect(d.outcome).toBe('bad_request');
    if (d.outcome === 'bad_request') expect(d.reason).toContain(reason);
  });

  it('accepts lower-case methods', () => {
    expect(evaluateExecution({ ...GET, method: 'get' }, rt, ctx()).outcome).toBe('allow');
  });
});

describe('prepareExecution: a request read once, asked about again', () => {
  it('decides at every asking as evaluateExecution decides the request itself', () => {
    const rt = runtime({ stepUpApproval: 'risk_based' });
    const requests: ExecutionRequest[] = [
      GET,
      POST,
      {
        method: 'POST',
        url: POST.url,
        headers: { 'content-type': 'application/json' },
        body: '{"name":"x"}',
      },
      {
        method: 'POST',
        url: POST.url,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'a=1',
      },
      { method: 'DELETE', url: POST.url },
      { method: 'GET', url: 'not a url' },
      { method: 'GET', url: 'https://api.example.com/elsewhere' },
      { method: 'POST', url: POST.url, body: '{"to":"a","to":"b"}' },
      { method: 'TRACE', url: GET.url },
    ];
    const askings: ExecutionContext[] = [
      ctx({ resolvedAddresses: undefined }),
      ctx(),
      ctx({ resolvedAddresses: ['10.0.0.1'] }),
      ctx({ approval: { status: 'approved', fingerprintMatches: true } }),
      ctx({ approval: { status: 'approved', fingerprintMatches: false } }),
    ];
    for (const req of requests) {
      const prepared = prepareExecution(req, rt);
      for (const asked of askings) {
        expect(evaluatePrepared(prepared, asked), JSON.stringify(req)).toEqual(
          evaluateExecution(req, rt, asked),
        );
      }
    }
  });

  it('keeps the order of refusals: a malformed URL is judged at step 3, after the model and time window', () => {
    const prepared = prepareExecution({ method: 'GET', url: 'not a url' }, runtime({ allowedModels: ['A'] }));
    expect(outcome(evaluatePrepared(prepared, ctx()))).toBe('deny:model:model_not_allowed');
  });
});

describe('evaluateExecution: each step refuses', () => {
  it('1. the policy must allow the model', () => {
    expect(outcome(evaluateExecution(GET, runtime({ allowedModels: ['A'] }), ctx()))).toBe(
      'deny:model:model_not_allowed',
    );
  });

  it('2. time windows', () => {
    const rt = runtime({ timeWindows: [{ dayOfWeek: 2, startHour: 0, endHour: 23, timezone: 'UTC' }] });
    expect(outcome(evaluateExecution(GET, rt, ctx()))).toBe('deny:time_window:outside_time_window');
    expect(outcome(evaluateExecution(GET, rt, ctx({ now: new Date('2024-01-02T12:00:00Z') })))).toBe('allow');
  });

  it('3. the allowlist, default deny, on the canonical URL', () => {
    const rt = runtime({
      allowlists: [{ baseUrl: 'https://api.example.com', methods: ['GET'], pathPatterns: ['/v1/items*'] }],
    });
    expect(outcome(evaluateExecution(GET, rt, ctx()))).toBe('allow');
    expect(outcome(evaluateExecution(POST, rt, ctx()))).toBe('deny:allowlist:not_allowlisted');
    expect(
      outcome(
        evaluateExecution({ method: 'GET', url: 'https://api.example.com/v1/items/../../admin' }, rt, ctx()),
      ),
    ).toBe('deny:allowlist:not_allowlisted');
    expect(
      outcome(
        evaluateExecution({ method: 'GET', url: 'https://api.example.com@evil.example/v1/items' }, rt, ctx()),
      ),
    ).toBe('deny:allowlist:url_refused');
    expect(
      outcome(evaluateExecution({ method: 'GET', url: 'http://api.example.com/v1/items' }, rt, ctx())),
    ).toBe('deny:allowlist:url_refused');
    expect(
      outcome(
        evaluateExecution(
          { method: 'GET', url: 'https://api.example.com/v1/items%2f..%2f..%2fadmin' },
          rt,
          ctx(),
        ),
      ),
    ).toBe('deny:allowlist:url_refused');
    expect(outcome(evaluateExecution(GET, runtime({ allowlists: [] }), ctx()))).toBe(
      'deny:allowlist:not_allowlisted',
    );
  });

  it('4. SSRF: asks for resolution and never resolves itself', () => {
    const rt = runtime();
    const d = evaluateExecution(GET, rt, ctx({ resolvedAddresses: undefined }));
    expect(d).toEqual({ outcome: 'needs_resolution', host: 'api.example.com', port: 443 });
  });

  it.each([
    [['10.0.0.5']],
    [['93.184.216.34', '127.0.0.1']],
    [['::ffff:169.254.169.254']],
    [['64:ff9b::a9fe:a9fe']],
    [[]],
    [['0x7f.1']],
  ])('4. SSRF: refuses resolved addresses %j', (addresses) => {
    expect(outcome(evaluateExecution(GET, runtime(), ctx({ resolvedAddresses: addresses })))).toMatch(
      /^deny:ssrf:/,
    );
  });

  it('4. SSRF: literal IP hosts are checked without resolution, whatever their spelling', () => {
    const rt = runtime({
      allowlists: ['127.0.0.1', '[::1]', '169.254.169.254', '8.8.8.8'].map((h) => ({
        baseUrl: `https://${h}`,
        methods: ['GET' as const],
        pathPatterns: ['/*'],
      })),
    });
    for (const url of [
      'https://2130706433/',
      'https://0x7f.1/',
      'https://127.1/',
      'https://[::1]/',
      'https://0xA9FEA9FE/',
      'https://[::ffff:7f00:1]/',
    ]) {
      const d = evaluateExecution({ method: 'GET', url }, rt, ctx({ resolvedAddresses: undefined }));
      expect(d.outcome, url).not.toBe('allow');
      expect(d.outcome, url).not.toBe('needs_resolution');
    }
    const pub = evaluateExecution(
      { method: 'GET', url: 'https://8.8.8.8/' },
      rt,
      ctx({ resolvedAddresses: undefined }),
    );
    expect(pub).toMatchObject({ outcome: 'allow', target: { addresses: ['8.8.8.8'] } });
  });

  it('4. SSRF: the allow list exempts local test upstreams', () => {
    const rt = runtime({
      allowlists: [{ baseUrl: 'https://localhost:8443', methods: ['GET'], pathPatterns: ['/*'] }],
    });
    const req = { method: 'GET', url: 'https://localhost:8443/x' };
    expect(outcome(evaluateExecution(req, rt, ctx({ resolvedAddresses: ['127.0.0.1'] })))).toBe(
      'deny:ssrf:blocked_address',
    );
    expect(
      outcome(
        evaluateExecution(
          req,
          rt,
          ctx({ resolvedAddresses: ['127.0.0.1'], ssrfAllowCidrs: ['127.0.0.0/8'] }),
        ),
      ),
    ).toBe('allow');
  });

  it('5. provider constraints', () => {
    const rt = runtime(
      {
        allowlists: [{ baseUrl: 'https://api.bot.example', methods: ['POST'], pathPatterns: ['/bot/*'] }],
        providerConstraints: { provider: 'chatbot_a', allowedChatIds: ['1'] },
      },
      { provider: 'chatbot_a', service: 'chatbot_a' },
    );
    const send = (chat: unknown) =>
      evaluateExecution(
        { method: 'POST', url: 'https://api.bot.example/bot/sendMessage', body: { chat_id: chat } },
        rt,
        ctx(),
      );
    expect(outcome(send(1))).toBe('allow');
    expect(outcome(send(2))).toBe('deny:provider_constraints:provider_constraint');
  });

  it('6. request rules and mode', () => {
    const rt = runtime({
      rules: {
        request: [
          {
            label: 'no admins',
            match: { body: [{ path: 'role', op: 'eq', value: 'admin' }] },
            action: 'deny',
          },
        ],
      },
    });
    const d = evaluateExecution({ ...POST, body: '{"r\\u006fle":"admin"}' }, rt, ctx());
    expect(d).toMatchObject({
      outcome: 'deny',
      step: 'request_rules',
      code: 'rule_denied',
      audit: { rule: { index: 0, label: 'no admins', action: 'deny' } },
    });
    expect(outcome(evaluateExecution(POST, runtime({ defaultMode: 'read_only' }), ctx()))).toBe(
      'deny:request_rules:read_only',
    );
  });

  it('7. step-up: approval needed, then redeemed only by a matching approval', () => {
    const rt = runtime({ stepUpApproval: 'risk_based' });
    const first = evaluateExecution(POST, rt, ctx());
    expect(first).toMatchObject({
      outcome: 'require_approval',
      code: 'step_up_risk_based',
      // Over exactly what would be sent: canonical URL, body bytes, forwarded headers.
      fingerprint: requestFingerprint({
        method: 'POST',
        href: 'https://api.example.com/v1/items',
        body: JSON.stringify(POST.body),
        requestFullFields: false,
        headers: {},
      }),
    });
    expect(
      evaluateExecution(
        POST,
        rt,
        ctx({ approval: { status: 'approved', fingerprintMatches: true, id: 'ap1' } }),
      ),
    ).toMatchObject({
      outcome: 'allow',
      approvalUsed: true,
      audit: { approvalId: 'ap1' },
    });
    expect(
      outcome(
        evaluateExecution(POST, rt, ctx({ approval: { status: 'approved', fingerprintMatches: false } })),
      ),
    ).toBe('deny:step_up:approval_mismatch');
    for (const status of ['pending', 'denied', 'expired', 'consumed', 'not_found'] as const) {
      expect(
        outcome(evaluateExecution(POST, rt, ctx({ approval: { status, fingerprintMatches: true } }))),
      ).toBe(`deny:step_up:approval_${status}`);
    }
    // Reads need no approval; an approval that is not needed changes nothing.
    expect(
      evaluateExecution(GET, rt, ctx({ approval: { status: 'denied', fingerprintMatches: false } })),
    ).toMatchObject({ outcome: 'allow', approvalUsed: false });
  });

  it('7. step-up: requestFullFields asks for one contact on a balanced policy with field step-up', () => {
    const contacts = (contactFields: PolicyInput['contactFields']) =>
      runtime({ contactFields }, { provider: 'suite_a', service: 'suite_a-contacts' });
    const enabled = contacts({ tier: 'balanced', fieldStepUpEnabled: true });
    const one = { method: 'GET', url: 'https://api.example.com/v1/people/c1', requestFullFields: true };
    expect(outcome(evaluateExecution(one, enabled, ctx()))).toBe('approval:full_fields');
    const approved = evaluateExecution(
      one,
      enabled,
      ctx({ approval: { status: 'approved', fingerprintMatches: true } }),
    );
    expect(approved).toMatchObject({ outcome: 'allow', approvalUsed: true, fullFields: true });
    // Without requestFullFields the same read needs nothing and gets nothing more.
    expect(
      evaluateExecution({ ...one, requestFullFields: false }, enabled, ctx({ approval: undefined })),
    ).toMatchObject({ outcome: 'allow', approvalUsed: false, fullFields: false });
    // A mismatching approval is refused as always.
    expect(
      outcome(
        evaluateExecution(one, enabled, ctx({ approval: { status: 'approved', fingerprintMatches: false } })),
      ),
    ).toBe('deny:step_up:approval_mismatch');
  });

  it.each<[string, PolicyInput['contactFields'] | 'other-service', string, string]>([
    ['another service', 'other-service', 'GET /v1/people/c1', 'full_fields_unsupported'],
    ['the default settings (step-up off)', null, 'GET /v1/people/c1', 'full_fields_disabled'],
    [
      'step-up disabled',
      { tier: 'balanced', fieldStepUpEnabled: false },
      'GET /v1/people/c1',
      'full_fields_disabled',
    ],
    [
      'the strict tier',
      { tier: 'strict', fieldStepUpEnabled: false },
      'GET /v1/people/c1',
      'full_fields_strict',
    ],
    [
      'the list',
      { tier: 'balanced', fieldStepUpEnabled: true },
      'GET /v1/people/me/connections',
      'full_fields_single_contact_only',
    ],
    [
      'search',
      { tier: 'balanced', fieldStepUpEnabled: true },
      'GET /v1/people:searchContacts',
      'full_fields_single_contact_only',
    ],
    [
      'batch',
      { tier: 'balanced', fieldStepUpEnabled: true },
      'GET /v1/people:batchGet',
      'full_fields_single_contact_only',
    ],
    [
      'an update',
      { tier: 'balanced', fieldStepUpEnabled: true },
      'PATCH /v1/people/c1:updateContact',
      'full_fields_single_contact_only',
    ],
    [
      'a write to one contact',
      { tier: 'balanced', fieldStepUpEnabled: true },
      'DELETE /v1/people/c1',
      'full_fields_single_contact_only',
    ],
    [
      'contact groups',
      { tier: 'balanced', fieldStepUpEnabled: true },
      'GET /v1/contactGroups/g1',
      'full_fields_single_contact_only',
    ],
  ])('7. step-up: requestFullFields is refused (403) on %s', (_name, contactFields, call, code) => {
    const rt =
      contactFields === 'other-service'
        ? runtime()
        : runtime({ contactFields }, { provider: 'suite_a', service: 'suite_a-contacts' });
    const [method, path] = call.split(' ') as [string, string];
    const req = { method, url: `https://api.example.com${path}`, requestFullFields: true };
    const d = evaluateExecution(req, rt, ctx());
    expect(d).toMatchObject({ outcome: 'deny', status: 403, step: 'step_up', code, audit: { code } });
    // An approval cannot change that: it is never consulted.
    expect(
      evaluateExecution(req, rt, ctx({ approval: { status: 'approved', fingerprintMatches: true } })),
    ).toMatchObject({ outcome: 'deny', code });
  });

  it('7. step-up: a deny rule and the access mode still come first', () => {
    const rt = runtime(
      {
        contactFields: { tier: 'balanced', fieldStepUpEnabled: true },
        rules: { request: [{ label: 'no c1', match: { urlPattern: '/c1$' }, action: 'deny' }] },
      },
      { provider: 'suite_a', service: 'suite_a-contacts' },
    );
    expect(
      outcome(
        evaluateExecution(
          { method: 'GET', url: 'https://api.example.com/v1/people/c1', requestFullFields: true },
          rt,
          ctx(),
        ),
      ),
    ).toBe('deny:request_rules:rule_denied');
  });

  it('8. rate limit with retryAfter', () => {
    const rt = runtime({ rateLimits: { maxRequestsPerHour: 10 } });
    expect(outcome(evaluateExecution(GET, rt, ctx({ requestsInLastHour: 9 })))).toBe('allow');
    const d = evaluateExecution(
      GET,
      rt,
      ctx({ requestsInLastHour: 10, oldestRequestInWindowAt: new Date(NOW.getTime() - 3_590_500) }),
    );
    expect(d).toMatchObject({ outcome: 'deny', status: 429, step: 'rate_limit', retryAfter: 10 });
    expect(evaluateExecution(GET, rt, ctx({ requestsInLastHour: 50 }))).toMatchObject({ retryAfter: 3600 });
  });

  it('9. payload size, on the bytes that are sent', () => {
    const rt = runtime({ rateLimits: { maxRequestsPerHour: 100, maxPayloadSizeBytes: 12 } });
    expect(outcome(evaluateExecution({ ...POST, body: { a: 'ééé' } }, rt, ctx()))).toBe(
      'deny:payload_size:payload_too_large',
    );
    expect(evaluateExecution({ ...POST, body: { a: 'ééé' } }, rt, ctx())).toMatchObject({ status: 413 });
    expect(outcome(evaluateExecution({ ...POST, body: { a: 'eee' } }, rt, ctx()))).toBe('allow');
  });
});

describe('regression: deep bodies are refused before anything recurses (security review, class 12)', () => {
  it('a string body nested 100k levels deep is a bad request, never a stack overflow', () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    const rt = runtime({ stepUpApproval: 'always' });
    for (const body of [deep, `{"a":${deep}}`]) {
      expect(evaluateExecution({ ...POST, body }, rt, ctx())).toMatchObject({
        outcome: 'bad_request',
        reason: expect.stringMatching(/nested deeper than 64/),
      });
    }
  });
});

describe('regression: path rules hold for path-parameter and trailing variants (security review, class 5)', () => {
  it('every variant of a denied path is refused or denied, and the plain path too', () => {
    const rt = runtime({
      allowlists: [
        { baseUrl: 'https://api.example.com', methods: ['POST'], pathPatterns: ['/rest/api/3/*'] },
      ],
      rules: {
        request: [
          { label: 'no issue creation', match: { urlPattern: '^/rest/api/3/issue$' }, action: 'deny' },
        ],
      },
    });
    const variants = [
      '/rest/api/3/issue',
      '/rest/api/3/issue;jsessionid=x',
      '/rest/api/3/issue;',
      '/rest/api/3/issue%3B',
      '/rest/api/3/issue%3b',
      '/rest/api/3/issue/',
      '/rest/api/3/issue/.',
      '/rest/api/3/issue//',
      '/rest/api/3/issue%20',
      '/rest/api/3/issue%09',
      '/rest/api/3/issue%C2%A0',
      '/rest/api/3/./issue',
      '/rest/api/3/x/../issue',
      '/rest/api/3/issue?x=1',
    ];
    for (const path of variants) {
      const d = evaluateExecution({ ...POST, url: `https://api.example.com${path}` }, rt, ctx());
      expect(d.outcome, path).toBe('deny');
      expect(
        d.outcome === 'deny' && ['url_refused', 'rule_denied'].includes(d.code),
        `${path}: ${JSON.stringify(d)}`,
      ).toBe(true);
    }
    // A neighbouring path is not caught by the rule.
    expect(
      evaluateExecution({ ...POST, url: 'https://api.example.com/rest/api/3/issues' }, rt, ctx()).outcome,
    ).not.toBe('deny');
  });
});

describe('regression: body rules cannot be dodged with JSON only a lenient parser reads (security review, class 6)', () => {
  const rt = runtime({
    rules: {
      request: [
        { label: 'no admins', match: { body: [{ path: 'role', op: 'eq', value: 'admin' }] }, action: 'deny' },
      ],
    },
  });
  const json = { 'content-type': 'application/json' };
  const lenient = [
    ['UTF-8 BOM', '\uFEFF{"role":"admin"}'],
    ['trailing second document', '{"role":"user"}{"role":"admin"}'],
    ['comment', '{"role":/* x */"admin"}'],
    ['NBSP prefix', '\u00A0{"role":"admin"}'],
    ['trailing comma', '{"role":"admin",}'],
    ['single quotes', "{'role':'admin'}"],
    ['unquoted key', '{role:"admin"}'],
  ];

  it.each(lenient)('%s is refused with 400 when sent as JSON', (_name, body) => {
    for (const headers of [
      json,
      { 'content-type': 'application/vnd.api+json' },
      {},
      { 'content-type': 'text/plain' },
    ]) {
      expect(evaluateExecution({ ...POST, headers, body }, rt, ctx()).outcome, JSON.stringify(headers)).toBe(
        'bad_request',
      );
    }
  });

  it('strict JSON is judged as before, and policies that never read the body keep opaque strings', () => {
    expect(evaluateExecution({ ...POST, headers: json, body: '{"role":"admin"}' }, rt, ctx())).toMatchObject({
      outcome: 'deny',
      code: 'rule_denied',
    });
    expect(evaluateExecution({ ...POST, headers: json, body: ' {"role":"user"}\n' }, rt, ctx()).outcome).toBe(
      'allow',
    );
    expect(evaluateExecution({ ...POST, body: 'plain text' }, rt, ctx()).outcome).toBe('allow');
    expect(evaluateExecution({ ...POST, headers: json, body: "{'a':1}" }, runtime(), ctx()).outcome).toBe(
      'allow',
    );
  });
});

describe('regression: routing-override headers and unsafe names (security review, classes 13 and 14)', () => {
  it('never forwards X-Original-URL, X-Rewrite-URL, Cookie2 and their kin', () => {
    const d = evaluateExecution(
      {
        ...GET,
        headers: {
          'X-Original-URL': '/admin',
          'X-Rewrite-URL': '/admin',
          'X-Original-URI': '/admin',
          'X-Override-URL': '/admin',
          'X-HTTP-DestinationURL': '/admin',
          Cookie2: '$Version=1',
          'X-Keep': 'yes',
        },
      },
      runtime(),
      ctx(),
    );
    expect(d.outcome === 'allow' && d.target.headers).toEqual({ 'x-keep': 'yes' });
  });

  it('describes an invalid header name without echoing NUL or lone surrogates', () => {
    for (const name of ['x-a\u0000b', 'x-\ud800', 'x y']) {
      const d = evaluateExecution({ ...GET, headers: { [name]: 'v' } }, runtime(), ctx());
      expect(d.outcome).toBe('bad_request');
      const reason = d.outcome === 'bad_request' ? d.reason : '';
      expect(reason.includes('\u0000')).toBe(false);
      expect(reason).not.toMatch(/[\ud800-\udfff]/);
      expect(reason).toMatch(/^invalid header name /);
    }
  });
});

describe('regression: approvals count against the rate limit (security review, class 10)', () => {
  it('past the hourly limit, a write that needs approval is refused with 429 instead of filing one', () => {
    const rt = runtime({ stepUpApproval: 'always', rateLimits: { maxRequestsPerHour: 3 } });
    expect(evaluateExecution(POST, rt, ctx({ requestsInLastHour: 2 })).outcome).toBe('require_approval');
    expect(evaluateExecution(POST, rt, ctx({ requestsInLastHour: 3 }))).toMatchObject({
      outcome: 'deny',
      status: 429,
      step: 'rate_limit',
    });
  });
});

describe('evaluateExecution: the agent asks first (permissionRequest, ADR 0060)', () => {
  it('turns an allow into an approval with code agent_request', () => {
    const rt = runtime({ stepUpApproval: 'never' });
    expect(outcome(evaluateExecution(GET, rt, ctx()))).toBe('allow');
    const asked = evaluateExecution(GET, rt, ctx({ permissionRequest: true }));
    expect(outcome(asked)).toBe('approval:agent_request');
    // What the approval binds is what an ordinary step-up would bind for the same request.
    const stepUp = evaluateExecution(
      GET,
      runtime({ rules: { request: [{ label: 'r', match: {}, action: 'require_approval' }] } }),
      ctx(),
    );
    expect(asked.outcome === 'require_approval' && stepUp.outcome === 'require_approval').toBe(true);
    if (asked.outcome === 'require_approval' && stepUp.outcome === 'require_approval') {
      expect(asked.fingerprint).toBe(stepUp.fingerprint);
    }
  });

  it("keeps the policy's own approval reason, and never turns a denial into an approval", () => {
    expect(
      outcome(
        evaluateExecution(POST, runtime({ stepUpApproval: 'always' }), ctx({ permissionRequest: true })),
      ),
    ).toBe('approval:step_up_always');
    expect(
      outcome(
        evaluateExecution(POST, runtime({ defaultMode: 'read_only' }), ctx({ permissionRequest: true })),
      ),
    ).toBe('deny:request_rules:read_only');
    expect(
      outcome(
        evaluateExecution(
          GET,
          runtime({ rateLimits: { maxRequestsPerHour: 1 } }),
          ctx({ permissionRequest: true, requestsInLastHour: 1 }),
        ),
      ),
    ).toBe('deny:rate_limit:rate_limited');
  });
});

describe('evaluateExecution: order of the steps', () => {
  // A request that fails every step: each policy variant fixes the earlier steps so that the
  // next one decides. The first failing step in the spec's order must always be the one reported.
  const failing: PolicyInput = {
    allowedModels: ['A'],
    timeWindows: [{ dayOfWeek: 2, startHour: 0, endHour: 0, timezone: 'UTC' }],
    allowlists: [{ baseUrl: 'https://other.example', methods: ['GET'], pathPatterns: ['/'] }],
    providerConstraints: { provider: 'chatbot_a', allowedChatIds: ['1'] },
    rules: { request: [{ label: 'deny all', match: {}, action: 'deny' }] },
    rateLimits: { maxRequestsPerHour: 0, maxPayloadSizeBytes: 1 },
  };
  const req: ExecutionRequest = { method: 'POST', url: 'https://api.example.com/x', body: { chat_id: 2 } };
  const conn = { provider: 'chatbot_a', service: 'chatbot_a' };
  const fixes: Array<[string, PolicyInput, Partial<ExecutionContext>]> = [
    ['model', {}, {}],
    ['time_window', { allowedModels: ['B'] }, {}],
    ['allowlist', { timeWindows: [] }, {}],
    [
      'ssrf',
      { allowlists: [{ baseUrl: 'https://api.example.com', methods: ['POST'], pathPatterns: ['/x'] }] },
      { resolvedAddresses: ['10.0.0.1'] },
    ],
    ['provider_constraints', {}, {}],
    ['request_rules', { providerConstraints: null }, {}],
    // With an approval on the request, step-up decides before the rate limit. (Filing a new
    // approval is itself rate-limited: see 'regression: approvals count against the rate limit'.)
    [
      'step_up',
      { rules: { request: [] }, stepUpApproval: 'always' },
      { approval: { status: 'pending', fingerprintMatches: true } },
    ],
    ['rate_limit', { stepUpApproval: 'never' }, {}],
    ['payload_size', { rateLimits: { maxRequestsPerHour: 1, maxPayloadSizeBytes: 1 } }, {}],
  ];
  it('reports the first failing step, in the spec order', () => {
    let policy: PolicyInput = { ...failing };
    let context: Partial<ExecutionContext> = {};
    for (const [step, fix, ctxFix] of fixes) {
      policy = { ...policy, ...fix };
      context = { ...context, resolvedAddresses: PUBLIC, ...ctxFix };
      const d = evaluateExecution(req, runtime(policy, conn), ctx(context));
      const got = d.outcome === 'require_approval' ? 'step_up' : d.outcome === 'deny' ? d.step : d.outcome;
      expect(got).toBe(step);
    }
    policy = { ...policy, rateLimits: null };
    expect(evaluateExecution(req, runtime(policy, conn), ctx({ resolvedAddresses: PUBLIC })).outcome).toBe(
      'allow',
    );
  });
});

describe('evaluateExecution: the allow decision', () => {
  it('returns exactly what to send and the audit metadata', () => {
    const rt = runtime();
    const d = evaluateExecution(
      {
        method: 'post',
        url: 'https://API.example.com./v1/./items?b=2',
        query: { q: 'a b' },
        headers: {
          Authorization: 'Bearer stolen',
          Cookie: 'c',
          Host: 'evil',
          'X-Forwarded-For': '1.2.3.4',
          'x-vlt-approval-id': 'a',
          Accept: 'application/json',
          'X-Many': ['a', 'b'],
        },
        body: { name: 'x' },
      },
      rt,
      ctx(),
    );
    expect(d).toEqual({
      outcome: 'allow',
      approvalUsed: false,
      fullFields: false,
      target: {
        href: 'https://api.example.com/v1/items?b=2&q=a%20b',
        method: 'POST',
        host: 'api.example.com',
        hostKind: 'domain',
        port: 443,
        path: '/v1/items',
        matchPath: '/v1/items',
        search: '?b=2&q=a%20b',
        headers: { accept: 'application/json', 'x-many': 'a, b' },
        body: '{"name":"x"}',
        addresses: PUBLIC,
      },
      audit: {
        model: 'B',
        method: 'POST',
        host: 'api.example.com',
        path: '/v1/items',
        provider: 'code_host',
        service: 'code_host',
        policyId: rt.compiled.policyId,
        policyVersion: 1,
        allowlistEntry: 0,
        stepUp: 'step_up_never',
        dataSize: 12,
      },
    });
  });
});

describe('evaluateTokenVending (Model A)', () => {
  it('checks model, time window and rate limit', () => {
    const c = { now: NOW, requestsInLastHour: 0 };
    expect(evaluateTokenVending(runtime(), c)).toEqual({ outcome: 'allow' });
    expect(evaluateTokenVending(runtime({ allowedModels: ['B'] }), c)).toMatchObject({
      outcome: 'deny',
      code: 'model_not_allowed',
    });
    expect(
      evaluateTokenVending(
        runtime({ timeWindows: [{ dayOfWeek: 3, startHour: 0, endHour: 1, timezone: 'UTC' }] }),
        c,
      ),
    ).toMatchObject({ code: 'outside_time_window' });
    expect(evaluateTokenVending(runtime({ rateLimits: { maxRequestsPerHour: 0 } }), c)).toMatchObject({
      status: 429,
      retryAfter: 3600,
    });
  });

  it('never vends a contacts token, whatever the settings: it would bypass the stripping (ADR 0045)', () => {
    const c = { now: NOW, requestsInLastHour: 0 };
    for (const contactFields of [
      null,
      { tier: 'balanced', fieldStepUpEnabled: true },
      { tier: 'strict', fieldStepUpEnabled: false },
    ] as const) {
      const rt = runtime(
        { allowedModels: ['A', 'B'], contactFields },
        { provider: 'suite_a', service: 'suite_a-contacts' },
      );
      expect(evaluateTokenVending(rt, c)).toMatchObject({
        outcome: 'deny',
        status: 403,
        code: 'contacts_brokered_only',
      });
    }
  });
});
