/**
 * Answering the agent with the provider's response, in one of three shapes — buffered in the
 * envelope, streamed, or downloaded — each through the policy's response rules. A response
 * that a rule applies to but cannot be honoured on is refused (403), never passed (ADR 0038).
 * Each shape ends the call's audit trail with exactly one terminal event.
 */
import {
  chainFilterCores,
  createResponseFilterCore,
  responseFilterability,
  toNodeTransform,
  ResponseFilterEncodingError,
  ResponseFilterLimitError,
  ResponseUnfilterableError,
  type PolicyRuntime,
  type ResponseFilterCore,
  type ResponseRoute,
} from '@vlt/policy-engine';
import { Errors, upstreamAppError, type AppError } from '@vlt/service-kit';
import {
  UpstreamError,
  type UpstreamClient,
  type UpstreamRequest,
  type UpstreamResponse,
  type UpstreamStreamResponse,
} from '@vlt/upstream';
import { pipeline, Transform, type Readable } from 'node:stream';
import type { CallRecorder } from './recorder.js';
import { decodeAndFilter, filterFailureOf, type FilterFailure } from './response-decoding.js';
import type { ResponseFilterPool } from './response-pool.js';
import { upstreamFailure } from './upstream-call.js';

export interface ExecutionResult {
  model: 'B';
  status: number;
  headers: Record<string, string>;
  body: unknown;
  auditId: string;
}

/** A response streamed to the agent as the provider sends it (no envelope). */
export interface StreamedResult {
  streamed: true;
  status: number;
  /** What the agent is sent with the stream. */
  headers: Record<string, string>;
  /**
   * Every header the provider answered with, hop-by-hop ones and cookies dropped and injected
   * credentials scrubbed (the LLM proxy relays them: request ids, rate-limit state).
   */
  providerHeaders: Record<string, string>;
  body: Readable;
}

export interface ResponseContext {
  upstream: UpstreamClient;
  request: UpstreamRequest;
  policy: PolicyRuntime;
  route: ResponseRoute;
  recorder: CallRecorder;
  maxResponseBytes: number;
  /** The compiled policy `policy` was hydrated from, keyed by id and version (for the pool). */
  policySource: { key: string; compiled: unknown };
  /** Where large buffered bodies are filtered; absent: on the request's thread. */
  filterPool?: ResponseFilterPool | undefined;
}

/**
 * A provider call that failed, recorded, as the error the agent gets. A call the agent's
 * hang-up cancelled (`request.signal`, the LLM proxy) is recorded as that, not as the
 * provider's failure.
 */
function providerCallFailed(c: ResponseContext, err: unknown): AppError {
  if (c.request.signal?.aborted) {
    c.recorder.failed('client_closed', { reason: 'the agent hung up before the provider answered' });
    return Errors.clientClosed();
  }
  return upstreamFailure(err, c.recorder);
}

function unfilterable(recorder: CallRecorder, reason: string): AppError {
  const e = Errors.responseUnfilterable(reason);
  return recorder.deny({ status: e.statusCode, reason, code: e.code, metadata: { step: 'response_rules' } });
}

/**
 * Bodies from this size on are decoded, filtered and serialised in the response-filter pool:
 * below it the work takes a few milliseconds, less than handing it over would.
 */
const OFF_THREAD_ABOVE_BYTES = 256 * 1024;

/**
 * An envelope body already serialised (by the response-filter pool): the routes write this
 * JSON text where the body goes instead of serialising a value.
 */
export class RawJsonBody {
  constructor(readonly json: string) {}
}

