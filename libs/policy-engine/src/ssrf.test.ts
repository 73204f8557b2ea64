import { describe, expect, it } from 'vitest';
import { blockedAddressReason, isBlockedAddress, parseCidrList, validateCidrList } from './ssrf.js';

describe('isBlockedAddress', () => {
  it.each([
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['100.127.255.255', 'carrierGradeNat'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fc00::1', 'uniqueLocal'],
    ['fd12:3456::1', 'uniqueLocal'],
    ['fe80::1', 'linkLocal'],
    ['febf::1', 'linkLocal'],
    ['fec0::1', 'deprecatedSiteLocal'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.1.2.3', 'private'],
    ['::ffff:169.254.169.254', 'linkLocal'],
    ['64:ff9b::7f00:1', 'nat64 of loopback'],
    ['64:ff9b::a9fe:a9fe', 'nat64 of linkLocal'],
    ['64:ff9b:1::1', 'rfc6052'],
    ['::127.0.0.1', 'outside global unicast 2000::/3'],
    ['::a9fe:a9fe', 'outside global unicast 2000::/3'],
    ['::8.8.8.8', 'outside global unicast 2000::/3'],
    ['2002:7f00:1::1', '6to4'],
    ['2001:0:4136:e378::1', 'teredo'],
    ['2001:db8::1', 'reserved'],
    ['100::1', 'discard'],
    ['::ffff:0:7f00:1', 'rfc6145'],
  ])('blocks %s (%s)', (ip, reason) => {
    expect(isBlockedAddress(ip, [])).toBe(true);
    expect(blockedAddressReason(ip, [])).toBe(reason);
  });

  it.each([
    '93.184.216.34',
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '2a00:1450:4001:82a::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
  ])('passes public %s', (ip) => {
    expect(isBlockedAddress(ip, [])).toBe(false);
  });

  it.each([
    '2130706433',
    '0x7f.0.0.1',
    '0177.0.0.1',
    '127.1',
    '010.0.0.1',
    '1.2.3.256',
    'localhost',
    '',
    'fe80::1%eth0',
    '::ffff:0x7f.1',
    ' 8.8.8.8',
    '[::1]',
  ])('treats the non-canonical or invalid spelling %j as blocked', (ip) => {
    expect(isBlockedAddress(ip, [])).toBe(true);
  });

  it('lets addresses inside the allow list through, and only those', () => {
    const allow = ['127.0.0.0/8', '10.1.0.0/16', '::1'];
    expect(isBlockedAddress('127.0.0.1', allow)).toBe(false);
    expect(isBlockedAddress('::ffff:127.0.0.1', allow)).toBe(false);
    expect(isBlockedAddress('::1', allow)).toBe(false);
    expect(isBlockedAddress('10.1.2.3', allow)).toBe(false);
    expect(isBlockedAddress('10.2.0.1', allow)).toBe(true);
    expect(isBlockedAddress('169.254.169.254', allow)).toBe(true);
    expect(isBlockedAddress('64:ff9b::7f00:1', allow)).toBe(true);
  });

  it('ignores invalid allow entries (fails closed) and reports them for config validation', () => {
    expect(isBlockedAddress('127.0.0.1', ['127.0.0.0/33', 'nonsense', '0x7f.0.0.1/8'])).toBe(true);
    expect(validateCidrList(['10.0.0.0/8', 'nonsense', '127.1/8'])).toEqual([
      'invalid CIDR "nonsense"',
      'invalid CIDR "127.1/8"',
    ]);
    expect(parseCidrList([' 10.0.0.0/8 ', '', '::1/128']).ranges).toHaveLength(2);
  });
});
