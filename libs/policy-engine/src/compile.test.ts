import { COMPILED_POLICY_FORMAT } from '@vlt/contracts';
import { describe, expect, it } from 'vitest';
import { compilePolicy, hydratePolicy } from './compile.js';
import { CompiledPolicyError, PolicyValidationError } from './errors.js';
import { policyDoc, runtime } from './test-fixtures.js';
import {
  validateAllowlists,
  validatePolicyDocument,
  validatePolicyRules,
  validateProviderConstraints,
  validateTimeWindows,
} from './validate.js';

const CONN = { provider: 'code_host', service: 'code_host' };

describe('compilePolicy', () => {
  const doc = policyDoc({
    allowlists: [
      {
        baseUrl: 'https://API.example.com/v1/',
        methods: ['GET', 'GET', 'POST'],
        pathPatterns: ['/users/*', '/me'],
      },
    ],
    rules: {
      request: [
        {
          label: 'r',
          match: {
            methods: ['POST'],
            urlPattern: '^/v1/users$',
            body: [{ path: 'role', op: 'in', value: ['user'] }],
          },
          action: 'allow',
        },
      ],
      response: [
        {
          label: 's',
          match: {},
          filter: {
            allowFields: [],
            denyFields: ['a.b', 'items.*.secret'],
            redact: [{ type: 'email' }, { type: 'custom', pattern: 'x+', replacement: '#' }],
          },
        },
      ],
    },
  });

  it('produces plain JSON with canonical allowlists, parsed paths and default replacements', () => {
    const c = compilePolicy(doc, CONN);
    expect(JSON.parse(JSON.stringify(c))).toEqual(c);
    expect(c).toMatchObject({
      // No contact field settings: the oldest format that enforces it all.
      format: 1,
      policyId: doc.id,
      version: 1,
      provider: 'code_host',
      allowlists: [
        {
          index: 0,
          host: 'api.example.com',
          port: 443,
          methods: ['GET', 'POST'],
          patterns: [
            { value: '/v1/users/', prefix: true },
            { value: '/v1/me', prefix: false },
          ],
        },
      ],
      requestRules: [
        {
          index: 0,
          methods: ['POST'],
          urlPattern: '^/v1/users$',
          body: [{ path: ['role'], op: 'in', value: ['user'] }],
        },
      ],
      responseRules: [
        {
          allowFields: null,
          denyFields: [
            ['a', 'b'],
            ['items', null, 'secret'],
          ],
          redact: [
            { type: 'email', pattern: null, replacement: '[REDACTED_EMAIL]' },
            { type: 'custom', pattern: 'x+', replacement: '#' },
          ],
        },
      ],
    });
  });

  it('round-trips: hydrating the published JSON gives a working runtime', () => {
    const rt = hydratePolicy(JSON.parse(JSON.stringify(compilePolicy(doc, CONN))));
    expect(rt.requestRules[0]!.urlPattern!.test('/v1/users')).toBe(true);
    expect(rt.allowlists[0]!.host).toBe('api.example.com');
    expect(rt.timeWindows.isOpen(new Date())).toBe(true);
  });

  it('throws one PolicyValidationError listing every problem', () => {
    const bad = policyDoc({
      allowlists: [{ baseUrl: 'https://a.example', methods: ['GET'], pathPatterns: ['/a/../b'] }],
      rules: {
        request: [
          {
            label: 'r',
            match: { urlPattern: '(unclosed', body: [{ path: 'a..b', op: 'matches', value: '(?<=x)' }] },
            action: 'deny',
          },
        ],
        response: [
          {
            label: 's',
            match: {},
            filter: { redact: [{ type: 'custom', pattern: 'a*', replacement: '#' }] },
          },
        ],
      },
      providerConstraints: { provider: 'chatbot_a', allowedChatIds: ['1'] },
    });
    let error: unknown;
    try {
      compilePolicy(bad, CONN);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(PolicyValidationError);
    const e = error as PolicyValidationError;
    expect(e.statusCode).toBe(400);
    expect(e.errors).toEqual([
      expect.stringMatching(
        /^rules\.request\[0\]\.match\.urlPattern: invalid RE2 pattern: .*missing closing \)/,
      ),
      expect.stringMatching(/^rules\.request\[0\]\.match\.body\[0\]\.path: invalid path "a\.\.b"/),
      expect.stringMatching(/^rules\.request\[0\]\.match\.body\[0\]\.value: invalid RE2 pattern/),
      'rules.response[0].filter.redact[0].pattern: pattern matches the empty string, so it would redact nothing',
      expect.stringMatching(/^allowlists\[0\]: path pattern "\/a\/\.\.\/b" must not contain dot segments/),
      'providerConstraints.provider: "chatbot_a" does not match the connection\'s provider "code_host"',
    ]);
  });
});

