/**
 * The approval fingerprint: a SHA-256 over exactly what will be sent — method, canonical URL
 * (query merged in), the body bytes in a canonical form, `requestFullFields`, and the headers
 * that will be forwarded. An approval executes only the request it was granted for.
 *
 * The body's canonical form sorts object keys and normalises string escapes, but keeps every
 * number exactly as written: `9007199254740993` and `9007199254740992` are different requests
 * (JSON.parse would make them equal), and so are `1e400` and `null`. A body that is not JSON is
 * fingerprinted as its text, a body of bytes by their SHA-256.
 */
import { createHash } from 'node:crypto';

export interface FingerprintInput {
  method: string;
  /** The canonical target URL, as the policy engine will send it. */
  href: string;
  /** Exactly the body that will be sent, or undefined for none. */
  body: string | Uint8Array | undefined;
  /** The caller parsed this very text as JSON already (the pipeline has): it is not parsed again. */
  bodyIsJson?: boolean;
  requestFullFields: boolean;
  /** The headers that will be forwarded (already sanitised, lower-case names). */
  headers: Record<string, string>;
}

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);
const VALUE_END = new Set([0x2c, 0x5d, 0x7d, 0x20, 0x09, 0x0a, 0x0d]);
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Canonical JSON text of a valid JSON document, numbers kept as their lexemes. The caller has
 * parsed and bounded the text already (depth ≤ 64), so the recursion is shallow.
 */
export function canonicalJsonText(text: string): string {
  let i = 0;
  const skipWs = () => {
    while (i < text.length && WS.has(text.charCodeAt(i))) i++;
  };
  /** The string lexeme at `i`, quotes included; moves `i` past it. */
  const scanString = (): string => {
    const start = i;
    // The closing quote is the first one not escaped: preceded by an even run of backslashes.
    let end = text.indexOf('"', start + 1);
    for (;;) {
      let slashes = 0;
      while (text.charCodeAt(end - 1 - slashes) === 0x5c) slashes++;
      if (slashes % 2 === 0) break;
      end = text.indexOf('"', end + 1);
    }
    i = end + 1;
    return text.slice(start, i);
  };
  /** The string at `i` as `JSON.stringify` writes it. */
  const canonicalString = (): string => {
    const lexeme = scanString();
    // Without an escape or a surrogate, JSON.stringify writes the lexeme back unchanged (valid
    // JSON holds no raw control character): a 30 MiB image is not decoded and encoded again.
    if (lexeme.indexOf('\\') === -1 && !SURROGATE.test(lexeme)) return lexeme;
    return JSON.stringify(JSON.parse(lexeme) as string);
  };
  const value = (): string => {
    skipWs();
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */) {
      i++;
      const members: Array<[string, string]> = [];
      skipWs();
      if (text.charCodeAt(i) === 0x7d) {
        i++;
        return '{}';
      }
      for (;;) {
        skipWs();
        const key = JSON.parse(scanString()) as string;
        skipWs();
        i++; // ':'
        members.push([key, value()]);
        skipWs();
        if (text.charCodeAt(i++) !== 0x2c) break; // ',' continues, '}' ends
      }
      members.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      return `{${members.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`;
    }
    if (c === 0x5b /* [ */) {
      i++;
      const items: string[] = [];
      skipWs();
      if (text.charCodeAt(i) === 0x5d) {
        i++;
        return '[]';
      }
      for (;;) {
        items.push(value());
        skipWs();
        if (text.charCodeAt(i++) !== 0x2c) break;
      }
      return `[${items.join(',')}]`;
    }
    if (c === 0x22) return canonicalString();
    // A number or a literal: its lexeme, exactly as written.
    const start = i;
    while (i < text.length && !VALUE_END.has(text.charCodeAt(i))) i++;
    return text.slice(start, i);
  };
  return value();
}

function canonicalBody(body: string | Uint8Array | undefined, isJson: boolean): string {
  if (body === undefined) return 'none';
  if (body instanceof Uint8Array) return `bytes:${createHash('sha256').update(body).digest('hex')}`;
  if (isJson) return `json:${canonicalJsonText(body)}`;
  try {
    JSON.parse(body);
  } catch {
    return `text:${body}`;
  }
  return `json:${canonicalJsonText(body)}`;
}

export function requestFingerprint(req: FingerprintInput): string {
  const headers = Object.keys(req.headers)
    .sort()
    .map((name) => [name, req.headers[name]!]);
  const material = JSON.stringify([
    'vlt-approval-fingerprint-v2',
    req.method.toUpperCase(),
    req.href,
    canonicalBody(req.body, req.bodyIsJson === true),
    req.requestFullFields,
    headers,
  ]);
  return createHash('sha256').update(material).digest('hex');
}
