/**
 * A buffered provider answer turned into the envelope's `body` and filtered: the same code runs
 * in the request's thread for small bodies and in the response-filter pool for large ones
 * (response-pool.ts), so both give the same result.
 */
import {
  classifyContentType,
  filterResponseBody,
  jsonBoundsViolation,
  MAX_JSON_DEPTH,
  ResponseFilterEncodingError,
  ResponseFilterLimitError,
  ResponseUnfilterableError,
  type PolicyRuntime,
  type ResponseRoute,
} from '@vlt/policy-engine';

const RESPONSE_ENVELOPE_BOUNDS = { maxDepth: MAX_JSON_DEPTH, maxMembers: Number.POSITIVE_INFINITY };

/**
 * The provider's text in its declared charset (WHATWG labels: utf-16le, iso-8859-1, ...);
 * UTF-8 when none is declared or the label is unknown.
 */
function decodeText(buf: Uint8Array, charset: string | null): string {
  if (charset && charset !== 'utf-8' && charset !== 'utf8') {
    try {
      return new TextDecoder(charset).decode(buf);
    } catch {
      // An unknown label: read it as UTF-8, as when none is given.
    }
  }
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString('utf8');
}

/** Whether the envelope carries a body of this type as base64: anything not JSON or text. */
export function carriedAsBase64(contentType: string | undefined): boolean {
  const ct = (contentType ?? '').toLowerCase();
  return !(
    ct.includes('json') ||
    ct.startsWith('text/') ||
    ct.includes('xml') ||
    ct.includes('x-www-form-urlencoded') ||
    ct === ''
  );
}

/** The envelope body: JSON parsed, text as text, anything else base64. */
export function decodeBody(buf: Uint8Array, contentType: string | undefined): unknown {
  if (buf.length === 0) return null;
  const ct = (contentType ?? '').toLowerCase();
  const { charset } = classifyContentType(contentType);
  if (ct.includes('json')) {
    const text = decodeText(buf, charset);
    // Deeper than the filters and the envelope's serialiser can walk: relayed as text.
    if (jsonBoundsViolation(text, RESPONSE_ENVELOPE_BOUNDS) !== null) return text;
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  if (!carriedAsBase64(contentType)) return decodeText(buf, charset);
  // Binary content inside a JSON envelope: base64 (use `download: true` for raw bytes).
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString('base64');
}

/** Why a body could not be filtered, as plain data (it crosses a thread boundary). */
export type FilterFailure = { error: 'unfilterable' | 'limit' | 'encoding'; message: string };

/** The filter's refusals as data; anything else is a bug and is rethrown. */
export function filterFailureOf(err: unknown): FilterFailure {
  if (err instanceof ResponseUnfilterableError) return { error: 'unfilterable', message: err.message };
  if (err instanceof ResponseFilterLimitError) return { error: 'limit', message: err.message };
  if (err instanceof ResponseFilterEncodingError) return { error: 'encoding', message: err.message };
  throw err;
}

/** Decoded and filtered: the value the envelope carries as `body`. */
export function decodeAndFilter(
  buf: Uint8Array,
  contentType: string | undefined,
  policy: PolicyRuntime,
  route: ResponseRoute,
): unknown {
  return filterResponseBody(decodeBody(buf, contentType), contentType ?? '', policy, route);
}
