/**
 * Step-up approvals as the data plane sees them: filing one for a request the policy pauses,
 * and redeeming one (exactly once, for exactly the request it was granted for). The control
 * plane owns approvals; both are request/reply calls that fail closed with 503.
 */
import { BusError } from '@vlt/bus';
import { ApprovalCreateResponse, ApprovalRedeemResponse, type ExecuteModelB } from '@vlt/contracts';
import { sanitizeRequestHeaders, type ExecutionDecision, type InspectedBody } from '@vlt/policy-engine';
import { Errors, type AppError } from '@vlt/service-kit';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import type { Denial } from './recorder.js';
import { providerMetadata } from './provider-metadata.js';
import { reviewedBody, reviewedContext } from './review-copy.js';

export interface ApprovalRequired {
  approvalRequired: true;
  approvalRequestId: string;
  expiresAt: string;
  auditId: string;
}

const REDEEM_REFUSALS: Record<ApprovalRedeemRefusal, () => AppError> = {
  not_found: () => Errors.approvalNotFound(),
  pending: () => Errors.approvalPending(),
  denied: () => Errors.approvalDenied(),
  expired: () => Errors.approvalExpired(),
  consumed: () => Errors.approvalConsumed(),
  mismatch: () => Errors.approvalMismatch(),
};
type ApprovalRedeemRefusal = Extract<ApprovalRedeemResponse, { ok: false }>['code'];

/** Request/reply to the control plane; when it cannot answer, the call fails closed with 503. */
async function ask<T>(
  deps: DataPlaneDeps,
  subject: string,
  payload: unknown,
  schema: { parse(v: unknown): T },
  unavailable: string,
): Promise<T> {
  try {
    return schema.parse(await deps.bus.request(subject, payload, { timeoutMs: 3_000 }));
  } catch (err) {
    if (err instanceof BusError) throw Errors.unavailable(unavailable);
    throw err;
  }
}

export interface ApprovalScope {
  agent: AgentPrincipal;
  connectionId: string;
  policyId: string;
}

/** Files an approval for a paused request; what the reviewer sees is what would be forwarded. */
export async function fileApproval(
  deps: DataPlaneDeps,
  scope: ApprovalScope,
  req: ExecuteModelB,
  decision: Extract<ExecutionDecision, { outcome: 'require_approval' }>,
  /** The body as the pipeline read it: how it is shown depends on its size (ADR 0099). */
  read: { inspected: InspectedBody | undefined; size: number },
  /** The connection's provider: its messages' recipients and text are shown apart. */
  provider: string,
  shown: {
    presentedUrl?: string | undefined;
    presentedBody?: unknown;
    actionDescription?: string | undefined;
  } = {},
): Promise<ApprovalRequired> {
  const { presentedUrl, presentedBody, actionDescription } = shown;
  const headers = sanitizeRequestHeaders(req.headers);
  const metadata = await providerMetadata(
    provider,
    req.method.toUpperCase(),
    decision.href,
    read.inspected,
    decision.audit.batchOperation,
  );
  const created = await ask(
    deps,
    deps.names.rpc.approvalsCreate,
    {
      v: 1,
      workspaceId: scope.agent.workspaceId,
      agentId: scope.agent.agentId,
      connectionId: scope.connectionId,
      policyId: scope.policyId,
      fingerprint: decision.fingerprint,
      // The agent's own words, when it asked first, are what a reviewer reads first.
      reason: actionDescription ? `the agent asks: ${actionDescription}`.slice(0, 500) : decision.reason,
      requestDetails: {
        ...(actionDescription && { actionDescription }),
        method: req.method,
        // What would execute: the canonical URL with the query merged (the raw spelling may
        // hide a different target behind dot segments).
        ...(presentedUrl
          ? { url: presentedUrl, upstreamUrl: decision.href }
          : { url: decision.href, ...(decision.href !== req.url && { requestedUrl: req.url }) }),
        headers: headers.ok ? headers.headers : {},
        ...(presentedBody !== undefined ? { body: presentedBody } : reviewedBody(req.body, read)),
        requestFullFields: req.requestFullFields ?? false,
        ...(req.context && { context: reviewedContext(req.context) }),
        ...metadata,
      },
    },
    ApprovalCreateResponse,
    'cannot create the approval request right now',
  );
  if (created.ok) {
    return {
      approvalRequired: true,
      approvalRequestId: created.approvalRequestId,
      expiresAt: created.expiresAt,
      auditId: created.auditId,
    };
  }
  switch (created.code) {
    case 'revoked':
      throw Errors.connectionRevoked();
    case 'too_many_pending':
      throw Errors.tooManyPendingApprovals(undefined, { retryAfter: 60, headers: { 'retry-after': '60' } });
    case 'forbidden':
      throw Errors.policyDenied('no policy allows this agent to use this connection');
  }
}

/** Consumes an approval for this exact request; a refusal comes back as the denial to record. */
export async function redeemApproval(
  deps: DataPlaneDeps,
  scope: Omit<ApprovalScope, 'policyId'>,
  approvalId: string,
  fingerprint: string,
): Promise<Denial | null> {
  const redeemed = await ask(
    deps,
    deps.names.rpc.approvalsRedeem,
    {
      v: 1,
      approvalId,
      workspaceId: scope.agent.workspaceId,
      agentId: scope.agent.agentId,
      connectionId: scope.connectionId,
      fingerprint,
    },
    ApprovalRedeemResponse,
    'cannot verify the approval right now',
  );
  if (redeemed.ok) return null;
  const refusal = REDEEM_REFUSALS[redeemed.code]();
  return {
    status: refusal.statusCode,
    reason: refusal.message,
    code: refusal.code,
    metadata: { step: 'step_up', approvalRequestId: approvalId },
  };
}
