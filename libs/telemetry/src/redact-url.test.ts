import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { redactQuery, redactUrl } from './index.js';

describe('redactUrl', () => {
  it.each([
    [
      '/v1/notifications/stream?access_token=vltp_abcdefghijklmnop',
      '/v1/notifications/stream?access_token=REDACTED',
    ],
    [
      '/v1/connections/callback?code=4%2F0Ab&state=xyz',
      '/v1/connections/callback?code=REDACTED&state=REDACTED',
    ],
    ['/plain/path', '/plain/path'],
    ['/p?', '/p'],
    ['/p?flag', '/p?flag=REDACTED'],
    ['/p?a=1&a=2&&b', '/p?a=REDACTED&a=REDACTED&b=REDACTED'],
    [
      'https://user:p%40ss@api.example.com/v1/x?key=AIzaSECRET#frag',
      'https://REDACTED@api.example.com/v1/x?key=REDACTED',
    ],
    [
      'https://api.example.com/bot123456:AAH-secret_token/sendMessage',
      'https://api.example.com/botREDACTED/sendMessage',
    ],
    ['/v1/agents/vltb_abcDEF123-_xyz/whatever', '/v1/agents/vltb_REDACTED/whatever'],
    ['/p?vltt_secretAsKey', '/p?vltt_REDACTED=REDACTED'],
    ['/p?%E0%A4%A=1', '/p?REDACTED=REDACTED'],
    ['/p?a%20b=1', '/p?REDACTED=REDACTED'],
    ['', ''],
  ])('%s → %s', (input, expected) => {
    expect(redactUrl(input)).toBe(expected);
  });

  it('redacts the token of a quick-action link (the path segment is the credential)', () => {
    const token = '0b7f2c1e-8a4d-4c53-9a63-1f2e3d4c5b6a.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcde';
    expect(redactUrl(`/api/quick-action/${token}`)).toBe('/api/quick-action/REDACTED');
    expect(redactUrl(`https://vault.example/api/quick-action/${token}?x=1`)).toBe(
      'https://vault.example/api/quick-action/REDACTED?x=REDACTED',
    );
  });

  it('redacts a bare query string', () => {
    expect(redactQuery('token=abc&page=2')).toBe('token=REDACTED&page=REDACTED');
    expect(redactQuery('?x=1')).toBe('x=REDACTED');
    expect(redactQuery('')).toBe('');
  });

  it('property: no query value survives, whatever the URL', () => {
    const secret = fc.stringMatching(/^[A-Za-z0-9_-]{12,40}$/);
    const key = fc.constantFrom('access_token', 'token', 'key', 'code', 'sig', 'x');
    fc.assert(
      fc.property(fc.webPath(), key, secret, fc.webFragments(), (path, k, value, fragment) => {
        const out = redactUrl(`https://h.example${path}?${k}=${value}#${fragment}${value}`);
        expect(out).not.toContain(value);
      }),
      { numRuns: 100 },
    );
  });

  it('property: never throws on arbitrary input', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary' }), (s) => void redactUrl(s)));
  });
});
