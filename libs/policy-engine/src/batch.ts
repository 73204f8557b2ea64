/**
 * Batches: one request that carries others in its body. Every step that matches paths would see
 * the batch's own path alone, so an allowlisted batch endpoint would carry any operation past
 * the allowlist, the request rules and the response rules. The pipeline therefore reads a
 * batch's operations here and judges each as a request of its own (ADR 0101):
 *
 * - Microsoft Graph `$batch` (`suite_b`): up to 20 HTTP requests as JSON, answered together;
 * - the message batches of `llm_a` (`POST /v1/messages/batches`): each request's `params` is a
 *   `POST /v1/messages` body, answered later at the batch's results;
 * - the inline batches of `llm_c` (`POST /v1beta/models/<m>:batchGenerateContent` and
 *   `:asyncBatchEmbedContent`): each `request` is a `:generateContent` (`:embedContent`) body.
 *
 * Strict, as the provider constraints are: an operation that cannot be read exactly as the
 * provider will read it refuses the whole batch. So does a batch whose operations are not in
 * its body at all: a Google batch (`suite_a`, HTTP requests in a multipart body), a file of
 * requests (`llm_b` and `llm_d` batch jobs, a `llm_c` batch read from a file).
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

/**
 * A second lock: Anthropic takes 100,000, but the bounds on a JSON body (25,000 keys) stop a
 * real batch first, at about 3,500 calls.
 */
export const MAX_LLM_BATCH_OPERATIONS = 10_000;

/** `llm_a` message batches: `POST /v1/messages/batches` (also under an API URL's path). */
const ANTHROPIC_BATCH_PATH = /^(.*\/v1\/messages)\/batches$/i;
/** `llm_c` inline batches: `/<version>/<collection>/<model>:batchGenerateContent`. */
const GEMINI_BATCH_PATH =
  /^(.*\/v1[a-z0-9]*)\/([^/]+)\/([^/]+?)(?::|%3a)(batchGenerateContent|asyncBatchEmbedContent)$/i;
/** Batch jobs that read their requests from an uploaded file: `llm_b`, `llm_d`. */
const FILE_BATCH_PATH: ReadonlyMap<string, RegExp> = new Map([
  ['llm_b', /\/v1\/batches$/i],
  ['llm_d', /\/v1\/batch\/jobs$/i],
]);

export interface BatchOperation {
  /** The operation's `id` (`custom_id`), as the batch names it, or its position (`#3`). */
  id: string;
  method: HttpMethod;
  /** Shared by the operations of one batch where they all go to one path (LLM batches). */
  target: CanonicalTarget;
  body: InspectedBody;
}

export type BatchReading =
  | { kind: 'not_a_batch' }
  | { kind: 'refused'; reason: string }
  | {
      kind: 'batch';
      operations: BatchOperation[];
      /**
       * Where the operations' answers come back, as response rules match it: the batch's own
       * answer (Graph), or the route of its results (LLM batches, read later with an id that
       * stands in for the one the provider will give).
       */
      answersAt: { method: HttpMethod; path: string };
    };

const METHODS: ReadonlySet<string> = new Set(HttpMethodSchema.options);
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;
/** An `id` shown in reasons and audit rows as it is; any other is named by its position. */
const SHOWN_ID = /^[\x21-\x7e]{1,64}$/;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const refuse = (reason: string): BatchReading => ({ kind: 'refused', reason });

/** Whether a `method` request to `matchPath` on a connection of `provider` is a batch. */
export function isBatchRequest(provider: string, method: string, matchPath: string): boolean {
  switch (provider) {
    case 'suite_a':
      return GOOGLE_BATCH_PATH.test(matchPath);
    case 'suite_b':
      return GRAPH_BATCH_PATH.test(matchPath);
    case 'llm_a':
      return method === 'POST' && ANTHROPIC_BATCH_PATH.test(matchPath);
    case 'llm_c':
      return method === 'POST' && GEMINI_BATCH_PATH.test(matchPath);
    default: {
      const file = FILE_BATCH_PATH.get(provider);
      return method === 'POST' && file !== undefined && file.test(matchPath);
    }
  }
}

/**
 * The operations of a batch request, or why they cannot be judged. `target` is the batch's own
 * canonical target and `body` its body as the pipeline read it (strict JSON for a batch).
 */
export function readBatch(
  provider: string,
  method: string,
  target: CanonicalTarget,
  body: InspectedBody,
): BatchReading {
  if (!isBatchRequest(provider, method, target.matchPath)) return { kind: 'not_a_batch' };
  switch (provider) {
    case 'suite_a':
      return refuse('a Google batch is not judged operation by operation: send each request on its own');
    case 'suite_b':
      return readGraphBatch(method, target, body);
    case 'llm_a':
      return readMessageBatch(target, body);
    case 'llm_c':
      return readGeminiBatch(target, body);
    default:
      return refuse(
        'a batch of requests read from a file is not judged request by request: send each request on its own',
      );
  }
}

function readGraphBatch(method: string, target: CanonicalTarget, body: InspectedBody): BatchReading {
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
    const id = shownId(r.id, index);
    const fail = (why: string) => refuse(`batch request ${id}: ${why}`);
    const opMethod = typeof r.method === 'string' ? r.method.toUpperCase() : '';
    if (!METHODS.has(opMethod)) return fail('method must be one of GET, POST, PUT, DELETE, PATCH');
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
    operations.push({ id, method: opMethod as HttpMethod, target: sub, body: graphOperationBody(r.body) });
  }
  return { kind: 'batch', operations, answersAt: { method: method as HttpMethod, path: target.matchPath } };
}

