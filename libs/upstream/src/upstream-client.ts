/**
 * The only way this product talks to providers. Every connection's address is checked at
 * connect time by our own DNS lookup (so a DNS answer cannot change between check and use:
 * the socket connects to exactly the address that was validated), redirects are never
 * followed, and time and size are bounded.
 */
import dns from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import type { Readable } from 'node:stream';
import type { LookupFunction } from 'node:net';
import { Agent, errors as undiciErrors, request } from 'undici';
import { isBlockedAddress } from '@vlt/policy-engine';

export class UpstreamError extends Error {
  override name = 'UpstreamError';
  constructor(
    readonly kind: 'ssrf_blocked' | 'timeout' | 'unavailable' | 'too_large' | 'bad_response',
    message: string,
  ) {
    super(message);
  }
}

export interface UpstreamRequest {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  maxResponseBytes?: number;
  signal?: AbortSignal;
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
  timeoutMs: number;
  /** Test seam: where names are resolved. */
  resolver?: (host: string) => Promise<string[]>;
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
  'set-cookie',
]);

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
  const resolve = opts.resolver ?? systemResolve;

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

  const agent = new Agent({
    connect: {
      lookup: guardedLookup,
      timeout: Math.min(opts.timeoutMs, 10_000),
      ...(opts.extraCa?.length && { ca: [...tls.rootCertificates, ...opts.extraCa] }),
    },
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    keepAliveTimeout: 10_000,
    connections: 256,
  });

  function checkLiteral(url: URL): void {
    // net.connect skips lookup for IP literals, so literal hosts are checked here.
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host) && isBlockedAddress(host, opts.ssrfAllowCidrs)) {
      throw new UpstreamError('ssrf_blocked', 'destination address is not allowed');
    }
  }

  function mapError(err: unknown): UpstreamError {
    if (err instanceof UpstreamError) return err;
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof UpstreamError) return cause;
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

  async function send(req: UpstreamRequest) {
    if (req.url.protocol !== 'https:')
      throw new UpstreamError('ssrf_blocked', 'only https upstreams are allowed');
    checkLiteral(req.url);
    try {
      return await request(req.url, {
        method: req.method as 'GET',
        headers: req.headers,
        body: req.body,
        dispatcher: agent,
        maxRedirections: 0,
        signal: req.signal,
      } as Parameters<typeof request>[1]);
    } catch (err) {
      throw mapError(err);
    }
  }

  return {
    resolve,
    async request(req) {
      const res = await send(req);
      const chunks: Buffer[] = [];
      let size = 0;
      try {
        for await (const chunk of res.body) {
          size += (chunk as Buffer).length;
          if (req.maxResponseBytes !== undefined && size > req.maxResponseBytes) {
            res.body.destroy();
            throw new UpstreamError('too_large', 'provider response exceeds the size limit');
          }
          chunks.push(chunk as Buffer);
        }
      } catch (err) {
        throw mapError(err);
      }
      return {
        status: res.statusCode,
        headers: flattenResponseHeaders(res.headers),
        body: Buffer.concat(chunks),
      };
    },
    async stream(req) {
      const res = await send(req);
      return {
        status: res.statusCode,
        headers: flattenResponseHeaders(res.headers),
        body: res.body as unknown as Readable,
      };
    },
    async close() {
      await agent.close();
    },
  };
}
