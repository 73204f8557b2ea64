/**
 * The only way this product talks to providers. Every connection's address is checked at
 * connect time by our own DNS lookup (so a DNS answer cannot change between check and use:
 * the socket connects to exactly the address that was validated), redirects are never
 * followed, and time and size are bounded: a headers timeout, an idle timeout between body
 * bytes and a total deadline per call (a provider dripping one byte a second cannot hold a
 * call open).
 *
 * What comes back is always what the gateway can read: the client owns content negotiation
 * (it asks for `identity` and decodes gzip, deflate or br when a provider compresses anyway;
 * any other coding is a bad response), and it scrubs the credentials it was told it injected
 * from the headers and body (secret-scrubber.ts). Callers never see provider encodings.
 */
import dns from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import { pipeline, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { LookupFunction } from 'node:net';
import { Agent, errors as undiciErrors, request } from 'undici';
import { isBlockedAddress } from '@vlt/policy-engine';
import { cachedResolver } from './dns-cache.js';
import {
  compileSecretForms,
  createSecretScrubber,
  createSecretScrubStream,
  scrubSecretsFromBuffer,
  scrubSecretsFromText,
  type SecretForms,
} from './secret-scrubber.js';
import { createTickCoalescer } from './tick-coalescer.js';

export class UpstreamError extends Error {
  override name = 'UpstreamError';
  constructor(
    readonly kind: 'ssrf_blocked' | 'timeout' | 'unavailable' | 'too_large' | 'bad_response' | 'busy',
    message: string,
  ) {
    super(message);
  }
}

export interface UpstreamRequest {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  maxResponseBytes?: number;
  signal?: AbortSignal;
  /**
   * The credential values injected into this request: scrubbed from the response's headers
   * and body in every form a reflection produces. Their forms may come compiled: deriving them
   * costs more than searching a response for them, and a caller that keeps a credential can
   * keep its forms with it (and drop both together).
   */
  secrets?: readonly string[] | SecretForms;
  /** This call's time limits where they differ from the client's (each defaults to its own). */
  timeouts?: UpstreamTimeouts;
}

export interface UpstreamTimeouts {
  /** Until the response headers arrive. */
  headersMs?: number;
  /** Longest silence between two body chunks. */
  idleMs?: number;
  /** A buffered call, connect to last byte (a stream keeps the client's stream deadline). */
  deadlineMs?: number;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface UpstreamStreamResponse {
  status: number;
  headers: Record<string, string>;
  body: Readable;
}

export interface UpstreamClientOptions {
  ssrfAllowCidrs: string[];
  /** Until the response headers arrive, milliseconds. */
  timeoutMs: number;
  /** Longest silence between two body chunks (default: timeoutMs). */
  idleTimeoutMs?: number;
  /** Whole call, buffered (`request`): connect to last byte (default: 60 s). */
  deadlineMs?: number;
  /** Whole call, streamed (`stream`): connect to last byte (default: 10 min). */
  streamDeadlineMs?: number;
  /**
   * Most calls open at once to one provider origin (default 1024). Each holds a connection until
   * its body ends; one more is refused at once (`busy`) instead of waiting behind them.
   */
  maxConnectionsPerOrigin?: number;
  /** Test seam: where names are resolved. */
  resolver?: (host: string) => Promise<string[]>;
  /** How long a host name's answer is reused, milliseconds (ADR 0079); 0 or unset: never. */
  dnsCacheMs?: number;
  /** CAs trusted in addition to the system's (processes use NODE_EXTRA_CA_CERTS instead). */
  extraCa?: string[];
}

export interface UpstreamClient {
  /** Resolves a host name to every address it has (for the policy engine's SSRF step). */
  resolve(host: string): Promise<string[]>;
  request(req: UpstreamRequest): Promise<UpstreamResponse>;
  stream(req: UpstreamRequest): Promise<UpstreamStreamResponse>;
  close(): Promise<void>;
}

export const DEFAULT_MAX_CONNECTIONS_PER_ORIGIN = 1024;

function deadlineError(): UpstreamError {
  return new UpstreamError('timeout', 'provider did not finish within the deadline');
}

function cancelledError(): UpstreamError {
  return new UpstreamError('unavailable', 'provider request cancelled by the caller');
}

/**
 * Makes the caller's `signal` abort the call's own `controller` (its deadline's) until the
 * returned function unlinks them: one signal per call, where `AbortSignal.any` would add a
 * second one, and its listeners, to every open stream.
 */
function linkCancel(signal: AbortSignal | undefined, controller: AbortController): () => void {
  if (!signal) return () => undefined;
  const cancel = () => controller.abort(cancelledError());
  signal.addEventListener('abort', cancel, { once: true });
  return () => signal.removeEventListener('abort', cancel);
}

async function systemResolve(host: string): Promise<string[]> {
  const answers = await dns.promises.lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
}

// Headers that describe one hop, not the message; never forwarded either way.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  // Cookies are the provider's session with the gateway's credential: never the agent's.
  'set-cookie',
  'set-cookie2',
]);

