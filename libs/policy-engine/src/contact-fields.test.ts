import { describe, expect, it } from 'vitest';
import type { PolicyInput } from './test-fixtures.js';
import { runtime } from './test-fixtures.js';
import {
  CONTACT_FIELD_CLASSES,
  contactFieldClass,
  fieldStepUpRefusal,
  isSingleContactRead,
  keepsPii,
  stripContactFields,
} from './contact-fields.js';
import { planResponse } from './compile.js';
import { ResponseFilterLimitError, ResponseUnfilterableError } from './errors.js';
import { filterResponseBody, responseFilterability } from './response-body.js';
import { createFilterCore, runFilterCore } from './stream-filters.js';
import { MAX_JSON_DEPTH } from './response-filter.js';

/** A person as the People API returns it with every field asked for. */
function person(id: string) {
  return {
    resourceName: `people/${id}`,
    etag: `%E${id}`,
    metadata: { sources: [{ type: 'CONTACT', id }], objectType: 'PERSON' },
    names: [{ displayName: `Ann ${id}`, givenName: 'Ann' }],
    emailAddresses: [{ value: `ann.${id}@example.com`, type: 'work' }],
    organizations: [{ name: 'Corp', title: 'Engineer' }],
    memberships: [{ contactGroupMembership: { contactGroupResourceName: 'contactGroups/myContacts' } }],
    phoneNumbers: [{ value: '+1 415 555 2671', type: 'mobile' }],
    addresses: [{ formattedValue: '1 Main St, Springfield', type: 'home' }],
    birthdays: [{ date: { year: 1980, month: 4, day: 2 } }],
    events: [{ date: { month: 6, day: 1 }, type: 'anniversary' }],
    relations: [{ person: 'Bob', type: 'spouse' }],
    imClients: [{ username: 'ann42', protocol: 'jabber' }],
    photos: [{ url: 'https://photos.example.com/ann.jpg' }],
    urls: [{ value: 'https://ann.example.com' }],
    biographies: [{ value: 'Met at the conference; owes us a favour', contentType: 'TEXT_PLAIN' }],
    userDefined: [{ key: 'clearance', value: 'secret' }],
    clientData: [{ key: 'crm', value: 'vip' }],
    miscKeywords: [{ value: 'difficult', type: 'OUTLOOK_KEYWORD' }],
    someFutureField: [{ value: 'unclassified' }],
  };
}

const BASIC = [
  'resourceName',
  'etag',
  'metadata',
  'names',
  'emailAddresses',
  'organizations',
  'memberships',
] as const;
const PII = ['phoneNumbers', 'addresses', 'birthdays', 'events', 'relations', 'imClients', 'photos', 'urls'];

describe('contact field classes', () => {
  it('classify each People API field once, in any spelling', () => {
    const all = Object.values(CONTACT_FIELD_CLASSES).flat();
    expect(new Set(all.map((k) => k.toLowerCase())).size).toBe(all.length);
    expect(contactFieldClass('phoneNumbers')).toBe('pii');
    expect(contactFieldClass('phone_numbers')).toBe('pii');
    expect(contactFieldClass('PhoneNumbers')).toBe('pii');
    expect(contactFieldClass('phone-numbers')).toBe('pii');
    expect(contactFieldClass('biographies')).toBe('notes');
    expect(contactFieldClass('user_defined')).toBe('notes');
    expect(contactFieldClass('names')).toBe('basic');
    expect(contactFieldClass('totalPeople')).toBeNull();
    expect(contactFieldClass('x'.repeat(10_000))).toBeNull();
  });
});