describe('hydratePolicy refuses what it cannot trust', () => {
  const good = compilePolicy(policyDoc(), CONN);
  it.each<[string, unknown]>([
    ['null', null],
    ['another format', { ...good, format: COMPILED_POLICY_FORMAT + 1 }],
    ['format 0', { ...good, format: 0 }],
    [
      'contact field settings on another service',
      { ...good, contactFields: { tier: 'strict', fieldStepUpEnabled: false } },
    ],
    ['a missing field', { ...good, allowlists: undefined }],
    [
      'an invalid regex',
      {
        ...good,
        requestRules: [{ index: 0, label: 'x', action: 'deny', methods: null, urlPattern: '(', body: null }],
      },
    ],
    [
      '"in" without an array',
      {
        ...good,
        requestRules: [
          {
            index: 0,
            label: 'x',
            action: 'deny',
            methods: null,
            urlPattern: null,
            body: [{ path: ['a'], op: 'in', value: 1 }],
          },
        ],
      },
    ],
    [
      'a custom redaction without pattern',
      {
        ...good,
        responseRules: [
          {
            index: 0,
            label: 'x',
            methods: null,
            urlPattern: null,
            allowFields: null,
            denyFields: null,
            redact: [{ type: 'custom', pattern: null, replacement: '' }],
          },
        ],
      },
    ],
    [
      'constraints of another provider',
      { ...good, providerConstraints: { provider: 'chatbot_a', allowedChatIds: [] } },
    ],
    [
      'an unknown time zone',
      { ...good, timeWindows: [{ dayOfWeek: 1, startHour: 0, endHour: 1, timezone: 'Mars/Olympus' }] },
    ],
  ])('%s', (_name, json) => {
    expect(() => hydratePolicy(json)).toThrow(CompiledPolicyError);
  });
});