/** The provider's whole answer, filtered, in the spec's envelope. */
export async function respondBuffered(
  c: ResponseContext,
  started: number,
  already?: UpstreamResponse,
): Promise<ExecutionResult> {
  let res: UpstreamResponse;
  try {
    res = already ?? (await c.upstream.request({ ...c.request, maxResponseBytes: c.maxResponseBytes }));
  } catch (err) {
    throw providerCallFailed(c, err);
  }
  const contentType = res.headers['content-type'];
  const filterability = responseFilterability(contentType, c.policy, c.route);
  if (filterability.kind === 'refuse') throw unfilterable(c.recorder, filterability.reason);
  const dataSize = res.body.length;
  let filtered: unknown;
  if (c.filterPool && dataSize >= OFF_THREAD_ABOVE_BYTES) {
    // Large: decoded, filtered and serialised in the pool; the envelope splices the JSON in.
    const out = await c.filterPool.filter({
      body: res.body,
      contentType,
      policyKey: c.policySource.key,
      compiled: c.policySource.compiled,
      route: c.route,
    });
    if (!out.ok) throw filterRefusal(c.recorder, out);
    filtered = new RawJsonBody(out.json);
  } else {
    try {
      filtered = decodeAndFilter(res.body, contentType, c.policy, c.route);
    } catch (err) {
      throw filterRefusal(c.recorder, filterFailureOf(err));
    }
  }
  const auditId = c.recorder.completed({
    responseStatus: res.status,
    dataSize,
    durationMs: Math.round(performance.now() - started),
  });
  // The body may have changed size after filtering.
  delete res.headers['content-length'];
  return { model: 'B', status: res.status, headers: res.headers, body: filtered, auditId };
}

/** The Model B envelope with an already serialised body, as the response schema would write it. */
export function envelopeJson(r: ExecutionResult & { body: RawJsonBody }): string {
  return `{"model":"B","status":${r.status},"headers":${JSON.stringify(r.headers)},"body":${r.body.json},"auditId":${JSON.stringify(r.auditId)}}`;
}

/** A refusal of the response filter as the error the agent gets (and the audit records). */
function filterRefusal(recorder: CallRecorder, failure: FilterFailure): AppError {
  if (failure.error === 'unfilterable') return unfilterable(recorder, failure.message);
  return upstreamFailure(new UpstreamError('bad_response', failure.message), recorder);
}

/**
 * `stream: true` / `download: true`: the provider's body as it arrives, filtered per SSE event,
 * NDJSON line or text chunk. A non-2xx answer is returned buffered in the envelope (spec),
 * without asking the provider a second time.
 */
export async function respondStreamed(
  c: ResponseContext,
  started: number,
  download: boolean,
  /** One more stage before the filter for a 2xx stream (`ExecuteOptions.streamStage`). */
  extraStage?: (contentType: string | undefined) => ResponseFilterCore | null,
): Promise<ExecutionResult | StreamedResult> {
  let streamed: UpstreamStreamResponse;
  try {
    streamed = await c.upstream.stream(c.request);
  } catch (err) {
    throw providerCallFailed(c, err);
  }
  if (streamed.status < 200 || streamed.status >= 300) {
    let body: Buffer;
    try {
      body = await readCapped(streamed.body, c.maxResponseBytes);
    } catch (err) {
      throw providerCallFailed(c, err);
    }
    return respondBuffered(c, started, { status: streamed.status, headers: streamed.headers, body });
  }
  const contentType = streamed.headers['content-type'];
  const filterability = responseFilterability(contentType, c.policy, c.route);
  if (filterability.kind === 'refuse') {
    streamed.body.on('error', () => undefined);
    streamed.body.destroy();
    throw unfilterable(c.recorder, filterability.reason);
  }
  const filter =
    filterability.kind === 'pass' ? null : createResponseFilterCore(contentType, c.policy, c.route);
  const extra = extraStage?.(contentType) ?? null;
  // The LLM delta stage reads the provider's own text, before the filter rewrites any of it
  // (llm-stream-redaction.ts says why).
  const result = pipeToAgent(
    c,
    streamed,
    started,
    download,
    filter && extra ? chainFilterCores(extra, filter) : (filter ?? extra),
  );
  // Status and headers go out with the first byte: a provider body that fails before it
  // (a broken encoding, an unfilterable first event, a deadline) is still answered with a
  // typed JSON error instead of a 2xx head followed by a cut connection.
  await firstByteOrEnd(result.body).catch((err: Error) => {
    throw agentError(err);
  });
  return result;
}

/** Resolves once `stream` has data buffered or has ended; rejects with its error. */
function firstByteOrEnd(stream: Readable): Promise<void> {
  if (stream.readableLength > 0 || stream.readableEnded) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const cleanup = () => {
      stream.off('readable', onReadable);
      stream.off('error', onError);
    };
    // 'readable' fires for the first chunk and for end-of-stream alike.
    const onReadable = () => {
      cleanup();
      resolve();
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    stream.on('readable', onReadable);
    stream.once('error', onError);
  });
}

