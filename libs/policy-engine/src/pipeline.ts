/**
 * The Model B security pipeline as one pure function, in the spec's order:
 *   (request validation, 400) → 1 policy allows the model → 2 time window → 3 allowlist →
 *   4 SSRF → 5 provider constraints → 6 request rules and access mode → 7 step-up approval →
 *   8 rate limit → 9 payload size.
 * The first step that refuses decides. Step 7 also refuses `requestFullFields` where no approval
 * could grant it (not a contacts policy of the balanced tier with field step-up, not a single
 * contact; ADR 0045); an allowed redeemed field step-up comes back as `fullFields`. The function
 * does no I/O: when the SSRF step needs DNS answers it returns `needs_resolution`, and the caller
 * resolves the canonical host and calls again with `resolvedAddresses` (then connects only to
 * those addresses). A caller that asks more than once reads the request once with
 * `prepareExecution` and asks `evaluatePrepared` each time.
 */
import type { AllowedModel, HttpMethod } from '@vlt/contracts';
import { HttpMethod as HttpMethodSchema } from '@vlt/contracts';
import { matchAllowlist } from './allowlist.js';
import { isBatchRequest, readBatch, type BatchOperation, type BatchReading } from './batch.js';
import type { PolicyRuntime } from './compile.js';
import { fieldStepUpRefusal } from './contact-fields.js';
import { requestFingerprint } from './fingerprint.js';
import { checkProviderConstraints, inboundFilterFor } from './provider-constraints.js';
import type { InspectedBody } from './provider-constraints.js';
import { prepareRequestBody, type PreparedBody } from './request-body.js';
import { headerValue, sanitizeRequestHeaders } from './request-headers.js';
import { evaluateRequestRules } from './request-rules.js';
import { selectResponseRules, type RuntimeResponseRule } from './response-filter.js';
import { blockedAddressReason } from './ssrf.js';
import { decideAccess, type AccessDecision } from './step-up.js';
import type { CanonicalTarget } from './url-canonicalizer.js';
import { canonicalizeTarget } from './url-canonicalizer.js';

export interface ExecutionRequest {
  method: string;
  url: string;
  query?: Record<string, string>;
  headers?: Record<string, string | string[]>;
  body?: unknown;
  requestFullFields?: boolean;
  /** Client-plugin metadata (tool, action, channel). Untrusted; not used for decisions. */
  context?: Record<string, unknown>;
}

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'consumed' | 'not_found';

export interface ExecutionContext {
  now: Date;
  /** Requests counted for this agent+connection pair in the hour before `now`. */
  requestsInLastHour: number;
  /** When the oldest of those requests happened; makes `retryAfter` exact. */
  oldestRequestInWindowAt?: Date;
  /** DNS answers for the canonical host, from the caller's resolver. */
  resolvedAddresses?: string[];
  ssrfAllowCidrs: readonly string[];
  /** Present when the request carries an approval id. */
  approval?: { status: ApprovalStatus; fingerprintMatches: boolean; id?: string };
  model: AllowedModel;
  /**
   * The agent asks a human before acting (its `request_permission` tool): a request the policy
   * would allow outright is filed for approval all the same. Denials still deny.
   */
  permissionRequest?: boolean;
}

export type PipelineStep =
  | 'model'
  | 'time_window'
  | 'allowlist'
  | 'ssrf'
  | 'provider_constraints'
  | 'request_rules'
  | 'step_up'
  | 'rate_limit'
  | 'payload_size';

/** Audit metadata; keys match the spec's observed ones where they overlap. */
export interface ExecutionAudit {
  model: AllowedModel;
  method: string;
  host?: string;
  path?: string;
  provider: string;
  service: string;
  policyId: string;
  policyVersion: number;
  step?: PipelineStep;
  code?: string;
  allowlistEntry?: number;
  rule?: { index: number; label: string; action: string };
  /** The operation of a batch that decided (its `id`), when one did (ADR 0101). */
  batchOperation?: string;
  stepUp?: string;
  approvalId?: string;
  dataSize: number;
}

/** Where the call goes (canonical URL parts; response rules match `matchPath` too), and what it sends. */
export interface ExecutionTarget extends Omit<CanonicalTarget, 'ok' | 'url'> {
  method: HttpMethod;
  /** Headers to forward (credentials, hop-by-hop and routing headers removed). */
  headers: Record<string, string>;
  /** Exactly the body to send, or undefined for none. */
  body: string | Uint8Array | undefined;
  /** Vetted addresses: connect only to one of these (pins DNS against rebinding). */
  addresses: string[];
}

