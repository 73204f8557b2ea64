import { describe, expect, it } from 'vitest';
import { requestFingerprint } from './fingerprint.js';

const base = {
  method: 'POST',
  url: 'https://api.example.com/v1/send',
  query: { a: '1' },
  body: { to: 'x', cc: ['y'] },
};

describe('requestFingerprint', () => {
  it('is a stable SHA-256 hex digest', () => {
    expect(requestFingerprint(base)).toMatch(/^[0-9a-f]{64}$/);
    expect(requestFingerprint(base)).toBe(requestFingerprint(structuredClone(base)));
  });

  it('does not change with spellings that mean the same request', () => {
    const fp = requestFingerprint(base);
    expect(requestFingerprint({ ...base, method: 'post' })).toBe(fp);
    expect(requestFingerprint({ ...base, url: 'https://API.example.com:443/v1/./send' })).toBe(fp);
    expect(requestFingerprint({ ...base, body: { cc: ['y'], to: 'x' } })).toBe(fp);
    expect(requestFingerprint({ ...base, body: '{ "cc": ["y"], "to": "\\u0078" }' })).toBe(fp);
    expect(
      requestFingerprint({ ...base, url: 'https://api.example.com/v1/send?a=1', query: undefined }),
    ).toBe(fp);
  });

  it('changes with anything that changes the request', () => {
    const fp = requestFingerprint(base);
    expect(requestFingerprint({ ...base, method: 'PUT' })).not.toBe(fp);
    expect(requestFingerprint({ ...base, url: 'https://api.example.com/v1/send2' })).not.toBe(fp);
    expect(requestFingerprint({ ...base, query: { a: '2' } })).not.toBe(fp);
    expect(requestFingerprint({ ...base, body: { to: 'x', cc: ['z'] } })).not.toBe(fp);
    expect(requestFingerprint({ ...base, body: undefined })).not.toBe(fp);
    expect(requestFingerprint({ ...base, requestFullFields: true })).not.toBe(fp);
    expect(requestFingerprint({ ...base, body: 'to=x' })).not.toBe(
      requestFingerprint({ ...base, body: '"to=x"' }),
    );
  });
});
