/**
 * Model B: the brokered request, as one straight sequence:
 *   resolve the binding → record the request (durable, fail closed) → decide (the pure policy
 *   engine, in the spec's order: time window → allowlist → SSRF → provider constraints → rules →
 *   step-up → rate limit → payload size) → file or redeem an approval → call the provider with
 *   the injected credential → respond (buffered, streamed or downloaded, through the response
 *   rules). The recorder guarantees exactly one terminal audit event per call.
 *
 * The decision is computed while JetStream stores the request (ADR 0072): nothing that acts —
 * an approval redeemed or filed, credentials fetched, the provider called — and no answer to
 * the agent happens before `recorder.recorded`, so a request that cannot be recorded is still
 * answered 503 with nothing done.
 */
import { BusError } from '@vlt/bus';
import type { ConnectionDescriptor, ExecuteModelB } from '@vlt/contracts';
import {
  evaluatePrepared,
  inspectedBody,
  preparedBodySize,
  planResponse,
  prepareExecution,
  requestFingerprint,
  type InspectedBody,
  type ResponseFilterCore,
  type ResponsePlan,
  type ExecutionContext,
  type ExecutionDecision,
} from '@vlt/policy-engine';
import { Errors } from '@vlt/service-kit';
import type { UpstreamTimeouts } from '@vlt/upstream';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import type { Reservation } from '../../rate-counter.js';
import { fileApproval, redeemApproval, type ApprovalRequired } from './approvals.js';
import { CallRecorder } from './recorder.js';
import { respondBuffered, respondStreamed, type ExecutionResult, type StreamedResult } from './respond.js';
import { buildUpstreamRequest, credentialsFor } from './upstream-call.js';

export type { ApprovalRequired } from './approvals.js';
export type { ExecutionResult, StreamedResult } from './respond.js';

type Binding = Awaited<ReturnType<DataPlaneDeps['caches']['policyFor']>>;
type FoundPolicy = NonNullable<Binding['policy']>;
type Outcome = ExecutionResult | ApprovalRequired | StreamedResult;

const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;

/** How a request names its connection: by id, or a singleton by service. */
export type ConnectionRef = Pick<ExecuteModelB, 'connectionId' | 'service'>;

function resolveConnection(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  req: ConnectionRef,
): ConnectionDescriptor | null {
  if (req.connectionId) return deps.caches.connection(req.connectionId);
  if (req.service) {
    const matches = deps.caches
      .connectionsOf(agent.workspaceId)
      .filter((c) => c.service === req.service && c.singleton && c.status !== 'revoked');
    return matches.length === 1 ? matches[0]! : null;
  }
  return null;
}

/** The connection the request names and this agent's policy for it (404, 409, 503). */
export async function resolveBinding(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  req: ConnectionRef,
): Promise<{ connection: ConnectionDescriptor; policy: FoundPolicy | null }> {
  if (!req.connectionId && !req.service) throw Errors.badRequest('connectionId or service is required');
  const targetId = resolveConnection(deps, agent, req)?.id ?? req.connectionId;
  let found: Binding;
  try {
    found = targetId
      ? await deps.caches.policyFor(agent.agentId, targetId)
      : { policy: null, connection: null };
  } catch (err) {
    if (err instanceof BusError) throw Errors.unavailable('cannot load the policy right now');
    throw err;
  }
  const conn = found.connection;
  // Another workspace's connection is indistinguishable from none at all.
  if (!conn || conn.workspaceId !== agent.workspaceId) throw Errors.notFound('connection not found');
  if (conn.status === 'revoked') throw Errors.connectionRevoked();
  if (conn.status === 'needs_reauth') throw Errors.connectionNeedsReauth();
  return { connection: conn, policy: found.policy };
}

