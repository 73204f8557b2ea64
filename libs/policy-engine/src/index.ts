/**
 * @vlt/policy-engine: pure policy decisions for the data plane and write-time validation for
 * the control plane. No I/O, no module-level state. See docs/policy-engine.md.
 */
export { compilePolicy, hydratePolicy, planResponse } from './compile.js';
export type { ConnectionInfo, PolicyRuntime } from './compile.js';

export {
  validatePolicyDocument,
  validatePolicyRules,
  validateAllowlists,
  validateTimeWindows,
  validateProviderConstraints,
  validateContactFields,
} from './validate.js';
export {
  CONTACT_FIELD_CLASSES,
  contactFieldClass,
  fieldStepUpRefusal,
  isSingleContactRead,
  stripContactFields,
} from './contact-fields.js';
export type { ContactFieldClass, FieldStepUpRefusal } from './contact-fields.js';

export {
  evaluateExecution,
  evaluatePrepared,
  evaluateTokenVending,
  inspectedBody,
  preparedBodySize,
  prepareExecution,
} from './pipeline.js';
export type {
  ApprovalStatus,
  ExecutionAudit,
  ExecutionContext,
  ExecutionDecision,
  ExecutionRequest,
  ExecutionTarget,
  PipelineStep,
  PreparedExecution,
  TokenVendingDecision,
} from './pipeline.js';

export type { InspectedBody } from './provider-constraints.js';

export { jsonBoundsViolation, REQUEST_JSON_BOUNDS } from './json-bounds.js';
export type { JsonBounds } from './json-bounds.js';

export { canonicalizeTarget } from './url-canonicalizer.js';
export type { CanonicalTarget, CanonicalizeFailure, HostKind } from './url-canonicalizer.js';

export { matchAllowlist } from './allowlist.js';
export { readBatch } from './batch.js';
export type { BatchOperation, BatchReading } from './batch.js';
export { isBlockedAddress, blockedAddressReason, validateCidrList } from './ssrf.js';
export { requestFingerprint } from './fingerprint.js';
export type { FingerprintInput } from './fingerprint.js';
export { isWithinTimeWindows } from './time-windows.js';
export { decideAccess, isWriteMethod } from './step-up.js';
export type { AccessDecision, AccessInput } from './step-up.js';
export { sanitizeRequestHeaders } from './request-headers.js';

export {
  filterResponseBody,
  createResponseFilterStream,
  createResponseFilterNodeStream,
  createResponseFilterCore,
  responseFilterability,
} from './response-body.js';
export type { NodeFilterOptions, ResponseFilterability, ResponseRoute } from './response-body.js';
export type { ResponsePlan } from './response-filter.js';
export { MAX_JSON_DEPTH } from './response-filter.js';
export { classifyContentType } from './content-type.js';
export type { MediaType } from './content-type.js';
export { chainFilterCores, DEFAULT_STREAM_LIMITS, toNodeTransform } from './stream-filters.js';
export type { ResponseFilterCore, StreamFilterLimits } from './stream-filters.js';

export {
  PolicyValidationError,
  CompiledPolicyError,
  ResponseFilterLimitError,
  ResponseFilterEncodingError,
  ResponseUnfilterableError,
} from './errors.js';
export {
  createLlmStreamRedaction,
  createLlmStreamRedactionCore,
  holdBackFrom,
  MAX_HELD,
} from './llm-stream-redaction.js';
export type { LlmStreamProtocol } from './llm-stream-redaction.js';
