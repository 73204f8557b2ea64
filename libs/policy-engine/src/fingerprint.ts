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
import { createHash, type Hash } from 'node:crypto';

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
/** Text is hashed this many UTF-16 code units at a time. */
const HASH_SLICE = 64 * 1024;

/**
 * A canonical text as a tree of its pieces. A large body's strings stay slices of the text the
 * agent sent: the canonical form is hashed piece by piece, never copied into one string.
 */
type Canonical = string | PlainString | Canonical[];

/**
 * A string lexeme with no escape and no surrogate, quotes included: `JSON.stringify` writes it
 * back unchanged, and escapes its two quotes only when the material is written.
 */
class PlainString {
  constructor(readonly lexeme: string) {}
}

/** What escaping in `JSON.stringify` changes or may change (a lone surrogate). */
// eslint-disable-next-line no-control-regex -- control characters are what it must find
const NEEDS_ESCAPE = /["\\\u0000-\u001f\uD800-\uDFFF]/;

/**
 * Canonical form of a valid JSON document, numbers kept as their lexemes. The caller has parsed
 * and bounded the text already (depth ≤ 64), so the recursion is shallow.
 */
function canonicalJson(text: string): Canonical {
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
  const canonicalString = (): Canonical => {
    const lexeme = scanString();
    // Without an escape or a surrogate, JSON.stringify writes the lexeme back unchanged (valid
    // JSON holds no raw control character): a 30 MiB image is not decoded and encoded again.
    if (lexeme.indexOf('\\') === -1 && !SURROGATE.test(lexeme)) return new PlainString(lexeme);
    return JSON.stringify(JSON.parse(lexeme) as string);
  };
  const value = (): Canonical => {
    skipWs();
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */) {
      i++;
      // Each member: its key (to sort by), the key as JSON.stringify writes it, and its value.
      const members: Array<[string, Canonical, Canonical]> = [];
      skipWs();
      if (text.charCodeAt(i) === 0x7d) {
        i++;
        return '{}';
      }
      for (;;) {
        skipWs();
        const lexeme = scanString();
        // As for values: a key without an escape or a surrogate is written back as it was sent.
        const plain = lexeme.indexOf('\\') === -1 && !SURROGATE.test(lexeme);
        const key = plain ? lexeme.slice(1, -1) : (JSON.parse(lexeme) as string);
        skipWs();
        i++; // ':'
        members.push([key, plain ? new PlainString(lexeme) : JSON.stringify(key), value()]);
        skipWs();
        if (text.charCodeAt(i++) !== 0x2c) break; // ',' continues, '}' ends
      }
      members.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      const out: Canonical[] = [];
      for (const [, k, v] of members) out.push(out.length === 0 ? '{' : ',', k, ':', v);
      out.push('}');
      return out;
    }
    if (c === 0x5b /* [ */) {
      i++;
      const out: Canonical[] = ['['];
      skipWs();
      if (text.charCodeAt(i) === 0x5d) {
        i++;
        return '[]';
      }
      for (;;) {
        out.push(value());
        skipWs();
        if (text.charCodeAt(i++) !== 0x2c) break;
        out.push(',');
      }
      out.push(']');
      return out;
    }
    if (c === 0x22) return canonicalString();
    // A number or a literal: its lexeme, exactly as written.
    const start = i;
    while (i < text.length && !VALUE_END.has(text.charCodeAt(i))) i++;
    return text.slice(start, i);
  };
  return value();
}

function forEachPiece(canonical: Canonical, each: (piece: string | PlainString) => void): void {
  if (Array.isArray(canonical)) for (const part of canonical) forEachPiece(part, each);
  else each(canonical);
}

/** Canonical JSON text of a valid JSON document (see `canonicalJson`), as one string. */
export function canonicalJsonText(text: string): string {
  const pieces: string[] = [];
  forEachPiece(canonicalJson(text), (piece) => pieces.push(typeof piece === 'string' ? piece : piece.lexeme));
  return pieces.join('');
}

