/**
 * The agent's side of the vault: enrolment with a bootstrap secret, then calls authenticated
 * by short-lived access tokens obtained with a signed client assertion (private-key JWT).
 */
import { randomUUID } from 'node:crypto';
import { SignJWT, type CryptoKey, type JWK } from 'jose';
import type {
  ApprovalView,
  BootstrapResponse,
  CapabilitiesMeResponse,
  ConnectionListResponse,
  ExecuteModelAResponse,
  ExecuteModelB,
  PermissionRequestBody,
  PermissionRequestCreated,
  PermissionRequestList,
  PermissionToActBody,
  PermissionToActResponse,
  ResolveCredentialBody,
  ResolveCredentialResponse,
} from './contracts.js';
import { endpoints, pathOf, type Endpoint, type RevokeConnectionResponse } from './endpoints.js';
import { VaultApprovalError, VaultAuthError, VaultUsageError } from './errors.js';
import { importAgentKey } from './keys.js';
import { failure, normaliseBaseUrl, parseBody, send, type FetchLike, type SendOptions } from './transport.js';

type Out<S extends { parse(v: unknown): unknown }> = ReturnType<S['parse']>;

export type BootstrapResult = Out<typeof BootstrapResponse>;
export type ModelAResult = Out<typeof ExecuteModelAResponse>;
export type Capabilities = Out<typeof CapabilitiesMeResponse>;
export type ConnectionListItem = Out<typeof ConnectionListResponse>['connections'][number];
export type ResolvedCredential = Out<typeof ResolveCredentialResponse>;
export type CapabilityRequestResult = Out<typeof PermissionRequestCreated>;
export type CapabilityRequestView = Out<typeof PermissionRequestList>['requests'][number];
export type { ApprovalView };

export type RevokedConnection = Out<typeof RevokeConnectionResponse>;

/** A Model B request: everything of the wire body but `model`. */
export type ExecuteRequest = Omit<ExecuteModelB, 'model'>;
export type ResolveCredentialRequest = Out<typeof ResolveCredentialBody>;
export type CapabilityRequest = Out<typeof PermissionRequestBody>;
export type PermissionToActRequest = Out<typeof PermissionToActBody>;
export type PermissionToActResult = Out<typeof PermissionToActResponse>;

export type ExecuteResult =
  | {
      kind: 'result';
      /** The provider's status (a provider 404 is a result, not an error). */
      status: number;
      headers: Record<string, string>;
      body: unknown;
      auditId: string;
    }
  | { kind: 'approval_required'; approvalRequestId: string; expiresAt: string; auditId: string };

export type ExecuteStreamResult =
  | ExecuteResult
  | {
      kind: 'stream';
      status: number;
      headers: Record<string, string>;
      /** The call's `execution_requested` event; its terminal event is written when the stream ends. */
      auditId: string | null;
      /** The provider's body as the vault relays it (filtered by the policy's response rules). */
      body: ReadableStream<Uint8Array>;
    };

export interface CallOptions {
  signal?: AbortSignal;
  /**
   * Extra request headers for the vault, such as `x-vlt-session-key`. They cannot replace the
   * agent's credential: `authorization` is always the client's own.
   */
  headers?: Record<string, string>;
}

/** What varies between calls of one table endpoint. */
interface Request {
  params?: Record<string, string>;
  json?: unknown;
  signal?: AbortSignal | undefined;
  headers?: Record<string, string> | undefined;
}

/** The caller's extra headers, minus any that would carry or replace a credential. */
function extraHeaders(h: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!h) return undefined;
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(h)) {
    const lower = name.toLowerCase();
    if (lower === 'authorization' || lower === 'x-api-key' || lower === 'cookie') continue;
    out[lower] = value;
  }
  return out;
}