describe('write-time validation (what the control plane answers 400 with)', () => {
  it('rejects http base URLs with a clear message', () => {
    expect(
      validateAllowlists([{ baseUrl: 'http://api.example.com', methods: ['GET'], pathPatterns: ['/'] }]),
    ).toEqual(['allowlists[0].baseUrl: baseUrl must use https; http is rejected']);
  });

  it.each<[unknown, string]>([
    [{ baseUrl: 'https://u:p@api.example.com', methods: ['GET'], pathPatterns: ['/'] }, 'user info'],
    [{ baseUrl: 'https://api.example.com?x=1', methods: ['GET'], pathPatterns: ['/'] }, 'query or fragment'],
    [{ baseUrl: 'https://api.example.com\\@evil', methods: ['GET'], pathPatterns: ['/'] }, '"\\"'],
    [{ baseUrl: 'https://api.example.com', methods: ['HEAD'], pathPatterns: ['/'] }, 'methods[0]'],
    [
      { baseUrl: 'https://api.example.com', methods: ['GET'], pathPatterns: ['/a/*/b'] },
      'only allowed at the end',
    ],
    [
      { baseUrl: 'https://api.example.com', methods: ['GET'], pathPatterns: ['users'] },
      'must start with "/"',
    ],
    [{ baseUrl: 'https://api.example.com', methods: ['GET'], pathPatterns: [] }, 'pathPatterns'],
    [{ baseUrl: 'https://api.example.com', methods: ['GET'], pathPatterns: ['/'], extra: 1 }, 'extra'],
  ])('allowlist %j', (entry, message) => {
    expect(validateAllowlists([entry]).join('\n')).toContain(message);
  });

  it('checks RE2 syntax, operator values and field paths in rules', () => {
    expect(validatePolicyRules({ request: [], response: [] })).toEqual([]);
    expect(
      validatePolicyRules({ request: [{ label: 'x', match: { urlPattern: '(a)\\1' }, action: 'deny' }] }),
    ).toEqual([expect.stringContaining('rules.request[0].match.urlPattern: invalid RE2 pattern')]);
    expect(
      validatePolicyRules({
        request: [{ label: 'x', match: { body: [{ path: 'a', op: 'in', value: 'x' }] }, action: 'deny' }],
      }),
    ).toEqual(['rules.request[0].match.body[0].value: "in" needs an array value']);
    expect(validatePolicyRules({ request: [{ label: 'x', match: {}, action: 'block' }] })[0]).toContain(
      'rules.request[0].action',
    );
    expect(validatePolicyRules({ response: [{ label: 'x', filter: { denyFields: ['a.'] } }] })).toEqual([
      'rules.response[0].filter.denyFields[0]: invalid path "a.": empty path segment',
    ]);
    expect(
      validatePolicyRules({
        response: [{ label: 'x', filter: { redact: [{ type: 'custom', pattern: 'x' }] } }],
      })[0],
    ).toContain('replacement');
    expect(
      validatePolicyRules({
        response: [
          { label: 'x', filter: { redact: [{ type: 'custom', pattern: 'x', replacement: 'a\rb' }] } },
        ],
      })[0],
    ).toContain('control characters');
    expect(
      validatePolicyRules({ response: [{ label: 'x', filter: { redact: [{ type: 'emails' }] } }] })[0],
    ).toContain('redact[0]');
  });

  it('checks time windows and provider constraints', () => {
    expect(
      validateTimeWindows([{ dayOfWeek: 7, startHour: 0, endHour: 24, timezone: 'Nowhere/City' }]),
    ).toHaveLength(3);
    expect(
      validateTimeWindows([{ dayOfWeek: 0, startHour: 22, endHour: 2, timezone: 'Europe/Berlin' }]),
    ).toEqual([]);
    expect(
      validateProviderConstraints({ provider: 'chatbot_a', allowedChatIds: ['1'] }, 'chatbot_a'),
    ).toEqual([]);
    expect(
      validateProviderConstraints({ provider: 'chatbot_a', allowedChatIDs: ['1'] }, 'chatbot_a')[0],
    ).toContain('allowedChatIDs');
    expect(validateProviderConstraints({ provider: 'suite_b' }, 'chatbot_a')[0]).toContain('does not match');
    expect(validateProviderConstraints(null, 'chatbot_a')).toEqual([]);
  });

  it('validates a whole document and applies the spec defaults', () => {
    const minimal = {
      id: policyDoc().id,
      workspaceId: policyDoc().workspaceId,
      agentId: policyDoc().agentId,
      connectionId: policyDoc().connectionId,
      version: 0,
    };
    expect(validatePolicyDocument(minimal, CONN)).toEqual([]);
    const c = compilePolicy(minimal as never, CONN);
    expect(c).toMatchObject({
      allowedModels: ['A', 'B'],
      defaultMode: 'read_only',
      stepUpApproval: 'risk_based',
      allowlists: [],
      rateLimits: null,
    });
    expect(validatePolicyDocument({ ...minimal, id: 'nope' })[0]).toContain('id');
  });

  it('bounds the size of what can be stored', () => {
    const many = Array.from({ length: 201 }, () => ({ label: 'x', match: {}, action: 'deny' }));
    expect(validatePolicyRules({ request: many })[0]).toContain('rules.request');
    expect(
      validatePolicyRules({
        request: [{ label: 'x', match: { urlPattern: 'a'.repeat(1001) }, action: 'deny' }],
      })[0],
    ).toContain('urlPattern');
  });
});

