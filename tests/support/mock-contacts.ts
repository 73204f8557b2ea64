/**
 * A local HTTPS stand-in for a People-style contacts API (service `suite_a-contacts`, ADR 0045):
 *   GET /v1/people/{id}                  one person (`people/{id}`), 404 in the API's error shape
 *   GET /v1/people/me/connections        the list: `{connections, totalPeople, totalItems}`
 *   GET /v1/people:searchContacts?query  `{results: [{person}]}` (names, emails and phones match)
 *   GET /v1/people:batchGet?resourceNames=people/a&resourceNames=people/b
 *                                        `{responses: [{httpStatusCode, requestedResourceName, person}]}`
 *   GET /v1/contactGroups                `{contactGroups: [...]}`
 * Every person carries every field class: basic (names, emails, organisations), PII (phones,
 * addresses, birthdays, relations, events, IM, photos, URLs) and notes (biographies,
 * userDefined, clientData, miscKeywords), plus one field no classification knows. Each PII and
 * notes value contains a marker (`PII-…`, `NOTE-…`, `UNKNOWN-…`) so a test can look for any
 * leak in the raw answer text.
 *
 * `?alt=vcard` on a single person answers `text/vcard` (a text export the gateway must refuse),
 * `?alt=ndjson` on the list answers one person per line.
 *
 * The server starts with its own throw-away certificate, since the gateway that will call it
 * is configured with its URL before it exists; `useTls` then switches it to a certificate the
 * gateway trusts (the provider mock's).
 */
import https from 'node:https';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createTestPki } from './test-pki.js';

export interface ContactsRecord {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  bearer: string | null;
}

export interface MockContacts {
  /** `https://127.0.0.1:<port>`: set it as `VLT_SUITE_A_API_URL`. */
  readonly url: string;
  readonly requests: ContactsRecord[];
  readonly people: ReadonlyMap<string, Person>;
  /** Serve this certificate from now on (the one the gateway trusts). */
  useTls(tls: { key: string; cert: string }): void;
  close(): Promise<void>;
}

export type Person = Record<string, unknown> & { resourceName: string };

/** The markers of everything a stripped answer must not contain. */
export const PII_MARKER = 'PII-';
export const NOTE_MARKER = 'NOTE-';
export const UNKNOWN_MARKER = 'UNKNOWN-';

export function mockPerson(id: string, name: string): Person {
  return {
    resourceName: `people/${id}`,
    etag: `%Eg${id}`,
    metadata: { sources: [{ type: 'CONTACT', id }], objectType: 'PERSON' },
    names: [{ displayName: name, givenName: name.split(' ')[0] }],
    emailAddresses: [{ value: `${id}@example.com`, type: 'work' }],
    organizations: [{ name: 'Example Corp', title: 'Engineer' }],
    memberships: [{ contactGroupMembership: { contactGroupResourceName: 'contactGroups/myContacts' } }],
    phoneNumbers: [{ value: '+1 415 555 0101', type: 'mobile', formattedType: `${PII_MARKER}phone-${id}` }],
    addresses: [{ formattedValue: `${PII_MARKER}12 Hidden Lane, ${id}ville`, type: 'home' }],
    birthdays: [{ date: { year: 1980, month: 4, day: 2 }, text: `${PII_MARKER}birthday-${id}` }],
    relations: [{ person: `${PII_MARKER}spouse-of-${id}`, type: 'spouse' }],
    events: [{ date: { month: 6, day: 1 }, type: 'anniversary', formattedType: `${PII_MARKER}event-${id}` }],
    imClients: [{ username: `${PII_MARKER}im-${id}`, protocol: 'jabber' }],
    photos: [{ url: `https://photos.example.com/${PII_MARKER}${id}.jpg` }],
    urls: [{ value: `https://${PII_MARKER}home-${id}.example.com` }],
    biographies: [{ value: `${NOTE_MARKER}owes us a favour (${id})`, contentType: 'TEXT_PLAIN' }],
    userDefined: [{ key: 'clearance', value: `${NOTE_MARKER}userdefined-${id}` }],
    clientData: [{ key: 'crm', value: `${NOTE_MARKER}clientdata-${id}` }],
    miscKeywords: [{ value: `${NOTE_MARKER}keyword-${id}`, type: 'OUTLOOK_KEYWORD' }],
    holographicSignature: `${UNKNOWN_MARKER}${id}`,
  };
}