export type ExecutionDecision =
  | {
      outcome: 'allow';
      target: ExecutionTarget;
      approvalUsed: boolean;
      /**
       * A redeemed contact field step-up (ADR 0045): the response keeps PII fields. Pass it on as
       * the response route's `fullFields`.
       */
      fullFields: boolean;
      audit: ExecutionAudit;
    }
  | {
      outcome: 'deny';
      status: 403 | 413 | 429;
      code: string;
      reason: string;
      step: PipelineStep;
      retryAfter?: number;
      audit: ExecutionAudit;
    }
  | { outcome: 'needs_resolution'; host: string; port: number }
  | {
      outcome: 'require_approval';
      fingerprint: string;
      /** The canonical URL that would be sent (query merged): what a reviewer must see. */
      href: string;
      code: string;
      reason: string;
      audit: ExecutionAudit;
    }
  | { outcome: 'bad_request'; status: 400; reason: string };

const METHODS: ReadonlySet<string> = new Set(HttpMethodSchema.options);
const NO_RULES: ReadonlySet<RuntimeResponseRule> = new Set();

function badRequest(reason: string): ExecutionDecision {
  return { outcome: 'bad_request', status: 400, reason };
}

/** Seconds until the oldest counted request leaves the one-hour window (3600 when unknown). */
function retryAfterSeconds(now: Date, oldestRequestInWindowAt: Date | undefined): number {
  const oldest = oldestRequestInWindowAt?.getTime();
  if (oldest === undefined || Number.isNaN(oldest)) return 3600;
  return Math.min(3600, Math.max(1, Math.ceil((oldest + 3_600_000 - now.getTime()) / 1000)));
}

function denial(
  audit: ExecutionAudit,
  step: PipelineStep,
  code: string,
  reason: string,
  status: 403 | 413 | 429,
  retryAfter: number | undefined,
): ExecutionDecision {
  return {
    outcome: 'deny',
    status,
    code,
    reason,
    step,
    ...(retryAfter === undefined ? {} : { retryAfter }),
    audit: { ...audit, step, code },
  };
}

function isStringRecord(v: unknown): v is Record<string, string> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  return Object.values(v).every((x) => typeof x === 'string');
}

/**
 * A request checked and read once, for one policy: the caller may ask the pipeline about it more
 * than once (again with DNS answers, again as if approved), and a large body is then bounded,
 * parsed and scanned for duplicate keys once, not at every asking.
 */
export interface PreparedExecution {
  readonly policy: PolicyRuntime;
  readonly request: ExecutionRequest;
  /** Why the request is malformed (400), or what was read from it. */
  readonly read:
    | { ok: false; reason: string }
    | {
        ok: true;
        method: HttpMethod;
        headers: Record<string, string>;
        body: Extract<PreparedBody, { ok: true }>;
        /** Canonicalised now, judged at step 3 (so a malformed URL does not outrank steps 1 and 2). */
        target: ReturnType<typeof canonicalizeTarget>;
        /** The operations a batch request carries, judged one by one (ADR 0101). */
        batch: BatchReading;
      };
}

export function prepareExecution(req: ExecutionRequest, policy: PolicyRuntime): PreparedExecution {
  const fail = (reason: string): PreparedExecution => ({ policy, request: req, read: { ok: false, reason } });
  // Request validation (400) comes before any policy step.
  const method = typeof req.method === 'string' ? req.method.toUpperCase() : '';
  if (!METHODS.has(method)) return fail('method must be one of GET, POST, PUT, DELETE, PATCH');
  if (typeof req.url !== 'string' || req.url === '') return fail('url is required');
  if (req.query !== undefined && !isStringRecord(req.query)) return fail('query must map names to strings');
  const headers = sanitizeRequestHeaders(req.headers);
  if (!headers.ok) return fail(headers.reason);
  const target = canonicalizeTarget(req.url, req.query);
  const provider = policy.compiled.provider;
  // A batch's operations are judged from its body, so it is read as strictly as a body rules read.
  const strict = policy.readsBody || (target.ok && isBatchRequest(provider, method, target.matchPath));
  const body = prepareRequestBody(req.body, headerValue(headers.headers, 'content-type'), strict);
  if (!body.ok) return fail(body.reason);
  return {
    policy,
    request: req,
    read: {
      ok: true,
      method: method as HttpMethod,
      headers: headers.headers,
      body,
      target,
      batch: target.ok ? readBatch(provider, method, target, body.inspected) : { kind: 'not_a_batch' },
    },
  };
}