describe('runtime', () => {
  it('exposes the limits under both names', () => {
    const rt = runtime({ rateLimits: { maxRequestsPerHour: 5, maxResponseSizeBytes: 10 } });
    expect(rt.limits).toBe(rt.rateLimits);
    expect(rt.limits?.maxResponseSizeBytes).toBe(10);
  });
});

describe('regression: allowlist hosts are DNS names, never literal wildcards (security review, class 14)', () => {
  it.each([
    'https://*.example',
    'https://*.example.com/v1',
    'https://api.*.com',
    'https://a%2Ab.example.com',
  ])('refuses %s at write time', (baseUrl) => {
    const errors = validateAllowlists([{ baseUrl, methods: ['GET'], pathPatterns: ['/*'] }]);
    expect(errors.join()).toMatch(/allowlists\[0\]: baseUrl: .*invalid host/);
  });
});

describe('contact field settings (ADR 0045)', () => {
  const CONTACTS = { provider: 'suite_a', service: 'suite_a-contacts' };

  it('a contacts policy compiles to format 2 with its effective settings, the default when unset', () => {
    const unset = compilePolicy(policyDoc(), CONTACTS);
    expect(unset).toMatchObject({
      format: COMPILED_POLICY_FORMAT,
      contactFields: { tier: 'balanced', fieldStepUpEnabled: false },
    });
    const set = compilePolicy(
      policyDoc({ contactFields: { tier: 'strict', fieldStepUpEnabled: false } }),
      CONTACTS,
    );
    expect(set.contactFields).toEqual({ tier: 'strict', fieldStepUpEnabled: false });
    expect(hydratePolicy(set).contactFields).toEqual({ tier: 'strict', fieldStepUpEnabled: false });
    // Any other policy stays format 1, readable by data planes that predate the setting.
    expect(compilePolicy(policyDoc(), CONN)).toMatchObject({ format: 1, contactFields: null });
    expect(hydratePolicy(compilePolicy(policyDoc(), CONN)).contactFields).toBeNull();
  });

  it('a format 1 snapshot of a contacts service hydrates with the default (stripped, no step-up)', () => {
    const { contactFields: _omitted, ...v1 } = compilePolicy(
      policyDoc({ contactFields: { tier: 'balanced', fieldStepUpEnabled: true } }),
      CONTACTS,
    );
    expect(hydratePolicy({ ...v1, format: 1 }).contactFields).toEqual({
      tier: 'balanced',
      fieldStepUpEnabled: false,
    });
  });

  it('refuses settings on another service, strict with step-up, and unknown keys (400)', () => {
    expect(
      validatePolicyDocument(
        policyDoc({ contactFields: { tier: 'balanced', fieldStepUpEnabled: true } }),
        CONN,
      ),
    ).toEqual(['contactFields: only contacts connections have contact field settings, not "code_host"']);
    expect(
      validatePolicyDocument(
        policyDoc({ contactFields: { tier: 'strict', fieldStepUpEnabled: true } }),
        CONTACTS,
      ).join(),
    ).toMatch(/contactFields\.fieldStepUpEnabled: field step-up needs the balanced tier/);
    expect(
      validatePolicyDocument(
        { ...policyDoc(), contactFields: { tier: 'balanced', fieldStepupEnabled: true } },
        CONTACTS,
      ).length,
    ).toBeGreaterThan(0);
    expect(() =>
      compilePolicy(policyDoc({ contactFields: { tier: 'balanced', fieldStepUpEnabled: true } }), CONN),
    ).toThrow(PolicyValidationError);
  });

  it('a snapshot whose settings contradict its service is refused', () => {
    const c = compilePolicy(policyDoc(), CONTACTS);
    expect(() =>
      hydratePolicy({ ...c, contactFields: { tier: 'strict', fieldStepUpEnabled: true } }),
    ).toThrow(CompiledPolicyError);
    expect(() => hydratePolicy({ ...c, contactFields: { tier: 'open' } })).toThrow(CompiledPolicyError);
  });
});
