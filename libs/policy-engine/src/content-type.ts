/**
 * Which filter a response body gets, decided by its media type, and how its bytes become text.
 *
 * A missing content type is treated as text: with response rules configured, redacting an
 * unlabelled body is safer than passing it through unread. Charsets: UTF-8 (the default and
 * the only one JSON allows) is decoded as such; single-byte ASCII-compatible charsets (ISO-8859
 * family, windows-125x) are processed byte for byte, which keeps them intact since every
 * detector works on ASCII; any other charset (UTF-16...) cannot be inspected and fails closed.
 */
import { ResponseFilterEncodingError } from './errors.js';

export type BodyKind = 'sse' | 'ndjson' | 'json' | 'text' | 'binary';

const NDJSON_TYPES = new Set([
  'application/x-ndjson',
  'application/ndjson',
  'application/jsonl',
  // Anthropic's message batch results.
  'application/x-jsonl',
  'application/x-jsonlines',
  'application/jsonlines',
]);
const JSON_TYPES = new Set(['application/json', 'text/json']);
const TEXT_LIKE = new Set([
  'application/xml',
  'application/javascript',
  'application/ecmascript',
  'application/x-www-form-urlencoded',
  'application/graphql',
  'application/yaml',
  'application/x-yaml',
]);

export interface MediaType {
  kind: BodyKind;
  charset: string | null;
}

export function classifyContentType(contentType: string | null | undefined): MediaType {
  if (!contentType || contentType.trim() === '') return { kind: 'text', charset: null };
  const [rawMime, ...params] = contentType.split(';');
  const mime = rawMime!.trim().toLowerCase();
  let charset: string | null = null;
  for (const p of params) {
    const eq = p.indexOf('=');
    if (eq !== -1 && p.slice(0, eq).trim().toLowerCase() === 'charset') {
      charset = p
        .slice(eq + 1)
        .trim()
        .replace(/^"|"$/g, '')
        .toLowerCase();
    }
  }
  let kind: BodyKind;
  if (mime === 'text/event-stream') kind = 'sse';
  else if (NDJSON_TYPES.has(mime)) kind = 'ndjson';
  else if (JSON_TYPES.has(mime) || mime.endsWith('+json')) kind = 'json';
  else if (mime.startsWith('text/') || TEXT_LIKE.has(mime) || mime.endsWith('+xml')) kind = 'text';
  else kind = 'binary';
  return { kind, charset };
}

export interface StreamDecoder {
  decode(chunk: Uint8Array): string;
  end(): string;
}

export interface TextCodec {
  /**
   * True when every byte < 0x80 decodes to that same character (in order) and every run of
   * bytes >= 0x80 to one or more characters >= U+0080. The stream filters' raw fast path
   * (raw-json.ts) reads structure from bytes only for such codecs.
   */
  readonly asciiTransparent?: boolean;
  decode(bytes: Uint8Array): string;
  encode(text: string): Uint8Array;
  streamDecoder(): StreamDecoder;
}

const utf8Encoder = new TextEncoder();
// Non-streaming decode keeps no state between calls, so one instance serves every body.
const utf8Decoder = new TextDecoder('utf-8', { ignoreBOM: true });

export const UTF8_CODEC: TextCodec = {
  // The WHATWG decoder re-reads an ASCII byte that interrupts a sequence and emits U+FFFD for
  // the broken sequence, so ASCII bytes always come through as themselves.
  asciiTransparent: true,
  // ignoreBOM keeps a leading BOM in the text, so a re-encoded body keeps it too.
  decode: (bytes) => utf8Decoder.decode(bytes),
  encode: (text) => utf8Encoder.encode(text),
  streamDecoder: () => {
    const d = new TextDecoder('utf-8', { ignoreBOM: true });
    return { decode: (chunk) => d.decode(chunk, { stream: true }), end: () => d.decode() };
  },
};

function latin1Decode(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}

const BYTEWISE: TextCodec = {
  asciiTransparent: true,
  decode: latin1Decode,
  // Replacement texts may hold characters the charset lacks; those become "?".
  encode: (text) => new Uint8Array(Buffer.from(text.replace(/[\u0100-\uffff]/g, '?'), 'latin1')),
  streamDecoder: () => ({ decode: latin1Decode, end: () => '' }),
};

const UTF8_NAMES = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii']);

export function codecFor(charset: string | null): TextCodec {
  if (charset === null || UTF8_NAMES.has(charset)) return UTF8_CODEC;
  if (/^(iso-?8859-[0-9]+|latin-?1|l1|windows-125[0-8]|cp125[0-8])$/.test(charset)) return BYTEWISE;
  throw new ResponseFilterEncodingError(`cannot filter a response in charset "${charset}"`);
}