/** The body as the rules read it; undefined for a malformed request. */
export function inspectedBody(prepared: PreparedExecution): InspectedBody | undefined {
  return prepared.read.ok ? prepared.read.body.inspected : undefined;
}

/** The size in bytes of the body as it will be sent (as `maxPayloadSizeBytes` measures it). */
export function preparedBodySize(prepared: PreparedExecution): number {
  return prepared.read.ok ? prepared.read.body.size : 0;
}

export function evaluateExecution(
  req: ExecutionRequest,
  policy: PolicyRuntime,
  ctx: ExecutionContext,
): ExecutionDecision {
  return evaluatePrepared(prepareExecution(req, policy), ctx);
}

export function evaluatePrepared(prepared: PreparedExecution, ctx: ExecutionContext): ExecutionDecision {
  const { policy, request: req, read } = prepared;
  if (!read.ok) return badRequest(read.reason);
  const { method, body, headers } = read;

  const c = policy.compiled;
  const audit: ExecutionAudit = {
    model: ctx.model,
    method,
    provider: c.provider,
    service: c.service,
    policyId: c.policyId,
    policyVersion: c.version,
    dataSize: body.size,
  };
  const deny = (
    step: PipelineStep,
    code: string,
    reason: string,
    status: 403 | 413 | 429 = 403,
    retryAfter?: number,
  ) => denial(audit, step, code, reason, status, retryAfter);

  // 1. The policy must allow this execution model.
  if (!policy.allowedModels.has(ctx.model)) {
    return deny('model', 'model_not_allowed', `the policy does not allow model ${ctx.model}`);
  }

  // 2. Time windows.
  if (!policy.timeWindows.isOpen(ctx.now)) {
    return deny('time_window', 'outside_time_window', 'outside the allowed time windows');
  }

  // 3. Allowlist on the canonical target (the URL matched is the URL sent).
  const target = read.target;
  if (!target.ok) {
    if (!target.refused) return badRequest(`invalid url: ${target.reason}`);
    return deny('allowlist', 'url_refused', `url refused: ${target.reason}`);
  }
  audit.host = target.host;
  audit.path = target.path;
  const entry = matchAllowlist(policy.allowlists, method, target);
  if (!entry) return deny('allowlist', 'not_allowlisted', 'no allowlist entry matches this method and URL');
  audit.allowlistEntry = entry.index;
  // Each operation of a batch must be allowed as a request of its own would be (ADR 0101).
  const batch = read.batch;
  if (batch.kind === 'refused') return deny('allowlist', 'batch_refused', batch.reason);
  const operations = batch.kind === 'batch' ? batch.operations : [];
  for (const [i, op] of operations.entries()) {
    // The operations of an LLM batch share one target: it is looked up once.
    if (sharesRoute(operations[i - 1], op)) continue;
    if (!matchAllowlist(policy.allowlists, op.method, op.target)) {
      audit.batchOperation = op.id;
      return deny(
        'allowlist',
        'not_allowlisted',
        `batch request ${op.id}: no allowlist entry matches this method and URL`,
      );
    }
  }

  // 4. SSRF: literal IPs are checked as they are; names need the caller's DNS answers.
  let addresses: string[];
  if (target.hostKind !== 'domain') {
    addresses = [target.host];
  } else if (ctx.resolvedAddresses === undefined) {
    return { outcome: 'needs_resolution', host: target.host, port: target.port };
  } else {
    addresses = [...ctx.resolvedAddresses];
    if (addresses.length === 0)
      return deny('ssrf', 'no_addresses', 'the host did not resolve to any address');
  }
  for (const address of addresses) {
    const blocked = blockedAddressReason(address, ctx.ssrfAllowCidrs);
    if (blocked !== null) {
      return deny('ssrf', 'blocked_address', `the host resolves to a blocked address (${blocked})`);
    }
  }

  // 5. Provider constraints.
  const constraint = checkProviderConstraints(policy.providerConstraints, target, body.inspected);
  if (!constraint.ok) return deny('provider_constraints', 'provider_constraint', constraint.reason);

  // 6. Request rules (first match wins) and the access mode.
  const rule = evaluateRequestRules(policy.requestRules, {
    method,
    path: target.matchPath,
    body: body.inspected,
  });
  if (rule) audit.rule = { index: rule.index, label: rule.label, action: rule.action };
  let policyAccess = decideAccess({
    method,
    ruleAction: rule ? rule.action : null,
    defaultMode: c.defaultMode,
    stepUpApproval: c.stepUpApproval,
    requestFullFields: req.requestFullFields === true,
  });
  // A batch is as strict as its strictest operation: a denied one denies it, one that needs a
  // reviewer holds the whole batch (the approval's fingerprint binds every operation).
  let leftBehind: string | null = null;
  // The response rules that guard where the answers come back, found once for all operations;
  // what each operation's own path would need, once per route (an LLM batch has one).
  const guarding: ReadonlySet<RuntimeResponseRule> =
    batch.kind === 'batch' ? new Set(selectResponseRules(policy.responseRules, batch.answersAt)) : NO_RULES;
  let judged: { op: BatchOperation; why: string | null } | undefined;
  const leftBehindOf = (op: BatchOperation): string | null => {
    if (!sharesRoute(judged?.op, op)) judged = { op, why: responseRulesLeftBehind(policy, guarding, op) };
    return judged!.why;
  };
  for (const op of policyAccess.kind === 'deny' ? [] : operations) {
    const opRule = evaluateRequestRules(policy.requestRules, {
      method: op.method,
      path: op.target.matchPath,
      body: op.body,
    });
    const opAccess = decideAccess({
      method: op.method,
      ruleAction: opRule ? opRule.action : null,
      defaultMode: c.defaultMode,
      stepUpApproval: c.stepUpApproval,
      requestFullFields: false,
    });
    const unguarded = opAccess.kind === 'deny' ? null : leftBehindOf(op);
    if (opAccess.kind === 'allow' && unguarded === null) continue;
    if (opAccess.kind === 'approval' && policyAccess.kind === 'approval' && unguarded === null) continue;
    audit.batchOperation = op.id;
    if (opRule) audit.rule = { index: opRule.index, label: opRule.label, action: opRule.action };
    if (unguarded !== null) {
      leftBehind = `batch request ${op.id}: ${unguarded}`;
      break;
    }
    policyAccess = { ...opAccess, reason: `batch request ${op.id}: ${opAccess.reason}` };
    if (opAccess.kind === 'deny') break;
  }
  if (leftBehind !== null) return deny('request_rules', 'batch_response_rules', leftBehind);
  const access: AccessDecision =
    ctx.permissionRequest && policyAccess.kind === 'allow'
      ? { kind: 'approval', code: 'agent_request', reason: 'the agent asked for a decision before acting' }
      : policyAccess;
  audit.stepUp = access.code;
  if (access.kind === 'deny') return deny('request_rules', access.code, access.reason);

  // 7. Step-up approval. `requestFullFields` first has to be something an approval could grant:
  // a single contact, on a contacts policy of the balanced tier with field step-up enabled.
  const fullFields = req.requestFullFields === true;
  if (fullFields) {
    const refusal = fieldStepUpRefusal(policy.contactFields, method, target.matchPath);
    if (refusal) return deny('step_up', refusal.code, refusal.reason);
  }
  let approvalUsed = false;
  const limits = policy.rateLimits;
  const overLimit =
    limits !== null && limits !== undefined && ctx.requestsInLastHour >= limits.maxRequestsPerHour;
  if (access.kind === 'approval') {
    const approval = ctx.approval;
    if (!approval) {
      // Filing an approval counts as a request: past the limit, no more approvals are filed
      // (otherwise the limit would bound executions but not reviewers' queues).
      if (overLimit) {
        const retryAfter = retryAfterSeconds(ctx.now, ctx.oldestRequestInWindowAt);
        return deny('rate_limit', 'rate_limited', 'rate limit exceeded', 429, retryAfter);
      }
      return {
        outcome: 'require_approval',
        href: target.href,
        fingerprint: requestFingerprint({
          method,
          href: target.href,
          body: body.payload,
          bodyIsJson: body.inspected.kind === 'json',
          requestFullFields: fullFields,
          headers,
        }),
        code: access.code,
        reason: access.reason,
        audit: { ...audit, step: 'step_up', code: access.code },
      };
    }
    if (approval.id !== undefined) audit.approvalId = approval.id;
    if (approval.status !== 'approved') {
      return deny(
        'step_up',
        `approval_${approval.status}`,
        `the approval is ${approval.status.replace('_', ' ')}`,
      );
    }
    if (!approval.fingerprintMatches) {
      return deny('step_up', 'approval_mismatch', 'the approval was granted for a different request');
    }
    approvalUsed = true;
  }

  // 8. Rate limit per agent+connection pair.
  if (overLimit) {
    const retryAfter = retryAfterSeconds(ctx.now, ctx.oldestRequestInWindowAt);
    return deny('rate_limit', 'rate_limited', 'rate limit exceeded', 429, retryAfter);
  }

  // 9. Payload size.
  if (limits?.maxPayloadSizeBytes !== undefined && body.size > limits.maxPayloadSizeBytes) {
    return deny(
      'payload_size',
      'payload_too_large',
      `payload exceeds ${limits.maxPayloadSizeBytes} bytes`,
      413,
    );
  }

  return {
    outcome: 'allow',
    target: {
      href: target.href,
      method,
      host: target.host,
      hostKind: target.hostKind,
      port: target.port,
      path: target.path,
      matchPath: target.matchPath,
      search: target.search,
      headers,
      body: body.payload,
      addresses,
    },
    approvalUsed,
    // requestFullFields always needs approval (decideAccess), so this is a redeemed step-up.
    fullFields: fullFields && approvalUsed,
    audit,
  };
}

