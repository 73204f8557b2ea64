/**
 * The plugin's typed errors. A tool throws one of them; the host shows its message to the
 * model, so every message says what happened and what to do, and none carries a token, a key
 * or a provider secret (messages are built from the vault's `error` string, scrubbed, and from
 * fields the plugin chose — never from request headers or bodies).
 *
 * Mapping of the vault's answers (spec, "Client plugin mapping"):
 * - a `blocked` body (and the vault's 429 rate-limit refusals)  → VaultBlockedError
 * - a 403 that is not about an approval                         → VaultPolicyDeniedError
 * - a 401 after one token refresh and one retry                  → VaultReenrolmentError
 * - a body that is not JSON                                      → VaultInvalidResponseError
 */
import { VaultAuthError, VaultError, VaultRateLimitedError, VaultUsageError } from '@vlt/sdk';
import { scrub } from './secret.js';

export type VaultPluginErrorKind =
  | 'config'
  | 'invalid_params'
  | 'blocked'
  | 'policy_denied'
  | 'reenrolment_required'
  | 'invalid_response'
  | 'approval'
  | 'download'
  | 'vault';

export interface VaultPluginErrorInit {
  status?: number | undefined;
  code?: string | undefined;
  auditId?: string | undefined;
  retryAfter?: number | undefined;
}

export class VaultPluginError extends Error {
  override name = 'VaultPluginError';
  readonly kind: VaultPluginErrorKind;
  /** The vault's HTTP status; 0 when the plugin refused before sending anything. */
  readonly status: number;
  /** The vault's stable code (`POLICY_DENIED`, …) or the plugin's own. */
  readonly code: string | undefined;
  readonly auditId: string | undefined;
  readonly retryAfter: number | undefined;

  constructor(kind: VaultPluginErrorKind, message: string, init: VaultPluginErrorInit = {}) {
    super(message);
    this.kind = kind;
    this.status = init.status ?? 0;
    this.code = init.code;
    this.auditId = init.auditId;
    this.retryAfter = init.retryAfter;
  }
}

/** The plugin configuration is unusable; the message lists every problem by field. */
export class ConfigError extends VaultPluginError {
  override name = 'ConfigError';
  constructor(message: string) {
    super('config', message, { code: 'INVALID_CONFIG' });
  }
}

/** A tool was called with parameters its schema refuses; nothing was sent. */
export class VaultParamsError extends VaultPluginError {
  override name = 'VaultParamsError';
  constructor(message: string) {
    super('invalid_params', message, { code: 'INVALID_PARAMS' });
  }
}

/** The vault's allowlist or rate limit stopped the request before it reached the provider. */
export class VaultBlockedError extends VaultPluginError {
  override name = 'VaultBlockedError';
}

/** An explicit policy denial (403): retrying the same request will not help. */
export class VaultPolicyDeniedError extends VaultPluginError {
  override name = 'VaultPolicyDeniedError';
}

/** The vault refuses this agent even with a fresh token: the enrolment itself is broken. */
export class VaultReenrolmentError extends VaultPluginError {
  override name = 'VaultReenrolmentError';
}

/** The vault (or something in front of it) answered with a body that is not the expected JSON. */
export class VaultInvalidResponseError extends VaultPluginError {
  override name = 'VaultInvalidResponseError';
}

/** An approval ended other than approved (denied, expired, consumed), or the wait timed out. */
export class VaultApprovalError extends VaultPluginError {
  override name = 'VaultApprovalError';
  /** True when the plugin stopped waiting; the approval itself may still be decided later. */
  readonly timedOut: boolean;
  constructor(message: string, init: VaultPluginErrorInit & { timedOut?: boolean } = {}) {
    super('approval', message, init);
    this.timedOut = init.timedOut ?? false;
  }
}

/** A download could not be completed; no partial file is left behind. */
export class VaultDownloadError extends VaultPluginError {
  override name = 'VaultDownloadError';
}

/** What the plugin's transport saw in the response a failed call got (see transport.ts). */
export interface ResponseObservation {
  /** The body carried a `blocked` field. */
  blocked?: { reason: string | undefined; retryAfter: number | undefined };
  /** A short, scrubbed preview of a body that is not JSON. */
  preview?: string;
  status?: number;
}