export interface WaitOptions {
  pollMs?: number;
  /** Give up (VaultApprovalError, code APPROVAL_WAIT_TIMEOUT) after this long; default: wait on. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface BootstrapOptions {
  baseUrl: string;
  bootstrapSecret: string;
  publicJwk: JWK;
  fetch?: FetchLike;
}

/** Enrols the agent's public key with a one-time bootstrap secret from an admin. */
export async function bootstrapAgent(o: BootstrapOptions): Promise<BootstrapResult> {
  // Refused before sending: a mistyped credential (a PAT, an access token) must not travel.
  if (typeof o.bootstrapSecret !== 'string' || !o.bootstrapSecret.startsWith('vltb_')) {
    throw new VaultUsageError('bootstrapSecret must be a bootstrap secret (it starts with vltb_)', {
      status: 0,
      code: 'INVALID_ARGUMENT',
    });
  }
  const e = endpoints.bootstrap;
  const where = `${e.method} ${e.path}`;
  const baseUrl = normaliseBaseUrl(o.baseUrl);
  const res = await send(o.fetch ?? globalThis.fetch, baseUrl, {
    method: e.method,
    path: e.path,
    json: { bootstrapSecret: o.bootstrapSecret, publicKey: o.publicJwk },
  });
  if (res.status !== e.ok) throw await failure(res, where, [o.bootstrapSecret]);
  return parseBody(res, e.response, where);
}

export interface AgentClientOptions {
  baseUrl: string;
  agentId: string;
  /** The key enrolled at bootstrap: a CryptoKey, its PKCS8 PEM or its (base64) JWK. */
  privateKey: CryptoKey | string;
  /** The token audience when the vault sets AGENT_TOKEN_AUDIENCE; default: baseUrl. */
  audience?: string;
  fetch?: FetchLike;
}

/** Tokens are renewed this long before they expire, so none runs out in flight. */
const REFRESH_MARGIN_MS = 30_000;
const ASSERTION_LIFETIME_S = 60;

export type AgentClient = ReturnType<typeof createAgentClient>;

export function createAgentClient(o: AgentClientOptions) {
  const baseUrl = normaliseBaseUrl(o.baseUrl);
  const audience = o.audience ?? baseUrl;
  const fetchFn = o.fetch ?? globalThis.fetch;
  const pem = typeof o.privateKey === 'string' ? o.privateKey : undefined;
  let key: Promise<CryptoKey> | undefined;
  let cached: { token: string; refreshAt: number } | undefined;
  let inflight: Promise<string> | undefined;

  const secrets = () => [cached?.token, pem];

  function signingKey(): Promise<CryptoKey> {
    key ??= typeof o.privateKey === 'string' ? importAgentKey(o.privateKey) : Promise.resolve(o.privateKey);
    return key;
  }

  function goneError(serverMessage: string, status: number): VaultAuthError {
    return new VaultAuthError(
      `the vault no longer accepts agent ${o.agentId} (${serverMessage}); it may have been disabled, ` +
        're-keyed or deleted: it needs a new bootstrap secret from a workspace admin',
      { status, code: 'UNAUTHORIZED' },
    );
  }

  async function fetchToken(): Promise<string> {
    const iat = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
      .setIssuer(o.agentId)
      .setSubject(o.agentId)
      .setAudience(audience)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_LIFETIME_S)
      .setJti(randomUUID())
      .sign(await signingKey());
    const e = endpoints.token;
    const where = `${e.method} ${e.path}`;
    const res = await send(fetchFn, baseUrl, {
      method: e.method,
      path: e.path,
      json: {
        grant_type: 'client_assertion',
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: assertion,
      },
    });
    if (res.status !== e.ok) {
      const err = await failure(res, where, [...secrets(), assertion]);
      throw err instanceof VaultAuthError ? goneError(err.message, err.status) : err;
    }
    const body = await parseBody(res, e.response, where);
    cached = { token: body.access_token, refreshAt: Date.now() + body.expires_in * 1000 - REFRESH_MARGIN_MS };
    return body.access_token;
  }

  /** The cached token, or one shared request for a new one. */
  function token(): Promise<string> {
    if (cached && Date.now() < cached.refreshAt) return Promise.resolve(cached.token);
    inflight ??= fetchToken().finally(() => {
      inflight = undefined;
    });
    return inflight;
  }

  /**
   * Sends with the current token; on a 401 gets a fresh token once and sends once more. A
   * second 401 means the agent itself is refused, which no new token fixes.
   */
  async function call(r: SendOptions): Promise<Response> {
    const first = await token();
    const res = await send(fetchFn, baseUrl, {
      ...r,
      headers: { ...r.headers, authorization: `Bearer ${first}` },
    });
    if (res.status !== 401) return res;
    await res.body?.cancel().catch(() => undefined);
    // Another caller may already have replaced the refused token: drop it only if it is ours.
    if (cached?.token === first) cached = undefined;
    const fresh = await token();
    const again = await send(fetchFn, baseUrl, {
      ...r,
      headers: { ...r.headers, authorization: `Bearer ${fresh}` },
    });
    if (again.status !== 401) return again;
    const err = await failure(again, `${r.method} ${r.path}`, [...secrets(), first, fresh]);
    if (cached?.token === fresh) cached = undefined;
    throw goneError(err.message, 401);
  }

  /** One call of a table endpoint whose only success is `e.ok`. */
  async function json<T>(e: Endpoint<T>, r: Request = {}): Promise<T> {
    const path = pathOf(e, r.params);
    const where = `${e.method} ${path}`;
    const res = await call({
      method: e.method,
      path,
      json: r.json,
      signal: r.signal,
      headers: extraHeaders(r.headers),
    });
    if (res.status !== e.ok) throw await failure(res, where, secrets());
    return parseBody(res, e.response, where);
  }

