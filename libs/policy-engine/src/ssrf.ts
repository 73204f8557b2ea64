/**
 * SSRF address checks. Default-deny: an address passes only when it is ordinary public
 * unicast. Everything special is blocked, including ranges ipaddr.js files under other names
 * (reserved, benchmarking, documentation, AMT, AS112, ORCHID, 6to4, Teredo, discard...).
 *
 * IPv4-mapped IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it maps to. NAT64
 * (64:ff9b::/96) is judged by its embedded IPv4 address, so IPv6-only clusters that reach the
 * internet through DNS64 keep working while 64:ff9b::7f00:1 stays blocked; the local-use NAT64
 * prefix 64:ff9b:1::/48 is blocked outright. IPv6 outside 2000::/3 is blocked (this includes the
 * deprecated IPv4-compatible form ::a.b.c.d).
 *
 * Only canonical spellings are accepted: dotted-quad IPv4 without leading zeros and plain IPv6
 * without zone ids. Anything else (`2130706433`, `0x7f.1`, `010.0.0.1`) counts as blocked, so a
 * resolver or caller that hands over an odd spelling fails closed.
 */
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Cidr = [Address, number];

const DOTTED_QUAD = /^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$/;

export function parseStrictAddress(ip: string): Address | null {
  if (typeof ip !== 'string' || ip.length > 64) return null;
  const quad = DOTTED_QUAD.exec(ip);
  if (quad) {
    const octets = quad.slice(1).map(Number);
    return octets.every((o) => o <= 255) ? new ipaddr.IPv4(octets) : null;
  }
  if (!ip.includes(':') || ip.includes('%')) return null;
  let text = ip;
  const tail = ip.slice(ip.lastIndexOf(':') + 1);
  if (tail.includes('.')) {
    // Rewrite a dotted tail as two hex groups ourselves: ipaddr accepts non-decimal tails
    // (::ffff:0x7f.1) and reads the IPv4-compatible ::a.b.c.d as if it were ::ffff:a.b.c.d.
    if (!ipaddr.IPv4.isValidFourPartDecimal(tail)) return null;
    const [a, b, c, d] = ipaddr.IPv4.parse(tail).octets as [number, number, number, number];
    text = `${ip.slice(0, ip.length - tail.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  return ipaddr.IPv6.isValid(text) ? ipaddr.IPv6.parse(text) : null;
}

/** Parses a CIDR list; a bare address means a single host. Invalid entries are returned apart. */
export function parseCidrList(cidrs: readonly string[]): { ranges: Cidr[]; invalid: string[] } {
  const ranges: Cidr[] = [];
  const invalid: string[] = [];
  for (const raw of cidrs) {
    const entry = raw.trim();
    if (entry === '') continue;
    try {
      if (entry.includes('/')) {
        const [addr, bits] = ipaddr.parseCIDR(entry);
        const strict = parseStrictAddress(entry.slice(0, entry.indexOf('/')));
        if (!strict) throw new Error('non-canonical address');
        ranges.push([addr, bits]);
      } else {
        const addr = parseStrictAddress(entry);
        if (!addr) throw new Error('invalid address');
        ranges.push([addr, addr.kind() === 'ipv4' ? 32 : 128]);
      }
    } catch {
      invalid.push(raw);
    }
  }
  return { ranges, invalid };
}

/** Human-readable problems with an allow list (for config validation at boot). */
export function validateCidrList(cidrs: readonly string[]): string[] {
  return parseCidrList(cidrs).invalid.map((c) => `invalid CIDR "${c}"`);
}

// The allow list is the same operator setting on every call, so its parse is memoised by its
// text. A pure cache: same input, same ranges; bounded so arbitrary lists cannot grow it.
const parsedAllowLists = new Map<string, readonly Cidr[]>();
function allowRanges(cidrs: readonly string[]): readonly Cidr[] {
  const key = cidrs.join(',');
  let ranges = parsedAllowLists.get(key);
  if (!ranges) {
    ranges = parseCidrList(cidrs).ranges;
    if (parsedAllowLists.size >= 32) parsedAllowLists.clear();
    parsedAllowLists.set(key, ranges);
  }
  return ranges;
}

function inRanges(addr: Address, ranges: readonly Cidr[]): boolean {
  for (const [net, bits] of ranges) {
    if (net.kind() === addr.kind() && addr.match(net, bits)) return true;
  }
  return false;
}

const GLOBAL_UNICAST_V6: Cidr = [ipaddr.IPv6.parse('2000::'), 3];
const NAT64_WELL_KNOWN: Cidr = [ipaddr.IPv6.parse('64:ff9b::'), 96];

function v4Reason(addr: ipaddr.IPv4): string | null {
  const range = addr.range();
  return range === 'unicast' ? null : range;
}

/** Null when the address is public, else the name of the range that blocks it. */
export function blockedAddressReason(ip: string, allowCidrs: readonly string[] = []): string | null {
  const parsed = parseStrictAddress(ip);
  if (!parsed) return 'not a canonical IP address';
  let addr: Address = parsed;
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    addr = (addr as ipaddr.IPv6).toIPv4Address();
  }
  if (allowCidrs.length > 0 && inRanges(addr, allowRanges(allowCidrs))) return null;
  if (addr.kind() === 'ipv4') return v4Reason(addr as ipaddr.IPv4);
  const v6 = addr as ipaddr.IPv6;
  if (v6.match(NAT64_WELL_KNOWN[0], NAT64_WELL_KNOWN[1])) {
    const bytes = v6.toByteArray().slice(12);
    const inner = v4Reason(new ipaddr.IPv4(bytes));
    return inner === null ? null : `nat64 of ${inner}`;
  }
  const range = v6.range();
  if (range !== 'unicast') return range;
  if (!v6.match(GLOBAL_UNICAST_V6[0], GLOBAL_UNICAST_V6[1])) return 'outside global unicast 2000::/3';
  return null;
}

/** True unless `ip` is a public unicast address or inside one of `allowCidrs`. */
export function isBlockedAddress(ip: string, allowCidrs: readonly string[] = []): boolean {
  return blockedAddressReason(ip, allowCidrs) !== null;
}