/**
 * `llm_a`: `{ requests: [{ custom_id, params }] }`, each `params` the body of a
 * `POST /v1/messages`. The answers come back at `/v1/messages/batches/<id>/results`.
 */
function readMessageBatch(target: CanonicalTarget, body: InspectedBody): BatchReading {
  const messages = ANTHROPIC_BATCH_PATH.exec(target.matchPath)![1]!;
  const requests = body.kind === 'json' && isPlainObject(body.value) ? body.value.requests : undefined;
  if (!Array.isArray(requests)) return refuse('a batch must be a JSON object with a requests array');
  const tooMany = countRefusal(requests.length);
  if (tooMany) return tooMany;
  const sub = sameOriginTarget(target, messages);
  if (!sub) return refuse('the batch URL cannot be read');
  const operations: BatchOperation[] = [];
  for (const [index, r] of requests.entries()) {
    if (!isPlainObject(r)) return refuse(`batch request ${index + 1} is not an object`);
    const id = shownId(r.custom_id, index);
    if (!isPlainObject(r.params)) return refuse(`batch request ${id}: params must be an object`);
    operations.push({ id, method: 'POST', target: sub, body: { kind: 'json', value: r.params } });
  }
  return {
    kind: 'batch',
    operations,
    answersAt: { method: 'GET', path: `${messages}/batches/msgbatch_0/results` },
  };
}

/**
 * `llm_c`: `{ batch: { inputConfig: { requests: { requests: [{ request, metadata }] } } } }`,
 * each `request` the body of a `:generateContent` (`:embedContent`) call on the batch's model.
 * Proto JSON reads a field in camelCase or snake_case, so both spellings are read, and a field
 * given both ways is refused. The answers come back in the batch, at `/<version>/batches/<id>`.
 */
function readGeminiBatch(target: CanonicalTarget, body: InspectedBody): BatchReading {
  const [, root, collection, model, verb] = GEMINI_BATCH_PATH.exec(target.matchPath)!;
  const single = /embed/i.test(verb!) ? 'embedContent' : 'generateContent';
  try {
    const batch = field(body.kind === 'json' ? body.value : undefined, 'batch', 'batch');
    const input = field(batch, 'inputConfig', 'input_config');
    if (field(input, 'fileName', 'file_name') !== undefined) {
      return refuse('a batch read from a file is not judged request by request: send its requests inline');
    }
    const requests = field(field(input, 'requests', 'requests'), 'requests', 'requests');
    if (!Array.isArray(requests)) return refuse('a batch must hold its requests inline');
    const tooMany = countRefusal(requests.length);
    if (tooMany) return tooMany;
    const sub = sameOriginTarget(target, `${root}/${collection}/${model}:${single}`);
    if (!sub) return refuse('the batch URL cannot be read');
    const name = decodePathSegment(`${collection}/${model}`);
    const operations: BatchOperation[] = [];
    for (const [index, item] of requests.entries()) {
      const id = `#${index + 1}`;
      const request = isPlainObject(item) ? field(item, 'request', 'request') : undefined;
      if (!isPlainObject(request)) return refuse(`batch request ${id}: request must be an object`);
      // The model is the batch's; a request naming another would be judged for one model and
      // perhaps run on another.
      const own = request.model;
      if (own !== undefined && own !== name && `${collection}/${String(own)}` !== name) {
        return refuse(`batch request ${id}: model must be the batch’s model`);
      }
      operations.push({ id, method: 'POST', target: sub, body: { kind: 'json', value: request } });
    }
    return { kind: 'batch', operations, answersAt: { method: 'GET', path: `${root}/batches/0` } };
  } catch (err) {
    if (err instanceof AmbiguousField) return refuse(err.message);
    throw err;
  }
}

class AmbiguousField extends Error {}

/** `value[camel]` or `value[snake]`, whichever is given; both given is ambiguous. */
function field(value: unknown, camel: string, snake: string): unknown {
  if (!isPlainObject(value)) return undefined;
  const a = value[camel];
  const b = camel === snake ? undefined : value[snake];
  if (a !== undefined && b !== undefined) {
    throw new AmbiguousField(`a batch names ${camel} twice (as ${camel} and ${snake})`);
  }
  return a ?? b;
}

function countRefusal(count: number): BatchReading | null {
  return count > MAX_LLM_BATCH_OPERATIONS
    ? refuse(`a batch holds at most ${MAX_LLM_BATCH_OPERATIONS} requests here`)
    : null;
}

/** The target of `path` on the batch's origin, or null when it does not canonicalise. */
function sameOriginTarget(target: CanonicalTarget, path: string): CanonicalTarget | null {
  const sub = canonicalizeTarget(`${target.url.origin}${path}`);
  return sub.ok ? sub : null;
}

function decodePathSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** An operation's id as it may be shown; never a NUL or a lone surrogate into an audit row. */
function shownId(id: unknown, index: number): string {
  return typeof id === 'string' && SHOWN_ID.test(id) ? id : `#${index + 1}`;
}

/** A Graph operation's body as a rule reads it: JSON when it is one, else opaque (base64 bytes). */
function graphOperationBody(body: unknown): InspectedBody {
  if (body === undefined || body === null) return { kind: 'none' };
  if (typeof body === 'object') return { kind: 'json', value: body };
  return { kind: 'opaque' };
}