describe('stripContactFields', () => {
  it('keeps basic fields of a person, strips PII, notes and unclassified fields', () => {
    const out = stripContactFields(person('c1'), false) as Record<string, unknown>;
    expect(Object.keys(out)).toEqual([...BASIC]);
  });

  it('with keepPii keeps the PII fields, never the notes nor unclassified fields', () => {
    const out = stripContactFields(person('c1'), true) as Record<string, unknown>;
    expect(Object.keys(out).sort()).toEqual([...BASIC, ...PII].sort());
    expect(out).not.toHaveProperty('biographies');
    expect(out).not.toHaveProperty('userDefined');
    expect(out).not.toHaveProperty('clientData');
    expect(out).not.toHaveProperty('miscKeywords');
    expect(out).not.toHaveProperty('someFutureField');
  });

  it('strips every person in the list, search and batch envelopes and keeps the envelopes', () => {
    const list = { connections: [person('c1'), person('c2')], totalPeople: 2, nextPageToken: 'n' };
    const search = { results: [{ person: person('c1') }] };
    const batch = {
      responses: [{ httpStatusCode: 200, requestedResourceName: 'people/c1', person: person('c1') }],
    };
    const listed = stripContactFields(list, false) as typeof list;
    expect(Object.keys(listed)).toEqual(['connections', 'totalPeople', 'nextPageToken']);
    for (const p of listed.connections) expect(Object.keys(p)).toEqual([...BASIC]);
    const found = stripContactFields(search, false) as typeof search;
    expect(Object.keys(found.results[0]!.person)).toEqual([...BASIC]);
    const batched = stripContactFields(batch, false) as typeof batch;
    expect(batched.responses[0]).toMatchObject({ httpStatusCode: 200, requestedResourceName: 'people/c1' });
    expect(Object.keys(batched.responses[0]!.person)).toEqual([...BASIC]);
    // Nothing PII-like is left anywhere in the text.
    for (const out of [listed, found, batched]) {
      const text = JSON.stringify(out);
      expect(text).not.toMatch(/555|Main St|1980|favour|clearance|vip|difficult|unclassified/);
    }
  });

  it('strips PII and notes keys at any depth, also on objects that are not persons', () => {
    const odd = {
      data: { items: [{ id: 1, phone_numbers: ['+1 415 555 2671'], Biographies: 'x', note: 'kept' }] },
      otherContacts: [{ resourceName: 'otherContacts/o1', names: [], phoneNumbers: [], mystery: 1 }],
    };
    expect(stripContactFields(odd, false)).toEqual({
      data: { items: [{ id: 1, note: 'kept' }] },
      otherContacts: [{ resourceName: 'otherContacts/o1', names: [] }],
    });
  });

  it('returns its input when nothing is removed, and keeps "__proto__" an own member', () => {
    const clean = { connections: [{ resourceName: 'people/c1', names: [] }], totalPeople: 1 };
    expect(stripContactFields(clean, false)).toBe(clean);
    const tricky = JSON.parse('{"__proto__":{"x":1},"phoneNumbers":[],"ok":2}') as object;
    const out = stripContactFields(tricky, false) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__', 'ok']);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"x":1},"ok":2}');
  });

  it('refuses JSON nested deeper than the filters walk', () => {
    let deep: unknown = { phoneNumbers: [] };
    for (let i = 0; i < MAX_JSON_DEPTH + 2; i++) deep = [deep];
    expect(() => stripContactFields(deep, false)).toThrow(ResponseFilterLimitError);
  });

  it('is linear: 200k persons and a 200k-key object finish well inside the test timeout', () => {
    const many = { connections: Array.from({ length: 200_000 }, (_, i) => person(`c${i}`)) };
    const out = stripContactFields(many, false) as typeof many;
    expect(out.connections).toHaveLength(200_000);
    expect(Object.keys(out.connections[199_999]!)).toEqual([...BASIC]);
    const wide: Record<string, number> = {};
    for (let i = 0; i < 200_000; i++) wide[`k${i}`] = i;
    wide.phoneNumbers = 1;
    expect(Object.keys(stripContactFields(wide, false) as object)).toHaveLength(200_000);
  });
});

