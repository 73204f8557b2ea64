/**
 * Public entry points for response filtering: buffered bodies and streams. Both use the same
 * filter cores, so a body filtered whole equals the same body filtered while streaming.
 */
import type { Transform } from 'node:stream';
import type { PolicyRuntime } from './compile.js';
import { planResponse } from './compile.js';
import { UTF8_CODEC, classifyContentType, codecFor } from './content-type.js';
import { ResponseFilterEncodingError, ResponseUnfilterableError } from './errors.js';
import type { ResponseRoute } from './response-filter.js';
import { filterJsonValue, planNeedsStructure } from './response-filter.js';
import type { ResponseFilterCore, StreamFilterLimits } from './stream-filters.js';
import { createFilterCore, runFilterCore, toNodeTransform, toWebTransform } from './stream-filters.js';

export type { ResponseRoute };

/**
 * What the response rules that apply to one response can do with its media type:
 * - `pass`: no rule applies to this route; the bytes pass as they are.
 * - `filter`: every applicable rule can be honoured for this media type.
 * - `refuse`: a rule applies that this media type cannot honour. The caller must refuse the
 *   response (never pass it unfiltered). Field rules (`allowFields`, `denyFields`) and provider
 *   inbound filters need JSON structure: JSON, NDJSON or SSE. Redaction needs text: those plus
 *   text/*, XML, HTML, CSV and the other text-like types. Binary types (octet-stream, images,
 *   multipart, PDF, unknown types) and charsets the filters cannot decode honour neither.
 */
export type ResponseFilterability =
  { kind: 'pass' } | { kind: 'filter' } | { kind: 'refuse'; reason: string };

export function responseFilterability(
  contentType: string | null | undefined,
  policy: PolicyRuntime,
  route: ResponseRoute,
): ResponseFilterability {
  const plan = planResponse(policy, route);
  if (!plan) return { kind: 'pass' };
  const media = classifyContentType(contentType);
  const mime = (contentType ?? '').split(';')[0]!.trim().toLowerCase() || 'an unlabelled body';
  if (media.kind === 'binary') {
    return { kind: 'refuse', reason: `response rules apply, and ${mime} responses cannot be filtered` };
  }
  try {
    codecFor(media.charset);
  } catch (err) {
    if (!(err instanceof ResponseFilterEncodingError)) throw err;
    return {
      kind: 'refuse',
      reason: `response rules apply, and the ${media.charset} charset cannot be filtered`,
    };
  }
  if (planNeedsStructure(plan) && media.kind === 'text') {
    const what = plan.contacts ? 'contact fields must be stripped' : 'field rules apply';
    return { kind: 'refuse', reason: `${what}, and ${mime} responses have no JSON fields to filter` };
  }
  return { kind: 'filter' };
}

/**
 * Filters a buffered response body. The result has the same form as the input: a parsed JSON
 * value stays parsed, a string stays a string, bytes stay bytes. Bodies no rule applies to, and
 * binary media types, are returned as they are.
 */
export function filterResponseBody(
  body: unknown,
  contentType: string | null | undefined,
  policy: PolicyRuntime,
  route: ResponseRoute,
  limits: Partial<StreamFilterLimits> = {},
): unknown {
  const plan = planResponse(policy, route);
  if (!plan || body === undefined) return body;
  if (body instanceof Uint8Array) {
    const core = createFilterCore(contentType, plan, limits);
    return core ? runFilterCore(core, body) : body;
  }
  if (typeof body === 'string') {
    const media = classifyContentType(contentType);
    if (media.kind === 'binary') {
      if (plan.contacts) throw new ResponseUnfilterableError('contact responses must be JSON to be filtered');
      return body;
    }
    // A string was decoded by the caller; run it through the byte cores as UTF-8 so buffered
    // and streamed results come from the same code.
    const core = createFilterCore(contentType, plan, limits, UTF8_CODEC);
    if (!core) return body;
    const bytes = new TextEncoder().encode(body);
    const out = runFilterCore(core, bytes);
    return out === bytes ? body : new TextDecoder('utf-8', { ignoreBOM: true }).decode(out);
  }
  return filterJsonValue(body, plan);
}

/** A Web TransformStream filtering the response, or null to pass the bytes through untouched. */
export function createResponseFilterStream(
  contentType: string | null | undefined,
  policy: PolicyRuntime,
  route: ResponseRoute,
  limits: Partial<StreamFilterLimits> = {},
): TransformStream<Uint8Array, Uint8Array> | null {
  const core = createFilterCore(contentType, planResponse(policy, route), limits);
  return core ? toWebTransform(core) : null;
}

/** The synchronous filter itself, or null to pass the bytes through untouched. */
export function createResponseFilterCore(
  contentType: string | null | undefined,
  policy: PolicyRuntime,
  route: ResponseRoute,
  limits: Partial<StreamFilterLimits> = {},
): ResponseFilterCore | null {
  return createFilterCore(contentType, planResponse(policy, route), limits);
}

/** The same filter as a Node Transform, or null to pass the bytes through untouched. */
export function createResponseFilterNodeStream(
  contentType: string | null | undefined,
  policy: PolicyRuntime,
  route: ResponseRoute,
  limits: Partial<StreamFilterLimits> = {},
  options: NodeFilterOptions = {},
): Transform | null {
  const core = createFilterCore(contentType, planResponse(policy, route), limits);
  return core ? toNodeTransform(core, options.beforeChunk) : null;
}

export interface NodeFilterOptions {
  /**
   * Sees every input chunk before it is filtered; throwing fails the stream with that error.
   * Lets a caller count or cap the provider's bytes without a stream stage of its own.
   */
  beforeChunk?: (chunk: Uint8Array) => void;
}
