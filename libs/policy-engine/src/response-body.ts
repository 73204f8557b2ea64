/**
 * Public entry points for response filtering: buffered bodies and streams. Both use the same
 * filter cores, so a body filtered whole equals the same body filtered while streaming.
 */
import type { Transform } from 'node:stream';
import type { PolicyRuntime } from './compile.js';
import { planResponse } from './compile.js';
import { UTF8_CODEC, classifyContentType } from './content-type.js';
import type { ResponseRoute } from './response-filter.js';
import { filterJsonValue } from './response-filter.js';
import type { StreamFilterLimits } from './stream-filters.js';
import { createFilterCore, runFilterCore, toNodeTransform, toWebTransform } from './stream-filters.js';

export type { ResponseRoute };

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
    if (media.kind === 'binary') return body;
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