/** Codings the client decodes; the identity coding needs nothing. */
const DECODERS: Record<string, () => NodeJS.ReadWriteStream> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress(),
};

/** The decoders for a Content-Encoding value, in the order to apply them; null: unsupported. */
function decodersFor(contentEncoding: string | undefined): Array<() => NodeJS.ReadWriteStream> | null {
  if (!contentEncoding) return [];
  const codings = contentEncoding
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length > 2) return null; // more layers than any real server sends: a bomb
  const out: Array<() => NodeJS.ReadWriteStream> = [];
  // Codings are listed in the order they were applied: undo them last to first.
  for (const c of codings.reverse()) {
    const d = DECODERS[c];
    if (!d) return null;
    out.push(d);
  }
  return out;
}

export function flattenResponseHeaders(
  raw: Record<string, string | string[] | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) {
    const key = k.toLowerCase();
    if (v === undefined || HOP_BY_HOP.has(key)) continue;
    out[key] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

export function createUpstreamClient(opts: UpstreamClientOptions): UpstreamClient {
  const resolve = cachedResolver(opts.resolver ?? systemResolve, { maxAgeMs: opts.dnsCacheMs ?? 0 });

  const guardedLookup: LookupFunction = (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        if (addresses.length === 0) {
          callback(new UpstreamError('unavailable', `no address for ${hostname}`), '', 4);
          return;
        }
        // Every answer must be public: an attacker controlling DNS may mix answers.
        const blocked = addresses.find((a) => isBlockedAddress(a, opts.ssrfAllowCidrs));
        if (blocked) {
          callback(new UpstreamError('ssrf_blocked', 'destination address is not allowed'), '', 4);
          return;
        }
        const family = (a: string) => (net.isIPv6(a) ? 6 : 4);
        if (options.all) {
          callback(
            null,
            addresses.map((a) => ({ address: a, family: family(a) })) as unknown as string,
            undefined as unknown as number,
          );
        } else {
          callback(null, addresses[0]!, family(addresses[0]!));
        }
      },
      (err: Error) =>
        callback(new UpstreamError('unavailable', `cannot resolve ${hostname}: ${err.message}`), '', 4),
    );
  };

  const deadlineMs = opts.deadlineMs ?? 60_000;
  const streamDeadlineMs = opts.streamDeadlineMs ?? 600_000;
  const maxPerOrigin = opts.maxConnectionsPerOrigin ?? DEFAULT_MAX_CONNECTIONS_PER_ORIGIN;
  const agent = new Agent({
    connect: {
      lookup: guardedLookup,
      timeout: Math.min(opts.timeoutMs, 10_000),
      // One secure context for every connection. Without it tls.connect builds one per
      // handshake: ~0.2 ms of CPU with the default roots (NODE_EXTRA_CA_CERTS included), and
      // with `ca` passed instead it would parse the whole root store again (~30 ms each).
      secureContext: tls.createSecureContext(
        opts.extraCa?.length ? { ca: [...tls.rootCertificates, ...opts.extraCa] } : {},
      ),
    },
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.idleTimeoutMs ?? opts.timeoutMs,
    keepAliveTimeout: 10_000,
    // Never more sockets than calls `takeSlot` lets through.
    connections: maxPerOrigin,
  });

  /** Calls open per origin: from before the request until its body has closed. */
  const openCalls = new Map<string, number>();

  /**
   * Takes one of the origin's slots, or refuses the call. undici would queue it instead, behind
   * streams that may stay open for minutes, with no timer running until it got a connection:
   * the agent would hang with no answer. The returned function gives the slot back, once.
   */
  function takeSlot(origin: string): () => void {
    const n = openCalls.get(origin) ?? 0;
    if (n >= maxPerOrigin) {
      throw new UpstreamError('busy', 'too many calls are open to this provider from this gateway');
    }
    openCalls.set(origin, n + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = (openCalls.get(origin) ?? 1) - 1;
      if (left === 0) openCalls.delete(origin);
      else openCalls.set(origin, left);
    };
  }

  function checkLiteral(url: URL): void {
    // net.connect skips lookup for IP literals, so literal hosts are checked here.
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host) && isBlockedAddress(host, opts.ssrfAllowCidrs)) {
      throw new UpstreamError('ssrf_blocked', 'destination address is not allowed');
    }
  }

  /** Errors raised by a content decoder: the provider's encoding was broken. */
  const decodeFailures = new WeakSet<Error>();

  function mapError(err: unknown, deadline?: AbortSignal): UpstreamError {
    if (err instanceof UpstreamError) return err;
    if (err instanceof Error && decodeFailures.has(err)) {
      return new UpstreamError('bad_response', 'provider sent a body that does not decode');
    }
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof UpstreamError) return cause;
    if (deadline?.aborted) return deadlineError();
    if (
      err instanceof undiciErrors.HeadersTimeoutError ||
      err instanceof undiciErrors.BodyTimeoutError ||
      err instanceof undiciErrors.ConnectTimeoutError
    ) {
      return new UpstreamError('timeout', 'provider request timed out');
    }
    if (err instanceof undiciErrors.ResponseExceededMaxSizeError) {
      return new UpstreamError('too_large', 'provider response exceeds the size limit');
    }
    return new UpstreamError('unavailable', 'provider request failed');
  }

  /** Refuses a target no call may reach, before a slot is taken for it. */
  function checkTarget(url: URL): void {
    if (url.protocol !== 'https:')
      throw new UpstreamError('ssrf_blocked', 'only https upstreams are allowed');
    checkLiteral(url);
  }

  async function send(req: UpstreamRequest, deadline: AbortSignal) {
    // The gateway reads what it forwards, so it asks for bytes it can read.
    const headers = { ...req.headers, 'accept-encoding': 'identity' };
    try {
      return await request(req.url, {
        method: req.method as 'GET',
        headers,
        body: req.body,
        dispatcher: agent,
        maxRedirections: 0,
        ...(req.timeouts?.headersMs !== undefined && { headersTimeout: req.timeouts.headersMs }),
        ...(req.timeouts?.idleMs !== undefined && { bodyTimeout: req.timeouts.idleMs }),
        signal: deadline,
      } as Parameters<typeof request>[1]);
    } catch (err) {
      throw mapError(err, deadline);
    }
  }

  /**
   * The provider's body as the caller may read it: decoded, credentials scrubbed. Errors of
   * any stage surface on the returned stream; destroying it stops the provider's body.
   */
  function readableBody(
    raw: Readable,
    headers: Record<string, string>,
    secrets: SecretForms | null,
    streamed: boolean,
  ): Readable {
    const decoders = decodersFor(headers['content-encoding']);
    if (decoders === null) {
      raw.on('error', () => undefined);
      raw.destroy();
      throw new UpstreamError('bad_response', 'provider used a content encoding the gateway cannot read');
    }
    if (decoders.length > 0) {
      // The body the caller sees is no longer the encoded entity the headers described.
      delete headers['content-encoding'];
      delete headers['content-length'];
    }
    const scrubber = secrets ? createSecretScrubber(secrets) : null;
    if (scrubber) delete headers['content-length'];
    if (streamed && decoders.length === 0) {
      // The common stream: its many small chunks joined per event-loop turn and scrubbed in
      // one stage (each stage costs its state and listeners while the stream is open).
      raw.on('error', () => undefined);
      return pipeline(raw, createTickCoalescer(scrubber ?? undefined), () => undefined);
    }
    const stages: NodeJS.ReadWriteStream[] = [
      // A stream's many small chunks, joined per event-loop turn before any stage sees them.
      ...(streamed ? [createTickCoalescer()] : []),
    ];
    for (const d of decoders) {
      const stage = d();
      // Registered before the pipeline's own listener: the error is marked as the provider's
      // malformed body (502 bad_response) before anything reads it.
      stage.once('error', (err) => decodeFailures.add(err));
      stages.push(stage);
    }
    if (scrubber) stages.push(createSecretScrubStream(scrubber));
    if (stages.length === 0) return raw;
    // Absorb errors on the source after the chain settled (the chain reports them itself).
    raw.on('error', () => undefined);
    return pipeline(
      [raw, ...stages] as unknown as [Readable, ...NodeJS.ReadWriteStream[]],
      () => undefined,
    ) as unknown as Readable;
  }

  function responseHeaders(raw: Record<string, string | string[] | undefined>, secrets: SecretForms | null) {
    const headers = flattenResponseHeaders(raw);
    if (secrets) {
      for (const [k, v] of Object.entries(headers)) headers[k] = scrubSecretsFromText(v, secrets);
    }
    return headers;
  }

  // The client keeps no forms between requests: they are the secrets in other spellings, and
  // must not outlive a revoked credential in a cache the revocation does not reach.
  const secretFormsOf = (secrets: UpstreamRequest['secrets']): SecretForms | null => {
    if (!secrets) return null;
    const forms = 'bytes' in secrets ? secrets : compileSecretForms(secrets);
    return forms.text.length > 0 ? forms : null;
  };

  /** A buffered call once its slot is taken: the whole body, decoded and scrubbed. */
  async function requestBuffered(req: UpstreamRequest): Promise<UpstreamResponse> {
    // Cleared when the call ends: AbortSignal.timeout() would keep its timer, and what it
    // holds, for the whole deadline after every call (a minute of calls at saturation).
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), req.timeouts?.deadlineMs ?? deadlineMs);
    timer.unref();
    const unlink = linkCancel(req.signal, controller);
    try {
      if (req.signal?.aborted) throw cancelledError();
      return await readBuffered(req, controller.signal);
    } finally {
      clearTimeout(timer);
      unlink();
    }
  }

  /** The call itself, aborted by `deadline`. */
  async function readBuffered(req: UpstreamRequest, deadline: AbortSignal): Promise<UpstreamResponse> {
    const res = await send(req, deadline);
    const secrets = secretFormsOf(req.secrets);
    const headers = responseHeaders(res.headers, secrets);
    // Secrets are scrubbed once over the whole body below, not per chunk.
    const body = readableBody(res.body as unknown as Readable, headers, null, false);
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of body) {
        size += (chunk as Buffer).length;
        if (req.maxResponseBytes !== undefined && size > req.maxResponseBytes) {
          body.destroy();
          throw new UpstreamError('too_large', 'provider response exceeds the size limit');
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      throw mapError(err, deadline);
    }
    const whole = Buffer.concat(chunks);
    const scrubbed = secrets ? scrubSecretsFromBuffer(whole, secrets) : whole;
    if (scrubbed !== whole) delete headers['content-length'];
    return { status: res.statusCode, headers, body: scrubbed };
  }

  return {
    resolve,
    async request(req) {
      checkTarget(req.url);
      const release = takeSlot(req.url.origin);
      try {
        return await requestBuffered(req);
      } finally {
        release();
      }
    },
    async stream(req) {
      checkTarget(req.url);
      const release = takeSlot(req.url.origin);
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), streamDeadlineMs);
      timer.unref();
      let body: Readable | undefined;
      // Registered before undici's own listener, so the body fails with our timeout (or
      // cancellation) error rather than a generic abort, whatever the provider still sends.
      controller.signal.addEventListener(
        'abort',
        () =>
          body?.destroy(
            controller.signal.reason instanceof UpstreamError ? controller.signal.reason : deadlineError(),
          ),
        { once: true },
      );
      const unlink = linkCancel(req.signal, controller);
      try {
        if (req.signal?.aborted) throw cancelledError();
        const res = await send(req, controller.signal);
        const secrets = secretFormsOf(req.secrets);
        const headers = responseHeaders(res.headers, secrets);
        body = readableBody(res.body as unknown as Readable, headers, secrets, true);
        body.once('close', () => {
          clearTimeout(timer);
          unlink();
          release();
        });
        return { status: res.statusCode, headers, body };
      } catch (err) {
        clearTimeout(timer);
        unlink();
        release();
        throw err;
      }
    },
    async close() {
      await agent.close();
    },
  };
}