/** Whether two operations go to the same method and target (their response rules are the same). */
const sharesRoute = (a: BatchOperation | undefined, b: BatchOperation): boolean =>
  a !== undefined && a.target === b.target && a.method === b.method;

/**
 * Why a batch operation may not go through the batch: its answer comes back elsewhere (inside
 * the batch's, `responses[i].body`, or in an LLM batch's results), where the rules that guard
 * its path would not hold. Field rules and the provider's inbound filters name paths in the
 * operation's own answer, so they never carry over; a redaction reads every string, so it holds
 * when it also guards where the answer comes back (`guarding`). Null when nothing would be left
 * behind.
 */
function responseRulesLeftBehind(
  policy: PolicyRuntime,
  guarding: ReadonlySet<RuntimeResponseRule>,
  op: BatchOperation,
): string | null {
  const opRoute = { method: op.method, path: op.target.matchPath };
  const missed = selectResponseRules(policy.responseRules, opRoute).some(
    (r) => r.allowFields || r.denyFields || (r.detectors.length > 0 && !guarding.has(r)),
  );
  // An inbound filter drops listed items (chats, messages) of others from what a read returns.
  const inbound =
    op.method === 'GET' && inboundFilterFor(policy.providerConstraints, op.target.matchPath) !== null;
  return missed || inbound
    ? 'response rules apply to its path that cannot be applied to a batch answer; send it on its own'
    : null;
}

