/**
 * JSON batching (Microsoft Graph `$batch`, the `suite_b` provider): one request that carries up
 * to 20 others in its body. Every step that matches paths would see `POST /v1.0/$batch` alone,
 * so an allowlisted batch endpoint would carry any operation past the allowlist, the request
 * rules and the response rules. The pipeline therefore reads a batch's operations here and
 * judges each as a request of its own (ADR 0101).
 *
 * Strict, as the provider constraints are: an operation that cannot be read exactly as the
 * provider will read it (no method or url, an absolute url, a batch inside the batch, a header
 * the gateway refuses on a request of its own) refuses the whole batch. So does a Google batch
 * (`suite_a`), whose operations are HTTP requests in a multipart body this does not read.
 */
import type { HttpMethod } from '@vlt/contracts';
import { HttpMethod as HttpMethodSchema } from '@vlt/contracts';
import type { InspectedBody } from './provider-constraints.js';
import { sanitizeRequestHeaders } from './request-headers.js';
import type { CanonicalTarget } from './url-canonicalizer.js';
import { canonicalizeTarget } from './url-canonicalizer.js';

/**
 * A Graph batch endpoint, as rules match paths: `/v1.0/$batch`, `/beta/$batch`. The canonical
 * path keeps `%24` as sent, and Graph may well decode it, so both spellings are a batch.
 */
export const GRAPH_BATCH_PATH = /\/(?:\$|%24)batch$/i;

/**
 * Google's batch endpoints (`suite_a`): `/batch`, `/batch/gmail/v1`, `/batch/drive/v3`, also
 * under the path of a connection's API URL. No API of the suite has a resource named `batch`.
 */
export const GOOGLE_BATCH_PATH = /\/batch(?:\/|$)/i;

/** Graph's own limit on the requests of one batch. */
export const MAX_BATCH_OPERATIONS = 20;

export interface BatchOperation {
  /** The operation's `id`, as the batch names it (for reasons and the audit). */
  id: string;
  method: HttpMethod;
  target: CanonicalTarget;
  body: InspectedBody;
}

export type BatchReading =
  | { kind: 'not_a_batch' }
  | { kind: 'refused'; reason: string }
  | { kind: 'batch'; operations: BatchOperation[] };

const METHODS: ReadonlySet<string> = new Set(HttpMethodSchema.options);
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;
/** An `id` shown in reasons and audit rows as it is; any other is named by its position. */
const SHOWN_ID = /^[\x21-\x7e]{1,64}$/;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Whether a request to `matchPath` on a connection of `provider` is a batch. */
export function isBatchRequest(provider: string, matchPath: string): boolean {
  if (provider === 'suite_a') return GOOGLE_BATCH_PATH.test(matchPath);
  return provider === 'suite_b' && GRAPH_BATCH_PATH.test(matchPath);
}

/**
 * The operations of a batch request, or why they cannot be judged. `target` is the batch's own
 * canonical target and `body` its body as the pipeline read it (strict JSON for a batch).
 */
export function readBatch(provider: string, target: CanonicalTarget, body: InspectedBody): BatchReading {
  if (!isBatchRequest(provider, target.matchPath)) return { kind: 'not_a_batch' };
  const refuse = (reason: string): BatchReading => ({ kind: 'refused', reason });
  if (provider === 'suite_a') {
    return refuse('a Google batch is not judged operation by operation: send each request on its own');
  }
  const requests = body.kind === 'json' && isPlainObject(body.value) ? body.value.requests : undefined;
  if (!Array.isArray(requests)) return refuse('a batch must be a JSON object with a requests array');
  if (requests.length > MAX_BATCH_OPERATIONS) {
    return refuse(`a batch holds at most ${MAX_BATCH_OPERATIONS} requests`);
  }
  // Operations are relative to the version root the batch was sent to (`/v1.0`, `/beta`).
  const root = `${target.url.origin}${target.matchPath.slice(0, target.matchPath.lastIndexOf('/'))}`;
  const operations: BatchOperation[] = [];
  for (const [index, r] of requests.entries()) {
    if (!isPlainObject(r)) return refuse(`batch request ${index + 1} is not an object`);
    // Never a NUL or a lone surrogate into a reason: the audit row that stores it would fail.
    const id = typeof r.id === 'string' && SHOWN_ID.test(r.id) ? r.id : `#${index + 1}`;
    const fail = (why: string) => refuse(`batch request ${id}: ${why}`);
    const method = typeof r.method === 'string' ? r.method.toUpperCase() : '';
    if (!METHODS.has(method)) return fail('method must be one of GET, POST, PUT, DELETE, PATCH');
    if (typeof r.url !== 'string' || r.url === '') return fail('url is required');
    // Relative only: an absolute URL would be judged for one host and maybe sent to another.
    if (SCHEME.test(r.url) || r.url.startsWith('//') || r.url.includes('\\')) {
      return fail('url must be relative to the batch');
    }
    const sub = canonicalizeTarget(`${root}/${r.url.replace(/^\/+/, '')}`);
    if (!sub.ok) return fail(`url refused: ${sub.reason}`);
    if (sub.host !== target.host || sub.port !== target.port) return fail('url must stay on the batch host');
    if (GRAPH_BATCH_PATH.test(sub.matchPath)) return fail('a batch cannot hold another batch');
    if (r.headers !== undefined) {
      if (!isPlainObject(r.headers)) return fail('headers must be an object');
      const headers = sanitizeRequestHeaders(r.headers);
      if (!headers.ok) return fail(headers.reason);
    }
    operations.push({ id, method: method as HttpMethod, target: sub, body: operationBody(r.body) });
  }
  return { kind: 'batch', operations };
}

/** An operation's body as a rule reads it: JSON when it is one, else opaque (base64 bytes). */
function operationBody(body: unknown): InspectedBody {
  if (body === undefined || body === null) return { kind: 'none' };
  if (typeof body === 'object') return { kind: 'json', value: body };
  return { kind: 'opaque' };
}
