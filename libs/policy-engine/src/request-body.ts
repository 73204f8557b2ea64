/**
 * How the pipeline reads a Model B body and what it sends.
 *
 * - absent, null or '' : no body;
 * - a JSON value (object, array, number, boolean): serialised once with JSON.stringify; rules
 *   see exactly the value that serialisation produces, and that text is what is sent;
 * - a string that parses as JSON: rules see the parsed value and the string is sent unchanged.
 *   A string with a duplicated object key is refused (400): parsers disagree on which copy
 *   wins, so the value judged could differ from the value executed;
 * - a string that is an urlencoded form (by the request's content type): only provider
 *   constraints read it; body matchers do not;
 * - any other string: opaque; body matchers never match it and provider constraints that need
 *   ids refuse it;
 * - bytes (a Uint8Array), as `multipart/form-data` or `application/octet-stream` only: opaque
 *   as above, sent as they are. The LLM proxy passes uploads this way: a form already rewritten
 *   into one canonical form, or a chunk of a resumable upload (ADR 0095).
 */
import type { InspectedBody } from './provider-constraints.js';
import { jsonBoundsViolation, REQUEST_JSON_BOUNDS } from './json-bounds.js';
import { findDuplicateKey } from './json-util.js';

export type PreparedBody =
  | { ok: true; inspected: InspectedBody; payload: string | Uint8Array | undefined; size: number }
  | { ok: false; reason: string };

const JSON_START = /^[\s]*[[{"\-0-9tfn]/;

function formValue(text: string): Record<string, string[]> {
  const out: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  for (const [k, v] of new URLSearchParams(text)) (out[k] ??= []).push(v);
  return out;
}

// What a lenient reader may still take for JSON: an object or array after any Unicode
// whitespace or byte-order mark.
const LOOKS_STRUCTURED = /^[\s\uFEFF]*[[{]/;

function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

function isJsonMediaType(mime: string): boolean {
  return mime === 'application/json' || mime.endsWith('+json');
}

/**
 * @param strict The policy reads the body (request-rule body matchers or provider constraints):
 * a body sent as JSON must then be strict RFC 8259 JSON. A provider's lenient parser would read
 * a BOM, comments, single quotes or a trailing document that the rules never saw.
 */
export function prepareRequestBody(
  body: unknown,
  contentType: string | undefined,
  strict = false,
): PreparedBody {
  if (body === undefined || body === null || body === '') {
    return { ok: true, inspected: { kind: 'none' }, payload: undefined, size: 0 };
  }
  if (body instanceof Uint8Array) {
    // Bytes are no JSON text: a JSON content type on them would be read by the provider as a
    // document the policy never judged.
    const mime = mediaType(contentType);
    if (mime !== 'multipart/form-data' && mime !== 'application/octet-stream') {
      return { ok: false, reason: 'a body of bytes must be multipart/form-data or application/octet-stream' };
    }
    return { ok: true, inspected: { kind: 'opaque' }, payload: body, size: body.byteLength };
  }
  if (typeof body === 'string') {
    const size = Buffer.byteLength(body, 'utf8');
    if (JSON_START.test(body)) {
      // A string body is parsed here, not by the HTTP layer: bound it before parsing too.
      const violation = jsonBoundsViolation(body, REQUEST_JSON_BOUNDS);
      if (violation !== null) return { ok: false, reason: `body: ${violation}` };
      let value: unknown;
      let parsed = false;
      try {
        value = JSON.parse(body);
        parsed = true;
      } catch {
        parsed = false;
      }
      if (parsed) {
        const dup = findDuplicateKey(body);
        if (dup !== null) return { ok: false, reason: `JSON body repeats the key "${dup}"` };
        return { ok: true, inspected: { kind: 'json', value }, payload: body, size };
      }
    }
    const mime = mediaType(contentType);
    if (
      strict &&
      (isJsonMediaType(mime) || (mime !== 'application/x-www-form-urlencoded' && LOOKS_STRUCTURED.test(body)))
    ) {
      return {
        ok: false,
        reason: 'body is sent as JSON but is not strict JSON (RFC 8259); the policy reads it',
      };
    }
    if (mime === 'application/x-www-form-urlencoded') {
      return { ok: true, inspected: { kind: 'form', value: formValue(body) }, payload: body, size };
    }
    return { ok: true, inspected: { kind: 'opaque' }, payload: body, size };
  }
  if (typeof body === 'object' || typeof body === 'number' || typeof body === 'boolean') {
    const payload = JSON.stringify(body);
    if (payload === undefined) return { ok: false, reason: 'body is not a JSON value' };
    return {
      ok: true,
      // The envelope's body came out of a JSON parser, so it is already exactly what `payload`
      // says (up to -0, which no rule can tell from 0): judging it spares a second parse, which
      // for a 100,000-member body cost more than everything else the pipeline does.
      inspected: { kind: 'json', value: body },
      payload,
      size: Buffer.byteLength(payload, 'utf8'),
    };
  }
  return { ok: false, reason: 'body must be a JSON value or a string' };
}