const PEOPLE: Array<[string, string]> = [
  ['c1001', 'Ann Archer'],
  ['c1002', 'Bob Baker'],
  ['c1003', 'Cleo Carter'],
];

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  contentType = 'application/json; charset=UTF-8',
) {
  res.writeHead(status, { 'content-type': contentType });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

function notFound(res: ServerResponse, what: string) {
  send(res, 404, { error: { code: 404, message: `${what} not found`, status: 'NOT_FOUND' } });
}

function vcard(p: Person): string {
  const phone = (p.phoneNumbers as Array<{ value: string }>)[0]!.value;
  const name = (p.names as Array<{ displayName: string }>)[0]!.displayName;
  return `BEGIN:VCARD\r\nVERSION:3.0\r\nFN:${name}\r\nTEL:${phone}\r\nNOTE:${NOTE_MARKER}vcard\r\nEND:VCARD\r\n`;
}

export async function startMockContacts(): Promise<MockContacts> {
  const placeholder = await createTestPki();
  const people = new Map(PEOPLE.map(([id, name]) => [id, mockPerson(id, name)]));
  const requests: ContactsRecord[] = [];

  const server = https.createServer({ key: placeholder.key, cert: placeholder.cert }, (req, res) => {
    const u = new URL(req.url ?? '/', 'https://contacts.invalid');
    const auth = req.headers.authorization ?? '';
    requests.push({
      method: req.method ?? 'GET',
      path: u.pathname,
      query: u.searchParams,
      headers: req.headers,
      bearer: /^bearer /i.test(auth) ? auth.slice(7) : null,
    });
    req.resume();
    if (!/^bearer /i.test(auth)) {
      return send(res, 401, { error: { code: 401, message: 'no credentials', status: 'UNAUTHENTICATED' } });
    }
    if (req.method !== 'GET') return send(res, 405, { error: { code: 405, message: 'read-only mock' } });
    const path = u.pathname;
    if (path === '/v1/people/me/connections') {
      const all = [...people.values()];
      if (u.searchParams.get('alt') === 'ndjson') {
        return send(res, 200, all.map((p) => `${JSON.stringify(p)}\n`).join(''), 'application/x-ndjson');
      }
      return send(res, 200, { connections: all, totalPeople: all.length, totalItems: all.length });
    }
    if (path === '/v1/people:searchContacts') {
      const q = (u.searchParams.get('query') ?? '').toLowerCase();
      const results = [...people.values()]
        .filter((p) => JSON.stringify(p).toLowerCase().includes(q))
        .map((person) => ({ person }));
      return send(res, 200, { results });
    }
    if (path === '/v1/people:batchGet') {
      const responses = u.searchParams.getAll('resourceNames').map((name) => {
        const p = people.get(name.replace(/^people\//, ''));
        return p
          ? { httpStatusCode: 200, requestedResourceName: name, person: p }
          : { httpStatusCode: 404, requestedResourceName: name, status: { code: 5, message: 'not found' } };
      });
      return send(res, 200, { responses });
    }
    if (path === '/v1/contactGroups') {
      return send(res, 200, {
        contactGroups: [
          {
            resourceName: 'contactGroups/myContacts',
            name: 'myContacts',
            groupType: 'SYSTEM_CONTACT_GROUP',
            memberCount: people.size,
            clientData: [{ key: 'crm', value: `${NOTE_MARKER}group` }],
          },
        ],
      });
    }
    const one = /^\/v1\/people\/([A-Za-z0-9_-]+)$/.exec(path);
    if (one) {
      const p = people.get(one[1]!);
      if (!p) return notFound(res, `people/${one[1]}`);
      if (u.searchParams.get('alt') === 'vcard') return send(res, 200, vcard(p), 'text/vcard; charset=utf-8');
      return send(res, 200, p);
    }
    return notFound(res, path);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    requests,
    people,
    useTls(tls) {
      server.setSecureContext({ key: tls.key, cert: tls.cert });
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await placeholder.dispose();
    },
  };
}