export interface ExecuteOptions {
  /**
   * The URL reviewers and the agent's plugin know the request by, when it is not the provider
   * URL itself (the LLM proxy: `llm://<provider>/<rest>`, ADR 0043).
   */
  presentedUrl?: string;
  /**
   * What reviewers see of a body that is not text (an upload through the LLM proxy: its fields,
   * and each file by name, size and digest, ADR 0095). The approval still binds the bytes.
   */
  presentedBody?: unknown;
  /**
   * One more stage for a streamed 2xx answer (the LLM proxy's redaction across text deltas),
   * given the response plan; null adds nothing. It runs before the response filter (ADR 0043).
   */
  streamStage?: (plan: ResponsePlan | null, contentType: string | undefined) => ResponseFilterCore | null;
  /**
   * The body asks for a stream by what it says (an LLM call's `"stream": true`), read from the
   * pipeline's own parse of it rather than a second one.
   */
  streamWhen?: (body: InspectedBody) => boolean;
  /**
   * The bytes a text body was read from, when they are exactly its UTF-8 encoding (the reader
   * checked they are valid UTF-8): sent as they are, rather than the text encoded once more
   * (ADR 0097). Used only when what the pipeline decided to send is that very text.
   */
  textBytes?: Uint8Array;
  /** Aborted when the agent hangs up: a request it no longer waits for is not sent. */
  agentGone?: AbortSignal;
  /**
   * A request already sent is cancelled too when the agent hangs up before the provider's
   * answer (the LLM proxy: a model keeps generating, and billing, for an answer nobody reads).
   * Otherwise the call runs to its end, so that the audit records what the provider did.
   */
  cancelWhenAgentGone?: boolean;
  /**
   * The provider's time limits for this call where they are not the configured ones (the LLM
   * proxy: a model may think for minutes before its first byte, or between two events).
   */
  upstreamTimeouts?: UpstreamTimeouts;
  /**
   * The agent asks a human first (`POST /v1/vault/permission-requests`): the request is decided
   * as usual, then filed for approval even when the policy would allow it, and never sent.
   */
  permissionRequest?: { actionDescription: string };
}

export async function executeModelB(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  req: ExecuteModelB,
  options: ExecuteOptions = {},
): Promise<Outcome> {
  const { connection, policy } = await resolveBinding(deps, agent, req);
  const meta = { model: 'B', method: req.method, provider: connection.provider, service: connection.service };
  // Every call that names a usable connection is recorded, whatever is decided.
  const recorder = CallRecorder.begin(deps, agent, connection.id, meta, req.url);
  try {
    // The decision runs while JetStream stores the request (ADR 0072), but a publish leaves at
    // the end of the event loop's turn (ADR 0082): decided first, the record would wait for the
    // decision, and the call for both in series (ADR 0086).
    await deps.bus.sent();
    if (!policy) {
      throw recorder.deny({ status: 403, reason: 'no policy allows this agent to use this connection' });
    }
    const outcome = await runWithRateSlot({ deps, agent, req, connection, found: policy, recorder, options });
    // Every path that returns has waited already; this keeps a new one from answering early.
    await recorder.recorded;
    await recorder.outcomeSent;
    return outcome;
  } catch (err) {
    // No record, no answer but the 503: a refusal decided meanwhile was never recorded either.
    await recorder.recorded;
    recorder.settleFromError(err);
    await recorder.outcomeSent;
    throw err;
  }
}

/**
 * Takes a rate-limit slot before deciding (so replicas racing for the last slot cannot both get
 * it) and gives it back only when the request neither reached the provider nor filed an approval.
 */
async function runWithRateSlot(call: Call): Promise<Outcome> {
  const { deps, agent, connection, found } = call;
  const now = deps.now();
  // Only rate-limited policies pay for the shared counter (two KV round trips).
  let reservation: Reservation | undefined;
  if (found.runtime.rateLimits) {
    try {
      reservation = await deps.rateCounter.reserve(agent.agentId, connection.id, now);
    } catch {
      throw Errors.unavailable('cannot count requests for the rate limit right now');
    }
  }
  const counted = { value: false };
  try {
    return await run(call, {
      now,
      model: 'B',
      requestsInLastHour: reservation?.previous ?? 0,
      ...(reservation?.oldestAt && { oldestRequestInWindowAt: reservation.oldestAt }),
      ssrfAllowCidrs: deps.config.ssrfAllowCidrs,
      permissionRequest: call.options.permissionRequest !== undefined,
      counted,
    });
  } finally {
    if (reservation && !counted.value) await reservation.release().catch(() => undefined);
  }
}

/** One brokered call: who asks for what, under which binding, recorded where. */
interface Call {
  deps: DataPlaneDeps;
  agent: AgentPrincipal;
  req: ExecuteModelB;
  connection: ConnectionDescriptor;
  found: FoundPolicy;
  recorder: CallRecorder;
  options: ExecuteOptions;
}

