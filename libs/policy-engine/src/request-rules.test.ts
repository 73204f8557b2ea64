import type { BodyMatcherOp } from '@vlt/contracts';
import { describe, expect, it } from 'vitest';
import { parseJsonPath } from './json-path.js';
import { compileLinearRegex } from './regex.js';
import { prepareRequestBody } from './request-body.js';
import type { RuleAction, RuntimeBodyMatcher, RuntimeRequestRule } from './request-rules.js';
import { bodyMatcherHolds, evaluateRequestRules } from './request-rules.js';

function matcher(path: string, op: BodyMatcherOp, value?: unknown): RuntimeBodyMatcher {
  const p = parseJsonPath(path);
  if (!p.ok) throw new Error(p.reason);
  return {
    path: p.segments,
    aliases: null,
    op,
    value,
    regex: op === 'matches' ? compileLinearRegex(value as string) : null,
  };
}

const email = {
  to: ['ann@corp.com', 'bob@corp.com'],
  cc: [],
  subject: 'Quarterly numbers',
  priority: 2,
  chat_id: 42,
  meta: { draft: false, labels: ['x', 'y'] },
  attachments: [
    { name: 'a.pdf', size: 10 },
    { name: 'b.exe', size: 20 },
  ],
};

describe('body matcher operators', () => {
  it.each<[string, BodyMatcherOp, unknown, RuleAction, boolean]>([
    // eq / neq, with number-vs-string equality
    ['subject', 'eq', 'Quarterly numbers', 'deny', true],
    ['subject', 'eq', 'other', 'deny', false],
    ['priority', 'eq', '2', 'deny', true],
    ['chat_id', 'eq', '42', 'allow', true],
    ['meta', 'eq', { labels: ['x', 'y'], draft: false }, 'deny', true],
    ['to', 'eq', ['ann@corp.com', 'bob@corp.com'], 'deny', true],
    ['subject', 'neq', 'other', 'deny', true],
    ['subject', 'neq', 'Quarterly numbers', 'deny', false],
    // in / not_in look into arrays; allow needs every value, deny any value
    ['to', 'in', ['ann@corp.com', 'bob@corp.com', 'cat@corp.com'], 'allow', true],
    ['to', 'in', ['ann@corp.com'], 'allow', false],
    ['to', 'in', ['ann@corp.com'], 'deny', true],
    ['to', 'not_in', ['bob@corp.com'], 'deny', true],
    ['to', 'not_in', ['bob@corp.com'], 'allow', false],
    ['priority', 'in', [1, 2, 3], 'allow', true],
    // contains: substring on strings, membership on arrays
    ['subject', 'contains', 'numbers', 'deny', true],
    ['to', 'contains', 'bob@corp.com', 'deny', true],
    ['to', 'contains', 'bob', 'deny', false],
    ['meta.labels', 'contains', 'y', 'allow', true],
    // matches (RE2), on every reached value
    ['to', 'matches', '@corp\\.com$', 'allow', true],
    ['attachments.name', 'matches', '\\.pdf$', 'allow', false],
    ['attachments.name', 'matches', '\\.exe$', 'deny', true],
    ['attachments.size', 'matches', '^2', 'deny', true],
    ['meta', 'matches', '.*', 'deny', false],
    // exists
    ['meta.draft', 'exists', undefined, 'allow', true],
    ['meta.missing', 'exists', undefined, 'allow', false],
    ['meta.missing', 'exists', false, 'deny', true],
    ['cc.0', 'exists', undefined, 'deny', false],
    // missing paths: positive ops never hold; negative ops hold only for restrictive rules
    ['bcc', 'eq', 'x', 'deny', false],
    ['bcc', 'neq', 'x', 'deny', true],
    ['bcc', 'not_in', ['x'], 'require_approval', true],
    ['bcc', 'neq', 'x', 'allow', false],
    ['bcc', 'not_in', ['x'], 'allow', false],
    ['cc', 'in', ['x'], 'allow', false],
  ])('%s %s %j in a %s rule → %s', (path, op, value, action, expected) => {
    expect(bodyMatcherHolds(matcher(path, op, value), email, action)).toBe(expected);
  });
});