describe('isSingleContactRead', () => {
  it.each<[string, string, boolean]>([
    ['GET', '/v1/people/c1234567890', true],
    ['get', '/v1/people/c_1-2', true],
    ['GET', '/v1/people/me/connections', false],
    ['GET', '/v1/people:searchContacts', false],
    ['GET', '/v1/people:batchGet', false],
    ['GET', '/v1/people/c1:updateContact', false],
    ['GET', '/v1/people/c1%3AbatchGet', false],
    ['GET', '/v1/people/', false],
    ['GET', `/v1/people/${'a'.repeat(257)}`, false],
    ['GET', '/v1/contactGroups/g1', false],
    ['GET', '/api/v1/people/c1', false],
    ['PATCH', '/v1/people/c1', false],
    ['DELETE', '/v1/people/c1', false],
  ])('%s %s → %s', (method, path, want) => {
    expect(isSingleContactRead(method, path)).toBe(want);
  });
});

describe('fieldStepUpRefusal and keepsPii', () => {
  const on = { tier: 'balanced', fieldStepUpEnabled: true } as const;
  it('only a balanced policy with step-up enabled, for one contact', () => {
    expect(fieldStepUpRefusal(on, 'GET', '/v1/people/c1')).toBeNull();
    expect(fieldStepUpRefusal(null, 'GET', '/v1/people/c1')?.code).toBe('full_fields_unsupported');
    expect(
      fieldStepUpRefusal({ tier: 'strict', fieldStepUpEnabled: false }, 'GET', '/v1/people/c1')?.code,
    ).toBe('full_fields_strict');
    expect(fieldStepUpRefusal({ ...on, fieldStepUpEnabled: false }, 'GET', '/v1/people/c1')?.code).toBe(
      'full_fields_disabled',
    );
    expect(fieldStepUpRefusal(on, 'GET', '/v1/people/me/connections')?.code).toBe(
      'full_fields_single_contact_only',
    );
  });

  it('keeps PII only for a redeemed step-up on a route and policy that allow it, each checked again', () => {
    const one = { method: 'GET', path: '/v1/people/c1' };
    expect(keepsPii(on, { ...one, fullFields: true })).toBe(true);
    expect(keepsPii(on, one)).toBe(false);
    expect(keepsPii({ ...on, fieldStepUpEnabled: false }, { ...one, fullFields: true })).toBe(false);
    expect(keepsPii({ tier: 'strict', fieldStepUpEnabled: true }, { ...one, fullFields: true })).toBe(false);
    expect(keepsPii(on, { method: 'GET', path: '/v1/people/me/connections', fullFields: true })).toBe(false);
  });
});