interface RunContext extends ExecutionContext {
  /** Set once the request counts against the rate limit: it reached the provider or filed an approval. */
  counted: { value: boolean };
}

async function run(call: Call, ctx: RunContext): Promise<Outcome> {
  const { deps, agent, req, connection, found, recorder } = call;
  const policy = found.runtime;
  const decided = await decide(call, ctx);
  if ('read' in decided) {
    await recorder.recorded;
    const filed = await fileApproval(
      deps,
      { agent, connectionId: connection.id, policyId: found.snapshot.policyId },
      req,
      decided.decision,
      decided.read,
      connection.provider,
      {
        presentedUrl: call.options.presentedUrl,
        presentedBody: call.options.presentedBody,
        actionDescription: call.options.permissionRequest?.actionDescription,
      },
    );
    // Filing an approval counts like a call that ran: the limit bounds reviewers' queues too.
    ctx.counted.value = true;
    recorder.terminal('execution_denied', {
      reason: call.options.permissionRequest
        ? 'permission requested by the agent'
        : 'step-up approval required',
      approvalRequestId: filed.approvalRequestId,
    });
    return filed;
  }
  // The engine files every permission request that it does not deny; nothing else may run.
  if (call.options.permissionRequest) throw new Error('a permission request was not filed for approval');
  const { decision, streamAsked } = decided;

  const target = decision.target;
  recorder.annotate({ path: target.path });
  // The issue tracker's base URL comes from the connection: nothing else may be reached with its credentials.
  if (connection.baseUrl && new URL(target.href).origin !== new URL(connection.baseUrl).origin) {
    throw recorder.deny({ status: 403, reason: 'url is outside the connection site' });
  }

  // Fetching credentials may refresh a token at the provider: it waits for the record too.
  await recorder.recorded;
  const credentials = await credentialsFor(deps, agent, connection.id, recorder);
  // The credential wait is the longest one before the provider is called (a slow control plane):
  // an agent that gave up meanwhile may retry, and must not find its abandoned write ran too.
  if (call.options.agentGone?.aborted) {
    recorder.failed('AGENT_GONE', { reason: 'the agent hung up before the request was sent' });
    throw Errors.clientClosed();
  }
  const built = buildUpstreamRequest(target, credentials, connection, {
    bodyIsAgentText: typeof req.body === 'string' || req.body instanceof Uint8Array,
  });
  const { agentGone, cancelWhenAgentGone, upstreamTimeouts, textBytes } = call.options;
  const request = {
    ...built,
    // The text's length was measured by the pipeline: bytes of another length are another body.
    ...(textBytes &&
      built.body === req.body &&
      textBytes.byteLength === decision.audit.dataSize && { body: textBytes }),
    secrets: deps.credentials.secretForms(credentials, built.secrets),
    ...(upstreamTimeouts && { timeouts: upstreamTimeouts }),
    ...(cancelWhenAgentGone && agentGone && { signal: agentGone }),
  };
  // A redeemed contact field step-up keeps PII fields in this one response (ADR 0045).
  const route = { method: req.method, path: target.matchPath, fullFields: decision.fullFields };
  if (decision.fullFields) recorder.annotate({ fullFields: true, approvalRequestId: req.approvalId });
  if (planResponse(policy, route) !== null) {
    // A byte range of a filtered resource cannot be filtered: a slice is not a document (a
    // JSON slice starts mid-object, an NDJSON one mid-line), and the filter changes offsets.
    delete request.headers.range;
    delete request.headers['if-range'];
  }
  const respond = {
    upstream: deps.upstream,
    request,
    policy,
    route,
    recorder,
    maxResponseBytes: policy.limits?.maxResponseSizeBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    policySource: {
      key: `${found.snapshot.policyId}:${found.snapshot.version}`,
      compiled: found.snapshot.compiled,
    },
    filterPool: deps.responseFilterPool,
  };
  // From here the request counts, whatever happens.
  ctx.counted.value = true;
  const started = performance.now();
  if (req.stream || req.download || streamAsked) {
    const { streamStage } = call.options;
    return respondStreamed(
      respond,
      started,
      req.download === true,
      streamStage && ((contentType) => streamStage(planResponse(policy, route), contentType)),
    );
  }
  return respondBuffered(respond, started);
}

