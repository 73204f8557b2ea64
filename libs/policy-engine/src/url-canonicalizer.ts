/**
 * Canonicalises a Model B target URL. The allowlist, the rules and the fingerprint all look at
 * the canonical form, and the data plane sends exactly `href`, so whatever was matched is what
 * goes on the wire; there is no second parser that could read the URL differently.
 *
 * Refused (cannot be canonicalised without guessing what an upstream would do): anything but
 * `https://`, user info or any `@` in the authority, fragments, backslashes, whitespace and
 * control characters, encoded `/`, `\` and NUL in the path, invalid percent escapes, invalid
 * UTF-8 in the path, path parameters (`;` or `%3B` in a segment), encoded whitespace or control
 * characters at the edge of a segment, empty DNS labels (ADR 0039).
 *
 * Canonicalised: scheme and host case, IDN (UTS #46 to punycode, done by the WHATWG parser),
 * trailing dot of the host, IPv4 literals in decimal/octal/hex spellings (to dotted quad),
 * default port, percent-encoding (unreserved characters decoded, hex upper-cased, unsafe
 * characters encoded), dot segments (`.`, `..`, `%2e%2e`, resolved as RFC 3986 does), repeated
 * slashes (collapsed). The query is normalised the same way and `query` entries are appended.
 * Rules and allowlists match `matchPath`: the path without a trailing slash.
 */

export type HostKind = 'domain' | 'ipv4' | 'ipv6';

export interface CanonicalTarget {
  ok: true;
  url: URL;
  href: string;
  /** Lower-case ASCII host; IPv6 without brackets. */
  host: string;
  hostKind: HostKind;
  port: number;
  /** Canonical path, always starting with `/`; this is what is sent. */
  path: string;
  /**
   * The path rules and allowlists match: `path` without a trailing slash (servers answer
   * `/issue/` and `/issue/.` as `/issue`, so a rule on one must hold for the others).
   */
  matchPath: string;
  /** Canonical query including the leading `?`, or ''. */
  search: string;
}

export interface CanonicalizeFailure {
  ok: false;
  reason: string;
  /** False when the input is not a URL at all (a 400), true when it is a refused trick (a 403). */
  refused: boolean;
}

export const MAX_URL_LENGTH = 8192;

const HEX = '0123456789ABCDEF';
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whitespace, control characters and backslashes are never accepted raw in a URL. */
function hasForbiddenRaw(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f || c === 0x5c) return true;
  }
  return false;
}

function isUnreserved(c: number): boolean {
  return (
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x61 && c <= 0x7a) ||
    (c >= 0x30 && c <= 0x39) ||
    c === 0x2d ||
    c === 0x2e ||
    c === 0x5f ||
    c === 0x7e
  );
}

/** sub-delims `!$&'()*+,;=` plus `:` and `@`: allowed raw in a path segment (RFC 3986 pchar). */
function isPathRawAllowed(c: number): boolean {
  return isUnreserved(c) || "!$&'()*+,;=:@".includes(String.fromCharCode(c));
}

/** Query characters kept raw. `'` is not: the WHATWG parser encodes it in special-scheme queries. */
function isQueryRawAllowed(c: number): boolean {
  return isUnreserved(c) || '!$&()*+,;=:@/?'.includes(String.fromCharCode(c));
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

function pctByte(b: number): string {
  return `%${HEX[b >> 4]}${HEX[b & 15]}`;
}

const encoder = new TextEncoder();

function pctEncodeChar(ch: string): string {
  let out = '';
  for (const b of encoder.encode(ch)) out += pctByte(b);
  return out;
}

class CanonError extends Error {}

/**
 * Normalises percent-encoding of one component. `isRawAllowed` says which characters stay raw;
 * `refuseByte` may refuse a decoded byte (encoded `/` in a path segment).
 */
function normalizeComponent(
  raw: string,
  isRawAllowed: (c: number) => boolean,
  refuseByte?: (b: number) => string | null,
): string {
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x25 /* % */) {
      const h = i + 2 < raw.length ? hexValue(raw.charCodeAt(i + 1)) : -1;
      const l = h >= 0 ? hexValue(raw.charCodeAt(i + 2)) : -1;
      if (h < 0 || l < 0) throw new CanonError('invalid percent-encoding');
      const b = h * 16 + l;
      const refusal = refuseByte?.(b);
      if (refusal) throw new CanonError(refusal);
      out += isUnreserved(b) ? String.fromCharCode(b) : pctByte(b);
      i += 2;
    } else if (c < 0x80) {
      out += isRawAllowed(c) ? raw[i] : pctByte(c);
    } else {
      // Non-ASCII: encode the whole code point as UTF-8.
      const cp = raw.codePointAt(i)!;
      const ch = String.fromCodePoint(cp);
      out += pctEncodeChar(ch);
      i += ch.length - 1;
    }
  }
  return out;
}