export type TokenVendingDecision =
  | { outcome: 'allow' }
  | { outcome: 'deny'; status: 403 | 429; code: string; reason: string; retryAfter?: number };

/**
 * Model A: the checks that apply to token vending (model, contacts are brokered only, time
 * window, rate limit).
 */
export function evaluateTokenVending(
  policy: PolicyRuntime,
  ctx: Pick<ExecutionContext, 'now' | 'requestsInLastHour' | 'oldestRequestInWindowAt'>,
): TokenVendingDecision {
  if (!policy.allowedModels.has('A')) {
    return {
      outcome: 'deny',
      status: 403,
      code: 'model_not_allowed',
      reason: 'the policy does not allow model A',
    };
  }
  // A vended token reads contacts directly: no stripping, no step-up (ADR 0045). Contacts are
  // brokered only, whatever allowedModels says.
  if (policy.contactFields !== null) {
    return {
      outcome: 'deny',
      status: 403,
      code: 'contacts_brokered_only',
      reason: 'contacts are brokered only (Model B): a vended token would bypass contact field stripping',
    };
  }
  if (!policy.timeWindows.isOpen(ctx.now)) {
    return {
      outcome: 'deny',
      status: 403,
      code: 'outside_time_window',
      reason: 'outside the allowed time windows',
    };
  }
  const limits = policy.rateLimits;
  if (limits && ctx.requestsInLastHour >= limits.maxRequestsPerHour) {
    const retryAfter = retryAfterSeconds(ctx.now, ctx.oldestRequestInWindowAt);
    return { outcome: 'deny', status: 429, code: 'rate_limited', reason: 'rate limit exceeded', retryAfter };
  }
  return { outcome: 'allow' };
}
