/**
 * One JSON call to a delivery provider, with a deadline and a bounded answer. Errors carry the
 * status and whether a retry may help; never the URL (a bot token is a path segment) or a body.
 */
import { request } from 'undici';

const MAX_ANSWER_BYTES = 1024 * 1024;

export class DeliveryError extends Error {
  override name = 'DeliveryError';
  constructor(
    message: string,
    /** True for outages (network, timeout, 5xx, 429): try again later. */
    readonly retryable: boolean,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** How a delivery reaches the network; services pass their upstream client (its CAs, limits). */
export type Transport = (req: {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  maxBytes: number;
}) => Promise<{ status: number; text: string }>;

/** undici with a deadline and a bounded answer (split notifier: NODE_EXTRA_CA_CERTS applies). */
export const defaultTransport: Transport = async (req) => {
  const res = await request(req.url, {
    method: 'POST',
    headers: req.headers,
    body: req.body,
    headersTimeout: req.timeoutMs,
    bodyTimeout: req.timeoutMs,
    signal: AbortSignal.timeout(req.timeoutMs),
  });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length;
    if (size > req.maxBytes) {
      res.body.destroy();
      throw new DeliveryError('answer too large', false, res.statusCode);
    }
    chunks.push(chunk as Buffer);
  }
  return { status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') };
};

export interface PostOptions {
  headers?: Record<string, string>;
  timeoutMs?: number;
  provider: string;
  transport?: Transport | undefined;
}

export async function postJson(
  url: string,
  body: unknown,
  opts: PostOptions,
): Promise<{ status: number; json: unknown }> {
  const transport = opts.transport ?? defaultTransport;
  let answer;
  try {
    answer = await transport({
      url,
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', accept: 'application/json', ...opts.headers },
      timeoutMs: opts.timeoutMs ?? 5_000,
      maxBytes: MAX_ANSWER_BYTES,
    });
  } catch (err) {
    if (err instanceof DeliveryError)
      throw new DeliveryError(`${opts.provider} ${err.message}`, err.retryable, err.status);
    // Only the error's class: a message could quote the URL, and a bot token is part of it.
    const kind = err instanceof Error ? err.name : 'error';
    throw new DeliveryError(`${opts.provider} unreachable (${kind})`, true);
  }
  const { status, text } = answer;
  if (status >= 500 || status === 429) {
    throw new DeliveryError(`${opts.provider} answered ${status}`, true, status);
  }
  let json: unknown = null;
  try {
    json = text === '' ? null : JSON.parse(text);
  } catch {
    throw new DeliveryError(`${opts.provider} answered ${status} without JSON`, false, status);
  }
  return { status, json };
}

/** A short, safe description of a provider's error field (no echo of long or odd text). */
export function providerError(value: unknown, secret?: string): string {
  let s = typeof value === 'string' ? value : 'unknown error';
  // A provider may quote what it was sent: the credential never travels on in an error.
  if (secret && secret.length >= 8) s = s.split(secret).join('REDACTED');
  return s
    .replace(/[^\w .:-]/g, '')
    .replace(/[\w:-]{24,}/g, 'REDACTED')
    .slice(0, 120);
}

/** Anything with the upstream client's `request` (structural: this library needs no import). */
export interface RequestClient {
  request(req: {
    url: URL;
    method: string;
    headers: Record<string, string>;
    body?: string;
    maxResponseBytes?: number;
    signal?: AbortSignal;
  }): Promise<{ status: number; body: Buffer }>;
}

/** Deliveries through a service's upstream client: its CAs, SSRF guard and limits apply. */
export function transportVia(client: RequestClient): Transport {
  return async (req) => {
    const res = await client.request({
      url: new URL(req.url),
      method: 'POST',
      headers: req.headers,
      body: req.body,
      maxResponseBytes: req.maxBytes,
      signal: AbortSignal.timeout(req.timeoutMs),
    });
    return { status: res.status, text: res.body.toString('utf8') };
  };
}