function refusePathByte(b: number): string | null {
  if (b === 0x2f) return 'encoded "/" in the path';
  if (b === 0x5c) return 'encoded "\\" in the path';
  if (b === 0x00) return 'encoded NUL in the path';
  return null;
}

const PLAIN_SEGMENT = /^[A-Za-z0-9\-._~!$&'()*+,=:@]*$/;
/** An encoded space, control character or NBSP at the start or end of a normalised segment. */
const EDGE_WHITESPACE = /^(?:%[01][0-9A-F]|%20|%7F|%C2%A0)|(?:%[01][0-9A-F]|%20|%7F|%C2%A0)$/;

/**
 * Canonical form of a raw path (the part between authority and `?`). Exported for allowlist
 * patterns, which must be canonicalised by the very same rules as the URLs they match.
 */
export function canonicalizePath(rawPath: string): string {
  if (rawPath === '' || rawPath === '/') return '/';
  if (!rawPath.startsWith('/')) throw new CanonError('path must start with "/"');
  const rawSegments = rawPath.slice(1).split('/');
  const out: string[] = [];
  let trailingSlash = false;
  for (let i = 0; i < rawSegments.length; i++) {
    const last = i === rawSegments.length - 1;
    const raw = rawSegments[i]!;
    // Most segments hold only characters that stay as they are: skip the per-character pass.
    const plain = PLAIN_SEGMENT.test(raw);
    const seg = plain ? raw : normalizeComponent(raw, isPathRawAllowed, refusePathByte);
    // Each segment must decode to valid UTF-8 (refuses overlong forms such as %C0%AF, which
    // some servers decode to "/").
    if (!plain && seg.includes('%')) {
      try {
        decodeURIComponent(seg);
      } catch {
        throw new CanonError('path is not valid UTF-8 after percent-decoding');
      }
    }
    // Path parameters: servlet containers strip ";jsessionid=x" (and "..;x" reads as ".."), so
    // "/issue;x" would reach the handler of "/issue" unseen by a rule on "/issue". Refused.
    if (seg.includes(';') || seg.includes('%3B')) {
      throw new CanonError(
        seg.startsWith('.') ? 'dot segment with path parameters' : 'path parameters (";") are not allowed',
      );
    }
    // Servers trim whitespace around segments ("/issue%20" acts as "/issue"): refused too.
    if (!plain && EDGE_WHITESPACE.test(seg)) {
      throw new CanonError('encoded whitespace or control character at the edge of a path segment');
    }
    if (seg === '' || seg === '.') {
      trailingSlash = last;
      continue;
    }
    if (seg === '..') {
      out.pop();
      trailingSlash = last;
      continue;
    }
    out.push(seg);
    trailingSlash = false;
  }
  if (out.length === 0) return '/';
  return `/${out.join('/')}${trailingSlash ? '/' : ''}`;
}

/** Strict form encoding for `query` entries: everything but unreserved characters is escaped. */
function encodeQueryPart(s: string): string {
  if (LONE_SURROGATE.test(s)) throw new CanonError('query contains an unpaired surrogate');
  return encodeURIComponent(s).replace(/[!'()*]/g, (ch) => pctByte(ch.charCodeAt(0)));
}

/**
 * Lower-case ASCII names that the WHATWG host parser returns unchanged: no port, no IDN
 * (`xn--` labels are left to it for validation) and a last label that cannot read as a number.
 */
function isPlainDomain(authority: string): boolean {
  if (!/^[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})+$/.test(authority) || authority.length > 253) return false;
  const labels = authority.split('.');
  if (labels.some((l) => l.startsWith('xn--'))) return false;
  return (
    /[g-wyz]/.test(labels[labels.length - 1]!) ||
    !/^(0x[0-9a-f]*|[0-9a-f]*)$/.test(labels[labels.length - 1]!)
  );
}

function canonicalizeHost(authority: string): { host: string; hostKind: HostKind; port: number } {
  if (isPlainDomain(authority)) return { host: authority, hostKind: 'domain', port: 443 };
  let parsed: URL;
  try {
    // The WHATWG parser does IDN (UTS #46), case folding and IPv4 number parsing for us.
    parsed = new URL(`https://${authority}/`);
  } catch {
    throw new CanonError('invalid host');
  }
  let host = parsed.hostname;
  let hostKind: HostKind = 'domain';
  if (host.startsWith('[')) {
    hostKind = 'ipv6';
    host = host.slice(1, -1);
  } else {
    if (host.endsWith('.')) host = host.slice(0, -1);
    if (host === '' || host.startsWith('.') || host.includes('..') || host.endsWith('.')) {
      throw new CanonError('host has an empty label');
    }
    if (/^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$/.test(host)) hostKind = 'ipv4';
    else if (host.length > 253 || host.split('.').some((l) => l.length > 63))
      throw new CanonError('host name too long');
    // The WHATWG parser keeps characters no DNS name has ("*.example" stays a literal "*"):
    // a host is letters, digits, "-" and "_" per label (IDN is already punycode here).
    else if (!/^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/.test(host))
      throw new CanonError('invalid host: only letters, digits, "-" and "_" (no wildcards)');
  }
  const port = parsed.port === '' ? 443 : Number(parsed.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new CanonError('invalid port');
  return { host, hostKind, port };
}

export function canonicalizeTarget(
  url: string,
  query?: Record<string, string>,
): CanonicalTarget | CanonicalizeFailure {
  if (typeof url !== 'string' || url.length === 0)
    return { ok: false, reason: 'url is required', refused: false };
  if (url.length > MAX_URL_LENGTH) return { ok: false, reason: 'url is too long', refused: false };
  if (!/^https:\/\//i.test(url)) {
    const isUrl = /^[a-z][a-z0-9+.-]*:/i.test(url);
    return { ok: false, reason: 'only https:// URLs are allowed', refused: isUrl };
  }
  try {
    if (hasForbiddenRaw(url)) throw new CanonError('url contains whitespace, a control character or "\\"');
    if (LONE_SURROGATE.test(url)) throw new CanonError('url contains an unpaired surrogate');
    if (url.includes('#')) throw new CanonError('url must not contain a fragment');
    const rest = url.slice(8);
    const authEnd = rest.search(/[/?]/);
    const authority = authEnd === -1 ? rest : rest.slice(0, authEnd);
    if (authority.includes('@')) throw new CanonError('url must not contain user info');
    if (authority === '') throw new CanonError('url has no host');
    const afterAuth = authEnd === -1 ? '' : rest.slice(authEnd);
    const q = afterAuth.indexOf('?');
    const rawPath = q === -1 ? afterAuth : afterAuth.slice(0, q);
    const rawQuery = q === -1 ? '' : afterAuth.slice(q + 1);

    const { host, hostKind, port } = canonicalizeHost(authority);
    const path = canonicalizePath(rawPath === '' ? '/' : rawPath);
    const queryParts: string[] = [];
    if (rawQuery !== '') queryParts.push(normalizeComponent(rawQuery, isQueryRawAllowed));
    if (query) {
      for (const [k, v] of Object.entries(query)) {
        if (typeof v !== 'string') throw new CanonError(`query value for "${k}" must be a string`);
        queryParts.push(`${encodeQueryPart(k)}=${encodeQueryPart(v)}`);
      }
    }
    const search = queryParts.length ? `?${queryParts.join('&')}` : '';
    const hostPart = hostKind === 'ipv6' ? `[${host}]` : host;
    const href = `https://${hostPart}${port === 443 ? '' : `:${port}`}${path}${search}`;
    const parsed = new URL(href);
    // Belt and braces: the WHATWG serialisation (what undici sends) must equal what we matched.
    if (parsed.href !== href) throw new CanonError('url is not stable under re-parsing');
    const matchPath = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    return { ok: true, url: parsed, href, host, hostKind, port, path, matchPath, search };
  } catch (err) {
    if (err instanceof CanonError) return { ok: false, reason: err.message, refused: true };
    throw err;
  }
}

/** Canonical form of a path for patterns; throws a plain Error with the reason. */
export function canonicalizePathOrThrow(rawPath: string): string {
  try {
    return canonicalizePath(rawPath);
  } catch (err) {
    if (err instanceof CanonError) throw new Error(err.message);
    throw err;
  }
}