/**
 * Feeds a hash the UTF-8 bytes of `JSON.stringify(text)` without its quotes, for a text given in
 * pieces, a slice at a time. Hashing one 30 MiB string whole would first write it escaped and
 * then encoded, each a fresh 30 MiB copy: hundreds of milliseconds of the event loop where
 * touching new memory is slow. Escaping and encoding are per character, so slicing changes no
 * byte, as long as no slice ends between the two halves of a surrogate pair, and every piece is
 * escaped on its own as it comes: a body of many short strings is not escaped a second time
 * once joined (ADR 0099, amended: 60 ms for 8 MiB of short strings).
 */
class EscapedTextHash {
  /** Text already escaped, hashed once it is a slice long. */
  private pending = '';
  constructor(private readonly hash: Hash) {}

  add(piece: string | PlainString): void {
    if (piece instanceof PlainString) {
      // Nothing inside its quotes needs escaping: only the quotes do.
      const { lexeme } = piece;
      if (lexeme.length < HASH_SLICE) return this.append(`\\"${lexeme.slice(1, -1)}\\"`);
      this.append('\\"');
      this.flush();
      for (let at = 1; at < lexeme.length - 1; at += HASH_SLICE) {
        this.hash.update(lexeme.slice(at, Math.min(at + HASH_SLICE, lexeme.length - 1)));
      }
      return this.append('\\"');
    }
    if (piece.length < HASH_SLICE) {
      // Structure, numbers and literals have nothing to escape; a piece that may is escaped whole.
      return this.append(NEEDS_ESCAPE.test(piece) ? JSON.stringify(piece).slice(1, -1) : piece);
    }
    this.flush();
    for (let at = 0; at < piece.length;) {
      let end = Math.min(at + HASH_SLICE, piece.length);
      if (isHighSurrogate(piece.charCodeAt(end - 1)) && isLowSurrogate(piece.charCodeAt(end))) end++;
      this.hash.update(JSON.stringify(piece.slice(at, end)).slice(1, -1));
      at = end;
    }
  }

  flush(): void {
    if (this.pending === '') return;
    this.hash.update(this.pending);
    this.pending = '';
  }

  private append(escaped: string): void {
    this.pending += escaped;
    if (this.pending.length >= HASH_SLICE) this.flush();
  }
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}
function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Feeds the body's canonical form, as the string `JSON.stringify` would write it unquoted. */
function hashCanonicalBody(
  out: EscapedTextHash,
  body: string | Uint8Array | undefined,
  isJson: boolean,
): void {
  if (body === undefined) return out.add('none');
  if (body instanceof Uint8Array) return out.add(`bytes:${createHash('sha256').update(body).digest('hex')}`);
  let json = isJson;
  if (!json) {
    try {
      JSON.parse(body);
      json = true;
    } catch {
      json = false;
    }
  }
  if (!json) {
    out.add('text:');
    return out.add(body);
  }
  out.add('json:');
  forEachPiece(canonicalJson(body), (piece) => out.add(piece));
}

/**
 * SHA-256 of `JSON.stringify([version, METHOD, href, canonical body, requestFullFields, headers])`,
 * the body written as `none`, `bytes:<sha256>`, `text:<text>` or `json:<canonical JSON>`. The
 * material is hashed in parts, byte for byte the same as that one string.
 */
export function requestFingerprint(req: FingerprintInput): string {
  const headers = Object.keys(req.headers)
    .sort()
    .map((name) => [name, req.headers[name]!]);
  const hash = createHash('sha256');
  const head = JSON.stringify(['vlt-approval-fingerprint-v2', req.method.toUpperCase(), req.href]);
  hash.update(`${head.slice(0, -1)},"`);
  const body = new EscapedTextHash(hash);
  hashCanonicalBody(body, req.body, req.bodyIsJson === true);
  body.flush();
  hash.update(`",${JSON.stringify(req.requestFullFields)},${JSON.stringify(headers)}]`);
  return hash.digest('hex');
}
