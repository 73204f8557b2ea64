/**
 * Typed errors of the vault's API. Each carries what a caller branches on (status, stable code,
 * audit id, retry delay) and a message made from the server's `error` string, never from the
 * request: credentials the client holds are scrubbed from every message it builds.
 */
import { ErrorResponse } from './contracts.js';

export interface VaultErrorInit {
  status: number;
  code?: string | undefined;
  auditId?: string | undefined;
  retryAfter?: number | undefined;
  details?: { path: string; message: string }[] | undefined;
}

export class VaultError extends Error {
  override name = 'VaultError';
  /** HTTP status; 0 when the SDK refused before sending anything. */
  readonly status: number;
  /** The server's stable code (`POLICY_DENIED`, …) or the SDK's own (`INVALID_ARGUMENT`, …). */
  readonly code: string | undefined;
  readonly auditId: string | undefined;
  /** Seconds to wait before trying again, when the server said so. */
  readonly retryAfter: number | undefined;
  readonly details: { path: string; message: string }[] | undefined;

  constructor(message: string, init: VaultErrorInit) {
    super(message);
    this.status = init.status;
    this.code = init.code;
    this.auditId = init.auditId;
    this.retryAfter = init.retryAfter;
    this.details = init.details;
  }
}

/** Credentials refused even after one fresh token, or refused outright (bootstrap, PAT). */
export class VaultAuthError extends VaultError {
  override name = 'VaultAuthError';
}

export class VaultPolicyDeniedError extends VaultError {
  override name = 'VaultPolicyDeniedError';
}

export class VaultRateLimitedError extends VaultError {
  override name = 'VaultRateLimitedError';
}

/** Approval-related refusals (pending, denied, expired, consumed, mismatched) and wait timeouts. */
export class VaultApprovalError extends VaultError {
  override name = 'VaultApprovalError';
}

/** The SDK refused the call before sending it (bad argument). */
export class VaultUsageError extends VaultError {
  override name = 'VaultUsageError';
}

const PREVIEW_CHARS = 200;

/** Replaces every known secret in `text`; short strings are skipped so ordinary words survive. */
export function scrub(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 8) out = out.split(s).join('[redacted]');
  return out;
}

function retryAfterHeader(headers: Headers): number | undefined {
  const v = headers.get('retry-after');
  if (v === null) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** Builds the typed error for a non-success response from its status, code and body text. */
export function errorFromResponse(
  res: { status: number; headers: Headers },
  text: string,
  where: string,
  secrets: readonly (string | undefined)[],
): VaultError {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const parsed = ErrorResponse.safeParse(json);
  if (!parsed.success) {
    const preview = scrub(text, secrets).replace(/\s+/g, ' ').trim().slice(0, PREVIEW_CHARS);
    return new VaultError(`HTTP ${res.status} from ${where}: ${preview || '(empty body)'}`, {
      status: res.status,
      retryAfter: retryAfterHeader(res.headers),
    });
  }
  const b = parsed.data;
  const init: VaultErrorInit = {
    status: res.status,
    code: b.code,
    auditId: b.auditId,
    retryAfter: b.retryAfter ?? retryAfterHeader(res.headers),
    details: b.details,
  };
  const message = scrub(b.error, secrets);
  return classify(message, init);
}

export function classify(message: string, init: VaultErrorInit): VaultError {
  if (init.status === 401) return new VaultAuthError(message, init);
  if (init.status === 429) return new VaultRateLimitedError(message, init);
  if (init.code === 'POLICY_DENIED') return new VaultPolicyDeniedError(message, init);
  if (init.code?.startsWith('APPROVAL_') && init.status >= 400 && init.status < 500) {
    return new VaultApprovalError(message, init);
  }
  return new VaultError(message, init);
}
