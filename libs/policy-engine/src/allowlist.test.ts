import type { HttpMethod } from '@vlt/contracts';
import { describe, expect, it } from 'vitest';
import { compileAllowlistEntry, matchAllowlist } from './allowlist.js';
import { canonicalizeTarget } from './url-canonicalizer.js';

const entries = [
  compileAllowlistEntry(
    {
      baseUrl: 'https://gmail.googleapis.com',
      methods: ['GET'],
      pathPatterns: ['/gmail/v1/users/me/messages*'],
    },
    0,
  ),
  compileAllowlistEntry(
    {
      baseUrl: 'https://gmail.googleapis.com',
      methods: ['POST'],
      pathPatterns: ['/gmail/v1/users/me/messages/send'],
    },
    1,
  ),
  compileAllowlistEntry(
    {
      baseUrl: 'https://Site.Example.net./rest/api/3/',
      methods: ['GET', 'POST'],
      pathPatterns: ['/issue/*', '/myself'],
    },
    2,
  ),
  compileAllowlistEntry(
    { baseUrl: 'https://api.example.com:8443', methods: ['GET'], pathPatterns: ['/public/%7Edocs/*'] },
    3,
  ),
];

function decide(method: HttpMethod, url: string): number | 'refused' | null {
  const t = canonicalizeTarget(url);
  if (!t.ok) return 'refused';
  return matchAllowlist(entries, method, t)?.index ?? null;
}

describe('compileAllowlistEntry', () => {
  it('canonicalises host, port and base path and joins patterns', () => {
    expect(entries[2]).toEqual({
      index: 2,
      host: 'site.example.net',
      port: 443,
      methods: ['GET', 'POST'],
      patterns: [
        { value: '/rest/api/3/issue/', prefix: true },
        { value: '/rest/api/3/myself', prefix: false },
      ],
    });
    expect(entries[3]!.patterns[0]).toEqual({ value: '/public/~docs/', prefix: true });
  });

  it.each([
    ['/a/../b', 'dot segments'],
    ['/a//b', 'dot segments or repeated slashes'],
    ['/a/%2e%2e/*', 'dot segments'],
    ['/a%2fb', 'encoded "/"'],
  ])('refuses pattern %s', (pattern, message) => {
    expect(() =>
      compileAllowlistEntry({ baseUrl: 'https://a.example', methods: ['GET'], pathPatterns: [pattern] }, 0),
    ).toThrow(message);
  });

  it('refuses base URLs that are not https or carry user info', () => {
    expect(() =>
      compileAllowlistEntry({ baseUrl: 'http://a.example', methods: ['GET'], pathPatterns: ['/'] }, 0),
    ).toThrow('https');
    expect(() =>
      compileAllowlistEntry({ baseUrl: 'https://u@a.example', methods: ['GET'], pathPatterns: ['/'] }, 0),
    ).toThrow('user info');
  });
});

describe('matchAllowlist', () => {
  it.each<[HttpMethod, string, number | 'refused' | null]>([
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/me/messages', 0],
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/me/messages/123', 0],
    ['GET', 'https://GMAIL.googleapis.com./gmail/v1/users/me/messages?q=x', 0],
    ['GET', 'https://gmail.googleapis.com:443/gmail/v1/users/me/messages', 0],
    ['POST', 'https://gmail.googleapis.com/gmail/v1/users/me/messages/send', 1],
    ['GET', 'https://site.example.net/rest/api/3/issue/ABC-1', 2],
    ['POST', 'https://site.example.net/rest/api/3/myself', 2],
    ['GET', 'https://api.example.com:8443/public/~docs/x', 3],
    ['GET', 'https://api.example.com:8443/public/%7edocs/x', 3],
    // default deny
    ['DELETE', 'https://gmail.googleapis.com/gmail/v1/users/me/messages/123', null],
    ['POST', 'https://gmail.googleapis.com/gmail/v1/users/me/messages/send/extra', null],
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/me/drafts', null],
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/other/messages', null],
    ['GET', 'https://site.example.net/rest/api/3/myself/x', null],
    ['GET', 'https://site.example.net/rest/api/2/myself', null],
    ['GET', 'https://api.example.com/public/~docs/x', null],
    ['GET', 'https://api.example.com:8444/public/~docs/x', null],
    ['GET', 'https://evil.example/gmail/v1/users/me/messages', null],
    ['GET', 'https://gmail.googleapis.com.evil.example/gmail/v1/users/me/messages', null],
    // canonicalisation tricks: either resolved to what they mean (and then judged) or refused
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/me/messages/../../../../admin', null],
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/me/messages/%2e%2e/%2e%2e/other/messages', null],
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/me/messages%2f..%2f..%2fdrafts', 'refused'],
    ['GET', 'https://gmail.googleapis.com/gmail/v1/users/me/messages/..;/..;/drafts', 'refused'],
    ['GET', 'https://gmail.googleapis.com//gmail//v1/users/me/messages', 0],
    ['GET', 'https://gmail.googleapis.com\\@evil.example/gmail/v1/users/me/messages', 'refused'],
    ['GET', 'https://gmail.googleapis.com@evil.example/gmail/v1/users/me/messages', 'refused'],
    ['GET', 'https://evil.example#@gmail.googleapis.com/gmail/v1/users/me/messages', 'refused'],
    ['GET', 'http://gmail.googleapis.com/gmail/v1/users/me/messages', 'refused'],
    ['POST', 'https://site.example.net/rest/api/3/issue/../../2/issue', null],
  ])('%s %s → %s', (method, url, expected) => {
    expect(decide(method, url)).toBe(expected);
  });

  it('matches nothing with an empty allowlist', () => {
    const t = canonicalizeTarget('https://gmail.googleapis.com/');
    if (!t.ok) throw new Error('unexpected');
    expect(matchAllowlist([], 'GET', t)).toBeNull();
  });
});