/** What the agent is answered when a stream fails before its first byte was sent. */
function agentError(err: Error): AppError {
  if (err instanceof ResponseUnfilterableError) return Errors.responseUnfilterable(err.message);
  if (err instanceof UpstreamError) return upstreamAppError(err);
  return Errors.upstreamBadResponse();
}

/** Why a stream that had started ended early, for its terminal audit event. */
function streamErrorKind(err: Error): string {
  if (err instanceof UpstreamError) return err.kind;
  if (err instanceof ResponseUnfilterableError) return 'response_unfilterable';
  if (err instanceof ResponseFilterLimitError || err instanceof ResponseFilterEncodingError)
    return 'filter_limit';
  return 'stream_interrupted';
}

/**
 * Pipes the provider's body to the agent through the filter, counting bytes against
 * maxResponseSizeBytes, and records the terminal event when the stream ends, fails or the
 * agent hangs up.
 */
function pipeToAgent(
  c: ResponseContext,
  upstream: UpstreamStreamResponse,
  started: number,
  download: boolean,
  /** What the response rules (and any extra stage after them) do to the body; null: nothing. */
  filter: ResponseFilterCore | null,
): StreamedResult {
  let bytes = 0;
  const settle = (action: 'execution_completed' | 'execution_error', metadata: Record<string, unknown>) =>
    c.recorder.terminal(action, {
      stream: true,
      responseStatus: upstream.status,
      dataSize: bytes,
      durationMs: Math.round(performance.now() - started),
      ...metadata,
    });
  const count = (chunk: Uint8Array) => {
    bytes += chunk.length;
    if (bytes > c.maxResponseBytes) {
      throw new UpstreamError('too_large', 'provider response exceeds the size limit');
    }
  };
  // One stream stage for the whole response: the filters run inside it, after the count.
  const stage = filter
    ? toNodeTransform(filter, count)
    : new Transform({
        transform(chunk: Buffer, _enc, cb) {
          try {
            count(chunk);
          } catch (err) {
            cb(err as Error);
            return;
          }
          cb(null, chunk);
        },
      });
  const source = upstream.body;
  // Destroying the provider body after the pipeline settled (size limit, agent gone) makes
  // undici emit an abort error with no listener left: absorb it, the outcome is recorded.
  source.on('error', () => undefined);
  // Registered before the pipeline's listener, so it runs first: a close that neither the
  // pipeline's end nor an error explains is the agent hanging up (Fastify destroys the body it
  // was sending without an error). Stop reading from the provider.
  stage.on('close', () => {
    if (c.recorder.settled || stage.errored) return;
    source.destroy();
    settle('execution_error', { error: 'client_closed' });
  });
  // One pipeline and one stage, which is also what the agent is sent: each further stage or
  // pipeline() costs a stream's worth of listeners and state for as long as the call is open
  // (bench/llm-proxy.ts memory per stream).
  pipeline(source, stage, (err) => {
    if (!err) return void settle('execution_completed', {});
    // Cancelled with the agent's hang-up before its first byte was sent (the LLM proxy).
    settle('execution_error', { error: c.request.signal?.aborted ? 'client_closed' : streamErrorKind(err) });
  });
  const headers: Record<string, string> = {};
  for (const name of ['content-type', 'content-disposition', 'content-language', 'etag', 'last-modified']) {
    const v = upstream.headers[name];
    if (v) headers[name] = v;
  }
  if (download && !filter && upstream.headers['content-length'])
    headers['content-length'] = upstream.headers['content-length'];
  headers['cache-control'] = 'no-cache';
  // Proxies in front of us must not hold back a live event stream.
  headers['x-accel-buffering'] = 'no';
  // A stream's terminal event is written when it ends; the agent correlates it by the call's
  // execution_requested event, which every later event of the call names (requestAuditId).
  headers['x-vlt-audit-id'] = c.recorder.requestAuditId;
  return { streamed: true, status: upstream.status, headers, providerHeaders: upstream.headers, body: stage };
}

async function readCapped(body: Readable, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > max) {
      body.destroy();
      throw new UpstreamError('too_large', 'provider response exceeds the size limit');
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
