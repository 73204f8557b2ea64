import { describe, expect, it } from 'vitest';
import { auditUrl } from './audit-url.js';

describe('auditUrl', () => {
  it('drops query values, user-info and fragments, keeps keys once', () => {
    expect(auditUrl('https://user:pw@api.example.com/v1/x?apikey=s3cret&b=1&apikey=2#frag')).toBe(
      'https://api.example.com/v1/x?apikey=&b=',
    );
  });
  it('never throws on garbage', () => {
    expect(auditUrl('not a url')).toBe('(unparseable)');
  });
});