/** What `decide` settles on: run the request, or file an approval for it (with its body as read). */
type Decided =
  | { decision: Extract<ExecutionDecision, { outcome: 'allow' }>; streamAsked: boolean }
  | {
      decision: Extract<ExecutionDecision, { outcome: 'require_approval' }>;
      read: { inspected: InspectedBody | undefined; size: number };
    };

/**
 * The policy engine's decision, with the I/O it asks for: DNS answers for the SSRF step, and
 * the approval redemption (consumed only when the request will then run). Every refusal is
 * recorded and thrown; what returns is an allow or a request to file an approval, and whether
 * the body asks for a stream (`ExecuteOptions.streamWhen`).
 *
 * The request is read once, however often the pipeline is asked. What was read (a large
 * body's parsed value) is let go when this returns, before the body is sent; a request to file
 * an approval keeps it for the approval's copy of the body (ADR 0099).
 */
async function decide(call: Call, baseCtx: ExecutionContext): Promise<Decided> {
  const { deps, agent, req, connection, found, recorder } = call;
  const prepared = prepareExecution(
    {
      method: req.method,
      url: req.url,
      query: req.query,
      headers: req.headers,
      body: req.body,
      requestFullFields: req.requestFullFields,
      context: req.context,
    },
    found.runtime,
  );
  let ctx: ExecutionContext = baseCtx;
  let decision = evaluatePrepared(prepared, ctx);
  if (decision.outcome === 'needs_resolution') {
    let addresses: string[];
    try {
      addresses = await deps.upstream.resolve(decision.host);
    } catch {
      throw recorder.deny({ status: 403, reason: 'destination host cannot be resolved' });
    }
    ctx = { ...baseCtx, resolvedAddresses: addresses };
    decision = evaluatePrepared(prepared, ctx);
  }

  if (decision.outcome === 'allow' && req.approvalId) {
    // An approval presented with a request is checked against it even when the request needs
    // none: the agent believes it runs what was approved (say, a contact with its full fields),
    // and must not silently get something else (ADR 0045). A match is consumed as usual.
    await recorder.recorded;
    const refusal = await redeemApproval(
      deps,
      { agent, connectionId: connection.id },
      req.approvalId,
      requestFingerprint({
        method: decision.target.method,
        href: decision.target.href,
        body: decision.target.body,
        bodyIsJson: inspectedBody(prepared)?.kind === 'json',
        requestFullFields: req.requestFullFields === true,
        headers: decision.target.headers,
      }),
    );
    if (refusal) throw recorder.deny(refusal);
  }

  if (decision.outcome === 'require_approval') {
    if (!req.approvalId) {
      return { decision, read: { inspected: inspectedBody(prepared), size: preparedBodySize(prepared) } };
    }
    // Evaluate as if approved first: the approval is consumed only when the request will run.
    const approved = evaluatePrepared(prepared, {
      ...ctx,
      approval: { status: 'approved', fingerprintMatches: true },
    });
    if (approved.outcome === 'allow') {
      await recorder.recorded;
      const refusal = await redeemApproval(
        deps,
        { agent, connectionId: connection.id },
        req.approvalId,
        decision.fingerprint,
      );
      if (refusal) throw recorder.deny(refusal);
    }
    decision = approved;
  }

  switch (decision.outcome) {
    case 'bad_request':
      throw Errors.badRequest(decision.reason);
    case 'deny':
      throw recorder.deny({
        status: decision.status,
        reason: decision.reason,
        ...(decision.retryAfter !== undefined && { retryAfter: decision.retryAfter }),
        metadata: { step: decision.step, ...decision.audit },
      });
    case 'require_approval':
      throw recorder.deny({
        status: 403,
        reason: `step-up approval required: ${decision.reason}`,
        metadata: { step: 'step_up' },
      });
    case 'needs_resolution':
      throw recorder.deny({ status: 403, reason: 'destination could not be verified' });
    case 'allow': {
      const body = inspectedBody(prepared);
      return { decision, streamAsked: body !== undefined && call.options.streamWhen?.(body) === true };
    }
  }
}
