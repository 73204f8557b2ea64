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

/**
 * The catalogue: one entry per failure a client may branch on, each with its status at its
 * definition. docs/errors.md is generated from it (`UPDATE_ERROR_DOCS=1 pnpm vitest run
 * libs/service-kit`) and a test keeps the two equal.
 */
export const Errors = {
  // Generic: the request itself.
  badRequest: define('BAD_REQUEST', 400, 'invalid request'),
  unauthorized: define('UNAUTHORIZED', 401, 'missing or invalid credentials'),
  forbidden: define('FORBIDDEN', 403, 'insufficient permission'),
  notFound: define('NOT_FOUND', 404, 'not found'),
  conflict: define('CONFLICT', 409, 'the resource is not in a state that allows this'),
  gone: define('GONE', 410, 'gone'),
  payloadTooLarge: define('PAYLOAD_TOO_LARGE', 413, 'payload too large'),
  unsupportedMediaType: define('UNSUPPORTED_MEDIA_TYPE', 415, 'unsupported content type'),
  rateLimited: define('RATE_LIMITED', 429, 'rate limit exceeded'),
  /** Nobody reads it: the client is gone. 499 keeps it apart from refusals in logs and metrics. */
  clientClosed: define('CLIENT_CLOSED_REQUEST', 499, 'the client closed the request'),
  // Accounts, workspaces, agents.
  emailTaken: define('EMAIL_TAKEN', 409, 'an account with this e-mail already exists'),
  alreadyMember: define('ALREADY_MEMBER', 409, 'already a member of this workspace'),
  lastOwner: define('LAST_OWNER', 409, 'a workspace needs at least one owner'),
  agentDisabled: define('AGENT_DISABLED', 409, 'agent is disabled'),
  // Connections and policies.
  connectionRevoked: define('CONNECTION_REVOKED', 409, 'connection has been revoked'),
  connectionNeedsReauth: define('CONNECTION_NEEDS_REAUTH', 409, 'connection needs reauthentication'),
  policyExists: define('POLICY_EXISTS', 409, 'a policy already binds this agent to this connection'),
  connectionExists: define(
    'CONNECTION_EXISTS',
    409,
    'this workspace already has a connection to this service (one per workspace)',
  ),
  connectionNotReauthable: define(
    'CONNECTION_NOT_REAUTHABLE',
    409,
    'only a connection that needs reauthentication can be reauthorised',
  ),
  permissionRequestPending: define(
    'PERMISSION_REQUEST_PENDING',
    409,
    'this agent already has a pending request for this action',
  ),
  permissionRequestResolved: define(
    'PERMISSION_REQUEST_RESOLVED',
    409,
    'the permission request is no longer pending',
  ),
  oauthAppExists: define(
    'OAUTH_APP_EXISTS',
    409,
    'this workspace already has an OAuth app for this provider',
  ),
  modelNotAvailable: define(
    'MODEL_NOT_AVAILABLE',
    400,
    'this execution model is not available for this connection',
  ),
  // Approvals.
  approvalResolved: define('APPROVAL_RESOLVED', 409, 'the approval request is no longer pending'),
  approvalNotFound: define('APPROVAL_NOT_FOUND', 403, 'approval not found for this agent'),
  approvalPending: define('APPROVAL_PENDING', 403, 'approval is still pending'),
  approvalDenied: define('APPROVAL_DENIED', 403, 'approval was denied'),
  approvalExpired: define('APPROVAL_EXPIRED', 403, 'approval has expired'),
  approvalConsumed: define('APPROVAL_CONSUMED', 409, 'approval has already been used'),
  approvalMismatch: define('APPROVAL_MISMATCH', 403, 'approval was granted for a different request'),
  tooManyPendingApprovals: define(
    'TOO_MANY_PENDING_APPROVALS',
    429,
    'too many approval requests are pending for this agent',
  ),
  // Execution pipeline: one typed error per failure mode.
  policyDenied: define('POLICY_DENIED', 403, 'denied by policy'),
  responseUnfilterable: define(
    'RESPONSE_UNFILTERABLE',
    403,
    'the response cannot be filtered as the policy requires',
  ),
  upstreamTimeout: define('UPSTREAM_TIMEOUT', 502, 'provider request timed out'),
  upstreamUnavailable: define('UPSTREAM_UNAVAILABLE', 502, 'provider request failed'),
  upstreamBadResponse: define('UPSTREAM_BAD_RESPONSE', 502, 'provider sent an invalid response'),
  upstreamBusy: define(
    'UPSTREAM_BUSY',
    503,
    'too many calls are open to this provider from this gateway; retry shortly',
  ),
  largeBodiesBusy: define(
    'LARGE_BODIES_BUSY',
    503,
    'this gateway holds as many large requests as it may at once; retry shortly',
  ),
  unavailable: define('SERVICE_UNAVAILABLE', 503, 'service temporarily unavailable'),
} as const;

export const errorCatalogue: ReadonlyArray<{ code: string; status: number; meaning: string }> = Object.values(
  Errors,
).map((f) => {
  const e = f();
  return { code: e.code, status: e.statusCode, meaning: e.message };
});
