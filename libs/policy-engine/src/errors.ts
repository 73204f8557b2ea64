/**
 * Typed errors with a stable code and the HTTP status a caller should map them to
 * (house style: one error class per failure mode).
 */

/** A stored policy (or part of one) is invalid; the control plane answers 400 with `errors`. */
export class PolicyValidationError extends Error {
  readonly code = 'POLICY_INVALID';
  readonly statusCode = 400;
  constructor(readonly errors: string[]) {
    super(`invalid policy: ${errors.join('; ')}`);
    this.name = 'PolicyValidationError';
  }
}

/**
 * A compiled snapshot could not be hydrated (unknown format, tampered or corrupt). The data
 * plane must treat the policy as missing, i.e. deny, never fall back to something looser.
 */
export class CompiledPolicyError extends Error {
  readonly code = 'COMPILED_POLICY_INVALID';
  readonly statusCode = 503;
  constructor(message: string) {
    super(message);
    this.name = 'CompiledPolicyError';
  }
}

/**
 * A response filter hit one of its memory bounds (an event, line or buffered body too large).
 * The filter fails closed: the stream errors instead of passing unfiltered bytes.
 */
export class ResponseFilterLimitError extends Error {
  readonly code = 'RESPONSE_FILTER_LIMIT';
  readonly statusCode = 502;
  constructor(message: string) {
    super(message);
    this.name = 'ResponseFilterLimitError';
  }
}

/** The response body uses an encoding the filters cannot inspect, while rules apply to it. */
export class ResponseFilterEncodingError extends Error {
  readonly code = 'RESPONSE_FILTER_ENCODING';
  readonly statusCode = 502;
  constructor(message: string) {
    super(message);
    this.name = 'ResponseFilterEncodingError';
  }
}

/**
 * A response that rules apply to cannot be filtered as they require (a media type or payload
 * the filters cannot honour). The caller refuses it (403) rather than pass it unfiltered.
 */
export class ResponseUnfilterableError extends Error {
  readonly code = 'RESPONSE_UNFILTERABLE';
  readonly statusCode = 403;
  constructor(message: string) {
    super(message);
    this.name = 'ResponseUnfilterableError';
  }
}
