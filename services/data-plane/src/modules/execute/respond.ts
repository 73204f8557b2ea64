/**
 * Answering the agent with the provider's response, in one of three shapes — buffered in the
 * envelope, streamed, or downloaded — each through the policy's response rules. A response
 * that a rule applies to but cannot be honoured on is refused (403), never passed (ADR 0038).
 * Each shape ends the call's audit trail with exactly one terminal event.
 */
import {
  classifyContentType,
  createResponseFilterNodeStream,
  jsonBoundsViolation,
  MAX_JSON_DEPTH,
  filterResponseBody,
  responseFilterability,
  ResponseFilterEncodingError,
  ResponseFilterLimitError,
  ResponseUnfilterableError,
  type PolicyRuntime,
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
import { PassThrough, pipeline, Transform, type Readable } from 'node:stream';
import { setImmediate as setImmediatePromise } from 'node:timers/promises';
import type { CallRecorder } from './recorder.js';
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
  headers: Record<string, string>;
  body: Readable;
}

export interface ResponseContext {
  upstream: UpstreamClient;
  request: UpstreamRequest;
  policy: PolicyRuntime;
  route: ResponseRoute;
  recorder: CallRecorder;
  maxResponseBytes: number;
}

function unfilterable(recorder: CallRecorder, reason: string): AppError {
  const e = Errors.responseUnfilterable(reason);
  return recorder.deny({ status: e.statusCode, reason, code: e.code, metadata: { step: 'response_rules' } });
}

/** Bodies from this size on yield to the event loop between decoding, filtering and serialising. */
const YIELD_ABOVE_BYTES = 256 * 1024;

const RESPONSE_ENVELOPE_BOUNDS = { maxDepth: MAX_JSON_DEPTH, maxMembers: Number.POSITIVE_INFINITY };

/**
 * The provider's text in its declared charset (WHATWG labels: utf-16le, iso-8859-1, ...);
 * UTF-8 when none is declared or the label is unknown.
 */
function decodeText(buf: Buffer, charset: string | null): string {
  if (charset && charset !== 'utf-8' && charset !== 'utf8') {
    try {
      return new TextDecoder(charset).decode(buf);
    } catch {
      // An unknown label: read it as UTF-8, as when none is given.
    }
  }
  return buf.toString('utf8');
}

/** The envelope body: JSON parsed, text as text, anything else base64. */
function decodeBody(buf: Buffer, contentType: string | undefined): unknown {
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
  if (ct.startsWith('text/') || ct.includes('xml') || ct.includes('x-www-form-urlencoded') || ct === '') {
    return decodeText(buf, charset);
  }
  // Binary content inside a JSON envelope: base64 (use `download: true` for raw bytes).
  return buf.toString('base64');
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
    throw upstreamFailure(err, c.recorder);
  }
  const contentType = res.headers['content-type'];
  const filterability = responseFilterability(contentType, c.policy, c.route);
  if (filterability.kind === 'refuse') throw unfilterable(c.recorder, filterability.reason);
  let filtered: unknown;
  try {
    const decoded = decodeBody(res.body, contentType);
    // Decoding and filtering a large body each take a while: let other requests (and health
    // checks) run between the two instead of stalling the process for both at once.
    if (res.body.length >= YIELD_ABOVE_BYTES) await setImmediatePromise();
    filtered = filterResponseBody(decoded, contentType ?? '', c.policy, c.route);
  } catch (err) {
    if (err instanceof ResponseUnfilterableError) throw unfilterable(c.recorder, err.message);
    if (err instanceof ResponseFilterLimitError || err instanceof ResponseFilterEncodingError) {
      throw upstreamFailure(new UpstreamError('bad_response', err.message), c.recorder);
    }
    throw err;
  }
  const auditId = c.recorder.completed({
    responseStatus: res.status,
    dataSize: res.body.length,
    durationMs: Math.round(performance.now() - started),
  });
  // The body may have changed size after filtering.
  delete res.headers['content-length'];
  // Serialising the envelope is the third long step for a large body: its own turn, too.
  if (res.body.length >= YIELD_ABOVE_BYTES) await setImmediatePromise();
  return { model: 'B', status: res.status, headers: res.headers, body: filtered, auditId };
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
): Promise<ExecutionResult | StreamedResult> {
  let streamed: UpstreamStreamResponse;
  try {
    streamed = await c.upstream.stream(c.request);
  } catch (err) {
    throw upstreamFailure(err, c.recorder);
  }
  if (streamed.status < 200 || streamed.status >= 300) {
    let body: Buffer;
    try {
      body = await readCapped(streamed.body, c.maxResponseBytes);
    } catch (err) {
      throw upstreamFailure(err, c.recorder);
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
  const result = pipeToAgent(c, streamed, started, download, (beforeChunk) =>
    filterability.kind === 'pass'
      ? null
      : createResponseFilterNodeStream(contentType, c.policy, c.route, {}, { beforeChunk }),
  );
  // Status and headers go out with the first byte: a provider body that fails before it
  // (a broken encoding, an unfilterable first event, a deadline) is still answered with a
  // typed JSON error instead of a 2xx head followed by a cut connection.
  await firstByteOrEnd(result.body);
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
  /** The response filter, counting the provider's bytes with `beforeChunk`; null: none. */
  makeFilter: (beforeChunk: (chunk: Uint8Array) => void) => Transform | null,
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
  // With a filter the bytes are counted inside it: one stream stage less per chunk.
  const filter = makeFilter(count);
  const stage =
    filter ??
    new Transform({
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
  const out = new PassThrough();
  pipeline(source, stage, (err) => {
    if (!err) return void settle('execution_completed', {});
    settle('execution_error', { error: streamErrorKind(err) });
    // Before the first byte this still becomes a typed error answer; after it, a cut stream.
    out.destroy(agentError(err));
  });
  stage.pipe(out);
  out.on('close', () => {
    if (c.recorder.settled) return;
    // The agent hung up: stop reading from the provider.
    source.destroy();
    settle('execution_error', { error: 'client_closed' });
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
  return { streamed: true, status: upstream.status, headers, body: out };
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
