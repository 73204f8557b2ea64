import { describe, expect, it } from 'vitest';
import { planResponse } from './compile.js';
import { filterResponseBody } from './response-body.js';
import { applyAllowFields, applyDenyFields, buildFieldTrie } from './response-filter.js';
import { parseJsonPath } from './json-path.js';
import { runtime } from './test-fixtures.js';
import { ResponseUnfilterableError } from './errors.js';

const trie = (...paths: string[]) =>
  buildFieldTrie(
    paths.map((p) => {
      const r = parseJsonPath(p);
      if (!r.ok) throw new Error(r.reason);
      return r.segments;
    }),
  );

const contact = {
  id: 'c1',
  name: 'Ann',
  emails: [{ value: 'ann@example.com', type: 'work' }],
  phones: [{ value: '+1 415 555 2671' }],
  notes: 'met at conf',
  org: { name: 'Corp', address: { street: 'Main 1', city: 'X' } },
};

describe('field filters', () => {
  it('allowFields keeps listed paths through arrays and drops the rest', () => {
    expect(applyAllowFields(contact, trie('id', 'emails.type', 'org.address.city'))).toEqual({
      id: 'c1',
      emails: [{ type: 'work' }],
      org: { address: { city: 'X' } },
    });
    expect(applyAllowFields([contact, { id: 'c2' }], trie('id'))).toEqual([{ id: 'c1' }, { id: 'c2' }]);
    expect(applyAllowFields({ items: ['a', { id: 1 }] }, trie('items.id'))).toEqual({ items: [{ id: 1 }] });
    expect(applyAllowFields('scalar', trie('id'))).toBeNull();
    expect(applyAllowFields({ a: { b: 1, c: 2 }, d: { b: 3 } }, trie('*.b'))).toEqual({
      a: { b: 1 },
      d: { b: 3 },
    });
  });

  it('denyFields removes listed paths at any depth through arrays', () => {
    expect(applyDenyFields(contact, trie('notes', 'phones', 'org.address.street', 'emails.value'))).toEqual({
      id: 'c1',
      name: 'Ann',
      emails: [{ type: 'work' }],
      org: { name: 'Corp', address: { city: 'X' } },
    });
    expect(applyDenyFields([{ a: 1, b: 2 }, [{ a: 3 }]], trie('a'))).toEqual([{ b: 2 }, [{}]]);
    expect(applyDenyFields({ x: { secret: 1 }, y: { secret: 2, ok: 3 } }, trie('*.secret'))).toEqual({
      x: {},
      y: { ok: 3 },
    });
  });

  it('returns the very same object when nothing changes', () => {
    expect(applyDenyFields(contact, trie('absent'))).toBe(contact);
    expect(applyAllowFields(contact, trie('id', 'name', 'emails', 'phones', 'notes', 'org'))).toBe(contact);
  });

  it('handles a "__proto__" key as data, without touching prototypes', () => {
    const parsed = JSON.parse('{"__proto__":{"polluted":true},"a":{"secret":1}}') as Record<string, unknown>;
    const out = applyDenyFields(parsed, trie('a.secret')) as Record<string, unknown>;
    expect(Object.keys(out)).toEqual(['__proto__', 'a']);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('filterResponseBody', () => {
  const rt = runtime({
    rules: {
      response: [
        {
          label: 'contacts',
          match: { urlPattern: '^/contacts', methods: ['GET'] },
          filter: { denyFields: ['notes', 'phones'] },
        },
        {
          label: 'pii',
          match: {},
          filter: {
            redact: [
              { type: 'email' },
              { type: 'credit_card' },
              { type: 'custom', pattern: 'tok_[a-z0-9]{6}', replacement: '[TOKEN]' },
            ],
          },
        },
        { label: 'posts only', match: { methods: ['POST'] }, filter: { allowFields: ['id'] } },
      ],
    },
  });
  const GET = { method: 'GET', path: '/contacts/c1' };

  it('applies every matching rule: field filters, then redaction of strings and integers', () => {
    const body = { ...contact, card: 4111111111111111, token: 'tok_abc123', note2: 'x' };
    expect(filterResponseBody(body, 'application/json', rt, GET)).toEqual({
      id: 'c1',
      name: 'Ann',
      emails: [{ value: '[REDACTED_EMAIL]', type: 'work' }],
      org: contact.org,
      card: '[REDACTED_CREDIT_CARD]',
      token: '[TOKEN]',
      note2: 'x',
    });
    expect(filterResponseBody(body, 'application/json', rt, { method: 'POST', path: '/contacts' })).toEqual({
      id: 'c1',
    });
  });

  it('keeps the form of the body: strings stay strings, bytes stay bytes', () => {
    const json = JSON.stringify({ notes: 'n', mail: 'a@b.io' });
    expect(filterResponseBody(json, 'application/json; charset=utf-8', rt, GET)).toBe(
      '{"mail":"[REDACTED_EMAIL]"}',
    );
    const bytes = new TextEncoder().encode('reach me at a@b.io\n');
    const out = filterResponseBody(bytes, 'text/plain', rt, GET);
    expect(out).toBeInstanceOf(Uint8Array);
    expect(new TextDecoder().decode(out as Uint8Array)).toBe('reach me at [REDACTED_EMAIL]\n');
    expect(filterResponseBody('not json a@b.io', 'text/plain', rt, GET)).toBe('not json [REDACTED_EMAIL]');
  });

  it('regression: a body labelled JSON that does not parse is refused under field rules, not redacted as text', () => {
    // A Range slice of a JSON document: its denied field would pass a text redaction.
    const slice = '"notes":"secret","mail":"a@b.io"}';
    expect(() => filterResponseBody(slice, 'application/json', rt, GET)).toThrow(ResponseUnfilterableError);
    expect(() => filterResponseBody('not json a@b.io', 'application/json', rt, GET)).toThrow(
      ResponseUnfilterableError,
    );
  });

  it('leaves binary types and unmatched routes untouched', () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x40]);
    expect(filterResponseBody(png, 'image/png', rt, GET)).toBe(png);
    const plain = runtime();
    const body = { mail: 'a@b.io' };
    expect(filterResponseBody(body, 'application/json', plain, GET)).toBe(body);
    expect(planResponse(plain, GET)).toBeNull();
  });

  it('treats a missing content type as text rather than skipping it', () => {
    expect(filterResponseBody('a@b.io', undefined, rt, GET)).toBe('[REDACTED_EMAIL]');
  });

  it('applies provider inbound filters even without response rules', () => {
    const bot = runtime(
      { providerConstraints: { provider: 'chatbot_a', allowedChatIds: ['1'] } },
      { provider: 'chatbot_a', service: 'chatbot_a' },
    );
    const body = {
      ok: true,
      result: [
        { update_id: 1, message: { chat: { id: 1 } } },
        { update_id: 2, message: { chat: { id: 2 } } },
      ],
    };
    expect(
      filterResponseBody(body, 'application/json', bot, { method: 'GET', path: '/bot/getUpdates' }),
    ).toEqual({
      ok: true,
      result: [{ update_id: 1, message: { chat: { id: 1 } } }],
    });
  });

  it('fails closed on absurdly deep JSON instead of overflowing the stack', () => {
    let deep: unknown = 'a@b.io';
    for (let i = 0; i < 2000; i++) deep = [deep];
    expect(() => filterResponseBody(deep, 'application/json', rt, GET)).toThrow('nested deeper');
  });
});
