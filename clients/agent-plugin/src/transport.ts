/**
 * The fetch the plugin hands to @vlt/sdk. The SDK owns tokens, refresh-once and the request
 * shapes; this layer adds what the SDK has no option for (see the ADR, "SDK gaps"):
 * - the per-call `x-vlt-session-key` and `x-vlt-approval-id` headers, taken from an
 *   AsyncLocalStorage scope so concurrent tool calls cannot see each other's values;
 * - a look at a failed response's body, for the `blocked` field and for a preview of a body
 *   that is not JSON, which the SDK's errors do not carry;
 * - in bearer mode, the token endpoint answered locally with the configured token, since the
 *   SDK's agent client only knows the private-key flow.
 * Headers are added only to requests for the vault's own origin.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { FetchLike } from '@vlt/sdk';
import { bodyPreview, type ResponseObservation } from './errors.js';
import type { Secret } from './secret.js';

export const SESSION_KEY_HEADER = 'x-vlt-session-key';
export const APPROVAL_ID_HEADER = 'x-vlt-approval-id';

const TOKEN_PATH = '/v1/agents/token';
/** Failed responses are small; a larger body is previewed from its start only. */
const PEEK_LIMIT = 64 * 1024;

export interface CallScope {
  sessionKey?: string | undefined;
  approvalId?: string | undefined;
  /** The call expects raw bytes (a download): its success body is never read here. */
  binary?: boolean;
}

export interface Transport {
  fetch: FetchLike;
  /** Runs `fn` with `scope`'s headers on every vault request it makes; `observed` fills as they answer. */
  run<T>(scope: CallScope, fn: (observed: ResponseObservation) => Promise<T>): Promise<T>;
}

interface ActiveScope extends CallScope {
  observed: ResponseObservation;
}

export interface TransportOptions {
  baseUrl: string;
  fetch: FetchLike;
  /** Bearer mode: the configured agent access token, served for the SDK's token requests. */
  bearerToken?: Secret | undefined;
}

function headerRecord(init: RequestInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  new Headers(init?.headers).forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

async function readStart(res: Response): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < PEEK_LIMIT) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function isJsonType(res: Response): boolean {
  return /[/+]json\b/i.test(res.headers.get('content-type') ?? '');
}

/** Records a `blocked` field or a non-JSON preview of `res` (read from a clone) into `observed`. */
async function observe(res: Response, observed: ResponseObservation, secrets: string[]): Promise<void> {
  const text = await readStart(res.clone());
  observed.status = res.status;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    observed.preview = bodyPreview(text, secrets) || '(empty body)';
    return;
  }
  if (json !== null && typeof json === 'object' && 'blocked' in json && json.blocked) {
    const b = json as { reason?: unknown; error?: unknown; retryAfter?: unknown };
    const reason =
      typeof b.reason === 'string' ? b.reason : typeof b.error === 'string' ? b.error : undefined;
    observed.blocked = {
      reason: reason === undefined ? undefined : bodyPreview(reason, secrets),
      retryAfter: typeof b.retryAfter === 'number' ? b.retryAfter : undefined,
    };
  }
}

export function createTransport(o: TransportOptions): Transport {
  const origin = new URL(o.baseUrl).origin;
  const scopes = new AsyncLocalStorage<ActiveScope>();

  const fetchFn: FetchLike = async (input, init) => {
    const url = new URL(String(input));
    const ours = url.origin === origin;
    if (ours && url.pathname === TOKEN_PATH && o.bearerToken) {
      // Nothing to exchange: the configured token is the access token.
      return Response.json({ access_token: o.bearerToken.reveal(), token_type: 'Bearer', expires_in: 3600 });
    }
    const scope = ours && url.pathname !== TOKEN_PATH ? scopes.getStore() : undefined;
    if (!scope) return o.fetch(input, init);
    const headers = headerRecord(init);
    if (scope.sessionKey) headers[SESSION_KEY_HEADER] = scope.sessionKey;
    if (scope.approvalId) headers[APPROVAL_ID_HEADER] = scope.approvalId;
    const res = await o.fetch(input, { ...init, headers });
    const failed = res.status >= 400;
    const unexpected = !scope.binary && res.status < 300 && !isJsonType(res);
    if (failed || unexpected) {
      const bearer = /^Bearer\s+(\S+)$/i.exec(headers.authorization ?? '')?.[1];
      await observe(res, scope.observed, bearer ? [bearer] : []).catch(() => undefined);
    }
    return res;
  };

  return {
    fetch: fetchFn,
    run(scope, fn) {
      const active: ActiveScope = { ...scope, observed: {} };
      return scopes.run(active, () => fn(active.observed));
    },
  };
}