describe('contacts responses through the response filters', () => {
  const CONTACTS = { provider: 'suite_a', service: 'suite_a-contacts' };
  const rt = (contactFields: PolicyInput['contactFields'] = null, over: PolicyInput = {}) =>
    runtime({ contactFields, ...over }, CONTACTS);
  const LIST = { method: 'GET', path: '/v1/people/me/connections' };
  const ONE = { method: 'GET', path: '/v1/people/c1' };
  const enc = new TextEncoder();
  const dec = new TextDecoder();

  it('a contacts service always has a plan, whatever its rules; other services do not', () => {
    expect(planResponse(rt(), LIST)).toMatchObject({ contacts: { keepPii: false } });
    expect(planResponse(rt({ tier: 'strict', fieldStepUpEnabled: false }), ONE)).not.toBeNull();
    expect(planResponse(runtime(), LIST)).toBeNull();
  });

  it('buffered JSON: stripped; full fields only for a redeemed step-up on one contact', () => {
    const on = rt({ tier: 'balanced', fieldStepUpEnabled: true });
    const body = { connections: [person('c1')] };
    const listed = filterResponseBody(body, 'application/json', on, {
      ...LIST,
      fullFields: true,
    }) as typeof body;
    expect(Object.keys(listed.connections[0]!)).toEqual([...BASIC]);
    const one = filterResponseBody(person('c1'), 'application/json', on, ONE) as object;
    expect(Object.keys(one)).toEqual([...BASIC]);
    const full = filterResponseBody(person('c1'), 'application/json', on, {
      ...ONE,
      fullFields: true,
    }) as object;
    expect(Object.keys(full).sort()).toEqual([...BASIC, ...PII].sort());
    // A disabled or strict policy never keeps them, even if the caller says so.
    for (const settings of [null, { tier: 'strict', fieldStepUpEnabled: false } as const]) {
      const out = filterResponseBody(person('c1'), 'application/json', rt(settings), {
        ...ONE,
        fullFields: true,
      }) as object;
      expect(Object.keys(out)).toEqual([...BASIC]);
    }
  });

  it('response rules still apply on top (an admin may hide emails too)', () => {
    const policy = rt(null, {
      rules: { response: [{ label: 'no mail', match: {}, filter: { redact: [{ type: 'email' }] } }] },
    });
    const out = filterResponseBody(person('c1'), 'application/json', policy, ONE) as ReturnType<
      typeof person
    >;
    expect(out.emailAddresses[0]!.value).toBe('[REDACTED_EMAIL]');
    expect(out).not.toHaveProperty('phoneNumbers');
  });

  it('streamed and downloaded bytes: JSON, NDJSON and SSE are stripped for every chunking', () => {
    const policy = rt();
    const cases: Array<[string, string]> = [
      ['application/json; charset=utf-8', JSON.stringify({ connections: [person('c1'), person('c2')] })],
      ['application/x-ndjson', `${JSON.stringify(person('c1'))}\n${JSON.stringify(person('c2'))}\n`],
      ['text/event-stream', `data: ${JSON.stringify(person('c1'))}\n\n`],
    ];
    for (const [ct, text] of cases) {
      const bytes = enc.encode(text);
      const whole = dec.decode(runFilterCore(createFilterCore(ct, planResponse(policy, LIST), {})!, bytes));
      expect(whole, ct).not.toMatch(/555|Main St|favour|clearance|unclassified/);
      expect(whole, ct).toContain('Ann c1');
      for (const size of [1, 7, 64]) {
        const core = createFilterCore(ct, planResponse(policy, LIST), {})!;
        const parts: Uint8Array[] = [];
        for (let i = 0; i < bytes.length; i += size) parts.push(...core.push(bytes.subarray(i, i + size)));
        parts.push(...core.end());
        expect(dec.decode(Buffer.concat(parts)), `${ct} in ${size}-byte chunks`).toBe(whole);
      }
    }
  });

  it('anything that is not JSON is refused, never passed or redacted as text', () => {
    const policy = rt();
    for (const ct of [
      'text/plain',
      'text/html',
      'application/xml',
      'application/octet-stream',
      'image/png',
      '',
    ]) {
      expect(responseFilterability(ct, policy, LIST).kind, ct).toBe('refuse');
      expect(() => createFilterCore(ct, planResponse(policy, LIST), {}), ct).toThrow(
        ResponseUnfilterableError,
      );
    }
    expect(responseFilterability('application/json', policy, LIST).kind).toBe('filter');
    expect(() => filterResponseBody('aGVsbG8=', 'application/octet-stream', policy, LIST)).toThrow(
      ResponseUnfilterableError,
    );
    // A body labelled JSON that only a lenient parser reads is refused as well.
    expect(() =>
      filterResponseBody(
        enc.encode("{'phoneNumbers': ['+1 415 555 2671']}"),
        'application/json',
        policy,
        ONE,
      ),
    ).toThrow(ResponseUnfilterableError);
  });

  it('a duplicated key cannot smuggle an unfiltered copy past the filter', () => {
    const policy = rt();
    const text =
      '{"resourceName":"people/c1","names":[],"phoneNumbers":["+1 415 555 2671"],"phoneNumbers":[]}';
    const out = dec.decode(
      runFilterCore(createFilterCore('application/json', planResponse(policy, ONE), {})!, enc.encode(text)),
    );
    expect(out).not.toContain('555');
    expect(JSON.parse(out)).toEqual({ resourceName: 'people/c1', names: [] });
  });
});
