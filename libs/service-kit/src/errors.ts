/**
 * Typed errors with a stable code and an HTTP status, kept in one catalogue and mapped to
 * responses by one handler (error-handler.ts). Messages are written for the caller and must
 * never carry secret material.
 */
export class AppError extends Error {
  override name = 'AppError';
  constructor(
    readonly code: string,
    readonly statusCode: number,
    message: string,
    readonly extra: { auditId?: string; retryAfter?: number; headers?: Record<string, string> } = {},
  ) {
    super(message);
  }
}

type Factory = (message?: string, extra?: AppError['extra']) => AppError;
function define(code: string, status: number, fallback: string): Factory {
  return (message, extra) => new AppError(code, status, message ?? fallback, extra);
}

/** The catalogue. docs/errors.md lists the same codes. */
export const Errors = {
  badRequest: define('BAD_REQUEST', 400, 'invalid request'),
  unauthorized: define('UNAUTHORIZED', 401, 'missing or invalid credentials'),
  forbidden: define('FORBIDDEN', 403, 'insufficient permission'),
  notFound: define('NOT_FOUND', 404, 'not found'),
  conflict: define('CONFLICT', 409, 'conflict'),
  gone: define('GONE', 410, 'gone'),
  payloadTooLarge: define('PAYLOAD_TOO_LARGE', 413, 'payload too large'),
  rateLimited: define('RATE_LIMITED', 429, 'rate limit exceeded'),
  // Execution pipeline: one typed error per failure mode.
  policyDenied: define('POLICY_DENIED', 403, 'denied by policy'),
  upstreamTimeout: define('UPSTREAM_TIMEOUT', 502, 'provider request timed out'),
  upstreamUnavailable: define('UPSTREAM_UNAVAILABLE', 502, 'provider request failed'),
  upstreamBadResponse: define('UPSTREAM_BAD_RESPONSE', 502, 'provider sent an invalid response'),
  unavailable: define('SERVICE_UNAVAILABLE', 503, 'service temporarily unavailable'),
} as const;

export const errorCatalogue: ReadonlyArray<{ code: string; status: number; meaning: string }> = Object.values(
  Errors,
).map((f) => {
  const e = f();
  return { code: e.code, status: e.statusCode, meaning: e.message };
});
