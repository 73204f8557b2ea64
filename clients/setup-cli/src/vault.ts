/**
 * The vault calls vlt-setup makes, all through @vlt/sdk (enrolment, tokens, capabilities,
 * permission requests, revocation) except `GET /health`, which the SDK does not cover. Every
 * request runs under a deadline: a vault that accepts the connection and never answers must
 * not hang the CLI.
 */
import {
  VaultAuthError,
  VaultError,
  bootstrapAgent,
  createAgentClient,
  generateAgentKeys,
  type AgentClient,
  type FetchLike,
} from '@vlt/sdk';
import { SetupCliError } from './errors.js';
import { encodeAgentKey } from './keys-store.js';

/** `verify`'s health check deadline (interface spec: five seconds). */
export const HEALTH_TIMEOUT_MS = 5_000;
/** Every other request: bootstrap, token exchange, capabilities. */
export const REQUEST_TIMEOUT_MS = 15_000;

/** Statuses a Response may not be built with a body for (fetch spec). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

class TimeoutError extends Error {
  override name = 'TimeoutError';
}

/** `fetchFn` with a deadline on each request (headers and body), combined with the caller's signal. */
export function withDeadline(fetchFn: FetchLike, ms: number): FetchLike {
  return async (input, init) => {
    const timer = AbortSignal.timeout(ms);
    const signal = init?.signal ? AbortSignal.any([init.signal, timer]) : timer;
    try {
      const res = await fetchFn(input, { ...init, signal });
      // Read the body under the same deadline: a server may send headers and then stall.
      const body = await res.arrayBuffer();
      return new Response(NULL_BODY_STATUSES.has(res.status) ? null : body, {
        status: res.status,
        statusText: res.statusText,
        headers: res.headers,
      });
    } catch (err) {
      if (timer.aborted) throw new TimeoutError(`no answer within ${ms / 1000} s`);
      throw err;
    }
  };
}

/** A network-level failure (refused, unresolvable, timed out) as one readable phrase. */
export function networkReason(err: unknown): string | undefined {
  if (err instanceof TimeoutError) return err.message;
  if (err instanceof TypeError && err.message === 'fetch failed') {
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const code = typeof cause?.code === 'string' ? cause.code : undefined;
    return code ? `connection failed (${code})` : 'connection failed';
  }
  return undefined;
}

/** Any failure of a vault call as a SetupCliError with a message fit for the terminal. */
export function vaultFailure(err: unknown, baseUrl: string, what: string): SetupCliError {
  if (err instanceof SetupCliError) return err;
  const net = networkReason(err);
  if (net) {
    return new SetupCliError(`cannot reach the vault at ${baseUrl} to ${what}: ${net}`, {
      hint: 'check --base-url and that the vault is running and reachable from this machine',
    });
  }
  if (err instanceof VaultError) {
    return new SetupCliError(
      `the vault refused to ${what}: ${err.message}${err.code ? ` (${err.code})` : ''}`,
    );
  }
  return new SetupCliError(`could not ${what}: ${err instanceof Error ? err.message : String(err)}`);
}

export interface Enrolled {
  agentId: string;
  agentName: string;
  workspaceId: string;
  /** The private key in the plugin's encoding (base64 JWK): for the key file only. */
  encodedKey: string;
  /** The same key as PKCS8 PEM, for the SDK client. */
  privateKeyPem: string;
}

/**
 * Generates a key pair and enrols its public half with the bootstrap secret. The secret is
 * used once by the vault: on failure nothing has been enrolled and nothing is written.
 */
export async function enrol(o: {
  baseUrl: string;
  bootstrapSecret: string;
  fetch: FetchLike;
}): Promise<Enrolled> {
  const keys = await generateAgentKeys();
  let boot;
  try {
    boot = await bootstrapAgent({
      baseUrl: o.baseUrl,
      bootstrapSecret: o.bootstrapSecret,
      publicJwk: keys.publicJwk,
      fetch: withDeadline(o.fetch, REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    if (err instanceof VaultAuthError) {
      throw new SetupCliError(`the vault refused the bootstrap secret: ${err.message}`, {
        hint: 'a bootstrap secret works once and expires: ask a workspace admin for a new one for this agent',
      });
    }
    throw vaultFailure(err, o.baseUrl, 'enrol the agent');
  }
  return {
    agentId: boot.agentId,
    agentName: boot.name,
    workspaceId: boot.workspaceId,
    encodedKey: encodeAgentKey(keys.privateKeyPem),
    privateKeyPem: keys.privateKeyPem,
  };
}

export function agentClient(o: {
  baseUrl: string;
  agentId: string;
  privateKeyPem: string;
  tokenAudience: string | undefined;
  fetch: FetchLike;
  timeoutMs?: number;
}): AgentClient {
  return createAgentClient({
    baseUrl: o.baseUrl,
    agentId: o.agentId,
    privateKey: o.privateKeyPem,
    ...(o.tokenAudience ? { audience: o.tokenAudience } : {}),
    fetch: withDeadline(o.fetch, o.timeoutMs ?? REQUEST_TIMEOUT_MS),
  });
}

/** `GET /health`: undefined when the vault answers 200, else why not. */
export async function healthProblem(baseUrl: string, fetchFn: FetchLike): Promise<string | undefined> {
  try {
    const res = await withDeadline(fetchFn, HEALTH_TIMEOUT_MS)(`${baseUrl}/health`, {
      method: 'GET',
      headers: { accept: 'application/json' },
    });
    return res.status === 200 ? undefined : `GET /health answered HTTP ${res.status}`;
  } catch (err) {
    return networkReason(err) ?? (err instanceof Error ? err.message : String(err));
  }
}