function rule(
  action: RuleAction,
  match: Partial<Pick<RuntimeRequestRule, 'methods' | 'urlPattern' | 'body'>>,
  index = 0,
): RuntimeRequestRule {
  return { index, label: `r${index}`, action, methods: null, urlPattern: null, body: null, ...match };
}

function body(b: unknown, contentType?: string) {
  const p = prepareRequestBody(b, contentType);
  if (!p.ok) throw new Error(p.reason);
  return p.inspected;
}

describe('evaluateRequestRules', () => {
  const rules = [
    rule('deny', { body: [matcher('to', 'contains', 'evil@x.com')] }, 0),
    rule(
      'allow',
      {
        methods: new Set(['POST']),
        urlPattern: compileLinearRegex('^/send$'),
        body: [matcher('to', 'matches', '@corp\\.com$')],
      },
      1,
    ),
    rule('require_approval', { methods: new Set(['DELETE']) }, 2),
    rule('deny', { urlPattern: compileLinearRegex('/admin') }, 3),
  ];
  const decide = (method: 'GET' | 'POST' | 'DELETE', path: string, b?: unknown, ct?: string) =>
    evaluateRequestRules(rules, { method, path, body: body(b, ct) })?.index ?? null;

  it('returns the first matching rule', () => {
    expect(decide('POST', '/send', { to: ['a@corp.com', 'evil@x.com'] })).toBe(0);
    expect(decide('POST', '/send', { to: ['a@corp.com'] })).toBe(1);
    expect(decide('DELETE', '/admin/x')).toBe(2);
    expect(decide('GET', '/admin/x')).toBe(3);
    expect(decide('GET', '/other')).toBeNull();
  });

  it('an allow rule does not match when one value breaks it', () => {
    expect(decide('POST', '/send', { to: ['a@corp.com', 'b@gmail.com'] })).toBeNull();
  });

  it('matches escaped, reordered and re-spaced JSON exactly like the plain value', () => {
    expect(decide('POST', '/send', '{"to":["evil@x.com"]}')).toBe(0);
    expect(decide('POST', '/send', '{ "x": 1,\n  "\\u0074o" : [ "evil\\u0040x.com" ] }')).toBe(0);
    expect(decide('POST', '/send', JSON.stringify({ to: ['a@corp.com'] }))).toBe(1);
  });

  it('never matches body matchers on a non-JSON body; the next rule decides', () => {
    expect(decide('POST', '/send', 'to=evil@x.com', 'application/x-www-form-urlencoded')).toBeNull();
    expect(decide('POST', '/send', 'to: evil@x.com')).toBeNull();
    expect(decide('POST', '/send')).toBeNull();
  });

  it('matches urlPattern against the path without the query', () => {
    const r = [rule('deny', { urlPattern: compileLinearRegex('\\?') })];
    expect(evaluateRequestRules(r, { method: 'GET', path: '/a', body: body(undefined) })).toBeNull();
  });
});

describe('prepareRequestBody', () => {
  it('refuses JSON with a duplicated key, which parsers resolve differently', () => {
    expect(prepareRequestBody('{"to":"ok@corp.com","to":"evil@x.com"}', 'application/json')).toMatchObject({
      ok: false,
    });
  });

  it('sends strings as given and JSON values as serialised, and reports their size', () => {
    expect(prepareRequestBody('{"a": 1}', undefined)).toMatchObject({
      ok: true,
      payload: '{"a": 1}',
      size: 8,
      inspected: { kind: 'json', value: { a: 1 } },
    });
    expect(prepareRequestBody({ a: 'é' }, undefined)).toMatchObject({
      ok: true,
      payload: '{"a":"é"}',
      size: 10,
    });
    expect(prepareRequestBody('plain text', 'text/plain')).toMatchObject({
      ok: true,
      inspected: { kind: 'opaque' },
    });
    expect(
      prepareRequestBody('a=1&a=2&b=3', 'application/x-www-form-urlencoded; charset=utf-8'),
    ).toMatchObject({
      ok: true,
      inspected: { kind: 'form', value: { a: ['1', '2'], b: ['3'] } },
    });
    expect(prepareRequestBody(null, undefined)).toMatchObject({
      ok: true,
      inspected: { kind: 'none' },
      payload: undefined,
    });
  });
});