export type AuthMode = 'agent' | 'bearer';

const PREVIEW_CHARS = 200;

/** A short single-line preview of a response body, with credentials removed. */
export function bodyPreview(text: string, secrets: readonly (string | undefined)[] = []): string {
  return scrub(text, secrets).replace(/\s+/g, ' ').trim().slice(0, PREVIEW_CHARS);
}

function initOf(e: VaultError): VaultPluginErrorInit {
  return { status: e.status, code: e.code, auditId: e.auditId, retryAfter: e.retryAfter };
}

function reenrolmentMessage(mode: AuthMode, agentId: string | undefined): string {
  if (mode === 'bearer') {
    return (
      'the vault refused the configured bearer token twice (once more after a refresh): it is revoked or ' +
      'expired. This agent needs a new bootstrap secret from a workspace admin (re-run the setup CLI), ' +
      'or a new token in the plugin configuration'
    );
  }
  return (
    `the vault refused agent ${agentId ?? '(unknown)'} even after one token refresh and one retry: the ` +
    'agent was disabled, re-keyed or deleted, so this enrolment is broken and needs a new bootstrap ' +
    'secret from a workspace admin (re-run the setup CLI with --bootstrap-secret)'
  );
}

/**
 * Turns whatever a vault call threw into the plugin's typed error. `observed` is what the
 * transport saw in the same call's response; it decides the cases the SDK's error cannot.
 */
export function toPluginError(
  err: unknown,
  observed: ResponseObservation,
  auth: { mode: AuthMode; agentId?: string | undefined },
): Error {
  if (err instanceof VaultPluginError) return err;
  if (!(err instanceof VaultError)) {
    // fetch's network failure: its cause may quote a URL with a query, so only its kind is kept.
    if (err instanceof TypeError) {
      return new VaultPluginError('vault', 'the vault could not be reached (network error)', {
        code: 'UNREACHABLE',
      });
    }
    // Aborts and timeouts stay what they are: the host recognises them.
    return err instanceof Error ? err : new VaultPluginError('vault', 'the vault call failed');
  }
  const message = scrub(err.message);
  if (observed.blocked) {
    const reason = observed.blocked.reason ? `: ${scrub(observed.blocked.reason)}` : '';
    return new VaultBlockedError(
      'blocked',
      `the vault blocked the request (allowlist or rate limit)${reason}; it did not reach the provider`,
      { ...initOf(err), retryAfter: observed.blocked.retryAfter ?? err.retryAfter },
    );
  }
  if (err instanceof VaultAuthError) {
    return new VaultReenrolmentError('reenrolment_required', reenrolmentMessage(auth.mode, auth.agentId), {
      ...initOf(err),
      code: 'REENROLMENT_REQUIRED',
    });
  }
  if (err instanceof VaultRateLimitedError) {
    const wait = err.retryAfter !== undefined ? `; retry after ${err.retryAfter} s` : '';
    return new VaultBlockedError(
      'blocked',
      `the vault blocked the request by its rate limit (${message})${wait}`,
      initOf(err),
    );
  }
  if (err.code === 'INVALID_RESPONSE' || (err.code === undefined && observed.preview !== undefined)) {
    const what =
      observed.preview !== undefined
        ? `a body that is not JSON: ${observed.preview}`
        : `a body that is not what the API defines (${message})`;
    return new VaultInvalidResponseError(
      'invalid_response',
      `the vault answered HTTP ${err.status} with ${what}`,
      initOf(err),
    );
  }
  if (err.status === 403 && !err.code?.startsWith('APPROVAL_')) {
    return new VaultPolicyDeniedError(
      'policy_denied',
      `the vault's policy denies this request (${message}); do not retry it unchanged`,
      initOf(err),
    );
  }
  if (err.code?.startsWith('APPROVAL_')) return new VaultApprovalError(message, initOf(err));
  if (err instanceof VaultUsageError) return new VaultParamsError(message);
  return new VaultPluginError('vault', message, initOf(err));
}