  function execute(
    req: ExecuteRequest & { stream?: false; download?: false },
    opts?: CallOptions,
  ): Promise<ExecuteResult>;
  function execute(req: ExecuteRequest, opts?: CallOptions): Promise<ExecuteStreamResult>;
  async function execute(req: ExecuteRequest, opts: CallOptions = {}): Promise<ExecuteStreamResult> {
    const e = endpoints.executeModelB;
    const where = `${e.method} ${e.path}`;
    const res = await call({
      method: e.method,
      path: e.path,
      json: { ...req, model: 'B' },
      signal: opts.signal,
      headers: extraHeaders(opts.headers),
    });
    if (res.status === endpoints.executeApprovalRequired.ok) {
      const a = await parseBody(res, endpoints.executeApprovalRequired.response, where);
      return {
        kind: 'approval_required',
        approvalRequestId: a.approvalRequestId,
        expiresAt: a.expiresAt,
        auditId: a.auditId,
      };
    }
    if (res.status < 200 || res.status >= 300) throw await failure(res, where, secrets());
    // A relayed stream carries this header; a provider's non-2xx answer to a streamed call
    // comes back buffered, in the usual envelope.
    if ((req.stream || req.download) && res.headers.get('x-accel-buffering') === 'no' && res.body) {
      return {
        kind: 'stream',
        status: res.status,
        headers: headersOf(res),
        auditId: res.headers.get('x-vlt-audit-id'),
        body: res.body,
      };
    }
    const b = await parseBody(res, e.response, where);
    return { kind: 'result', status: b.status, headers: b.headers, body: b.body, auditId: b.auditId };
  }

  async function getApproval(id: string, opts: CallOptions = {}): Promise<ApprovalView> {
    return (await json(endpoints.getApproval, { params: { id }, signal: opts.signal, headers: opts.headers }))
      .approval;
  }

  async function waitForApproval(id: string, w: WaitOptions = {}): Promise<ApprovalView> {
    const pollMs = w.pollMs ?? 2000;
    const deadline = w.timeoutMs === undefined ? Infinity : Date.now() + w.timeoutMs;
    for (;;) {
      w.signal?.throwIfAborted();
      const approval = await getApproval(id, { signal: w.signal });
      if (approval.status !== 'pending') return approval;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new VaultApprovalError(`approval ${approval.id} is still pending`, {
          status: 0,
          code: 'APPROVAL_WAIT_TIMEOUT',
        });
      }
      await sleep(Math.min(pollMs, left), w.signal);
    }
  }

  return {
    baseUrl,
    agentId: o.agentId,
    execute,
    /** Model A: a short-lived provider access token for the agent to use itself. */
    vend: (target: { connectionId?: string; service?: string }, opts: CallOptions = {}) =>
      json(endpoints.executeModelA, {
        json: { ...target, model: 'A' },
        signal: opts.signal,
        headers: opts.headers,
      }),
    getApproval,
    waitForApproval,
    /** The agent's own approval requests. */
    listApprovals: async (opts: CallOptions = {}) =>
      (await json(endpoints.listApprovals, { signal: opts.signal, headers: opts.headers })).approvals,
    capabilities: (opts: CallOptions = {}) =>
      json(endpoints.capabilities, { signal: opts.signal, headers: opts.headers }),
    /** Agents may list and revoke connections (the routes admit the vault:execute scope). */
    listConnections: async (opts: CallOptions = {}) =>
      (await json(endpoints.listConnections, { signal: opts.signal, headers: opts.headers })).connections,
    revokeConnection: (id: string, opts: CallOptions = {}) =>
      json(endpoints.revokeConnection, { params: { id }, signal: opts.signal, headers: opts.headers }),
    /** Asks an admin to add a capability (an action template) to this agent's policies. */
    requestCapability: (body: CapabilityRequest, opts: CallOptions = {}) =>
      json(endpoints.requestCapability, { json: body, signal: opts.signal, headers: opts.headers }),
    /**
     * Asks a human before acting: the request is checked by the policy and filed for approval
     * even where it would be allowed outright, never sent. Run it later with `approvalId`.
     */
    requestPermissionToAct: (body: PermissionToActRequest, opts: CallOptions = {}) =>
      json(endpoints.requestPermissionToAct, { json: body, signal: opts.signal, headers: opts.headers }),
    listCapabilityRequests: async (opts: CallOptions = {}) =>
      (await json(endpoints.listCapabilityRequests, { signal: opts.signal, headers: opts.headers })).requests,
    resolveCredential: (body: ResolveCredentialRequest, opts: CallOptions = {}) =>
      json(endpoints.resolveCredential, { json: body, signal: opts.signal, headers: opts.headers }),
    /** Where to point a provider's official SDK so its calls go through the vault. */
    llmBaseUrl: (provider: string) => `${baseUrl}/v1/vault/llm/${encodeURIComponent(provider)}`,
    /** A valid access token, for callers that speak to the vault by other means (the LLM proxy). */
    accessToken: () => token(),
  };
}

function headersOf(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    out[k] = v;
  });
  return out;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
