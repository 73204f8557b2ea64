/**
 * Step-up approvals. A data plane asks for one when the policy requires it; a reviewer
 * approves or denies; the agent re-submits the identical request with the approval id and
 * the data plane redeems it here. Every transition is a conditional update, so concurrent
 * reviewers or redeemers cannot both win: an approval executes exactly once.
 */
import { auditUrl, Errors, storableJson } from '@vlt/service-kit';
import type {
  ApprovalCreateRequest,
  ApprovalRedeemRequest,
  ApprovalRedeemResponse,
  ApprovalView,
  AuditEventMessage,
} from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';
import { commitChange, auditEvent, audited } from '../../infra/change.js';

/**
 * Pending approvals one agent may have at once: reviewers' queues are bounded whatever the
 * agent's rate limit (ADR 0040).
 */
export const MAX_PENDING_APPROVALS_PER_AGENT = 20;

type Row = Prisma.ApprovalRequestGetPayload<{
  include: {
    agent: { select: { name: true } };
    connection: { select: { label: true; provider: true; status: true } };
  };
}>;
const include = {
  agent: { select: { name: true } },
  connection: { select: { label: true, provider: true, status: true } },
} as const;

function view(a: Row): ApprovalView {
  return {
    id: a.id,
    policyId: a.policyId,
    agentId: a.agentId,
    connectionId: a.connectionId,
    actor: a.actor,
    status: a.status,
    requestDetails: a.requestDetails as Record<string, unknown>,
    expiresAt: a.expiresAt.toISOString(),
    createdAt: a.createdAt.toISOString(),
    decidedAt: a.decidedAt ? a.decidedAt.toISOString() : null,
    agentName: a.agent.name,
    connectionLabel: a.connection.label,
    connectionProvider: a.connection.provider,
  };
}

function expiredEvent(
  deps: ControlPlaneDeps,
  a: { id: string; workspaceId: string; agentId: string; connectionId: string },
) {
  return auditEvent(deps, {
    action: 'approval_expired',
    actor: 'system',
    workspaceId: a.workspaceId,
    agentId: a.agentId,
    connectionId: a.connectionId,
    decision: 'denied',
    metadata: { approvalRequestId: a.id },
  });
}

/** Moves stale pending approvals to `expired` (each exactly once) and audits them. */
export async function expireStaleApprovals(deps: ControlPlaneDeps, workspaceId?: string): Promise<number> {
  const now = deps.now();
  const count = await commitChange(deps, async (tx, emit) => {
    const stale = await tx.$queryRaw<
      { id: string; workspace_id: string; agent_id: string; connection_id: string }[]
    >`
      UPDATE approval_requests SET status = 'expired'
      WHERE status = 'pending' AND expires_at <= ${now}
        AND (${workspaceId ?? null}::uuid IS NULL OR workspace_id = ${workspaceId ?? null}::uuid)
      RETURNING id, workspace_id, agent_id, connection_id`;
    emit(
      ...stale.map((s) =>
        audited(
          expiredEvent(deps, {
            id: s.id,
            workspaceId: s.workspace_id,
            agentId: s.agent_id,
            connectionId: s.connection_id,
          }),
        ),
      ),
    );
    return stale.length;
  });
  return count;
}

export async function createApproval(deps: ControlPlaneDeps, req: ApprovalCreateRequest) {
  const policy = await deps.prisma.policy.findFirst({
    where: {
      id: req.policyId,
      agentId: req.agentId,
      connectionId: req.connectionId,
      workspaceId: req.workspaceId,
    },
    include: { agent: true, connection: true },
  });
  if (!policy || policy.agent.status !== 'active') return { ok: false as const, code: 'forbidden' as const };
  if (policy.connection.status === 'revoked') return { ok: false as const, code: 'revoked' as const };
  const now = deps.now();
  const expiresAt = new Date(now.getTime() + deps.config.approvalTtlSeconds * 1000);
  const created = await commitChange(deps, async (tx, emit) => {
    // One agent's creates queue on its row, so the pending count below cannot be overshot.
    await tx.$queryRaw`SELECT id FROM agents WHERE id = ${req.agentId}::uuid FOR UPDATE`;
    const pending = await tx.approvalRequest.count({
      where: { agentId: req.agentId, status: 'pending', expiresAt: { gt: now } },
    });
    if (pending >= MAX_PENDING_APPROVALS_PER_AGENT) return null;
    const row = await tx.approvalRequest.create({
      data: {
        workspaceId: req.workspaceId,
        policyId: req.policyId,
        agentId: req.agentId,
        connectionId: req.connectionId,
        // The user answerable for the agent (docs/decisions: approval actor).
        actor: policy.agent.createdBy ?? `agent:${req.agentId}`,
        status: 'pending',
        // A display copy: what cannot be stored is replaced (the fingerprint binds the real bytes).
        requestDetails: storableJson(req.requestDetails) as Prisma.InputJsonValue,
        fingerprint: req.fingerprint,
        expiresAt,
      },
    });
    const event = auditEvent(deps, {
      action: 'approval_requested',
      actor: `agent:${req.agentId}`,
      workspaceId: req.workspaceId,
      agentId: req.agentId,
      connectionId: req.connectionId,
      decision: 'info',
      metadata: {
        approvalRequestId: row.id,
        reason: req.reason,
        method: req.requestDetails.method,
        // Query values may carry data or keys: audit events keep their names only.
        url: typeof req.requestDetails.url === 'string' ? auditUrl(req.requestDetails.url) : null,
        agentName: policy.agent.name,
        connectionLabel: policy.connection.label,
      },
    });
    emit(audited(event));
    return { row, auditId: event.auditId };
  });
  if (created === null) return { ok: false as const, code: 'too_many_pending' as const };
  return {
    ok: true as const,
    approvalRequestId: created.row.id,
    expiresAt: created.row.expiresAt.toISOString(),
    auditId: created.auditId,
  };
}

/** Who reads approvals: a user sees the workspace's, an agent only its own (ADR 0044). */
export interface ApprovalReader {
  workspaceId: string;
  agentId?: string | undefined;
}

export async function listApprovals(deps: ControlPlaneDeps, reader: ApprovalReader) {
  const { workspaceId, agentId } = reader;
  // Stale pending requests expire on each list query (spec).
  await expireStaleApprovals(deps, workspaceId);
  const rows = await deps.prisma.approvalRequest.findMany({
    where: { workspaceId, ...(agentId && { agentId }) },
    include,
    orderBy: { createdAt: 'desc' },
    take: 500,
  });
  return { approvals: rows.map(view) };
}

export async function getApproval(deps: ControlPlaneDeps, reader: ApprovalReader, id: string) {
  const { workspaceId, agentId } = reader;
  await expireStaleApprovals(deps, workspaceId);
  // Another agent's approval is indistinguishable from none.
  const row = await deps.prisma.approvalRequest.findFirst({
    where: { id, workspaceId, ...(agentId && { agentId }) },
    include,
  });
  if (!row) throw Errors.notFound('approval request not found');
  return { approval: view(row) };
}

/**
 * Where a decision came from when not from a signed-in user: a quick-action button sent to a
 * notification channel. Recorded in the audit event so every decision names its reviewer.
 */
export interface DecisionSource {
  via: 'quick_action';
  channelId: string | null;
}

export async function decide(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
  to: 'approved' | 'denied',
  source?: DecisionSource,
): Promise<{ auditId: string }> {
  const now = deps.now();
  const result = await commitChange(deps, async (tx, emit) => {
    // Lock the row: the decision below must see the state it changes.
    const locked = await tx.$queryRaw<{ id: string }[]>`
      SELECT id FROM approval_requests WHERE id = ${id}::uuid AND workspace_id = ${actor.workspaceId}::uuid FOR UPDATE`;
    if (locked.length === 0) throw Errors.notFound('approval request not found');
    const a = await tx.approvalRequest.findUniqueOrThrow({ where: { id }, include });
    if (a.status === 'pending' && a.expiresAt <= now) {
      await tx.approvalRequest.update({ where: { id }, data: { status: 'expired' } });
      emit(audited(expiredEvent(deps, a)));
      return { gone: true as const };
    }
    if (a.status === 'expired') return { gone: true as const };
    if (a.status !== 'pending') throw Errors.approvalResolved(`approval request is already ${a.status}`);
    if (to === 'approved' && a.connection.status === 'revoked') throw Errors.connectionRevoked();
    await tx.approvalRequest.update({
      where: { id },
      data: { status: to, decidedAt: now, decidedBy: actor.userId },
    });
    const event: AuditEventMessage = auditEvent(deps, {
      action: to === 'approved' ? 'approval_approved' : 'approval_denied',
      actor: actor.userId,
      workspaceId: actor.workspaceId,
      agentId: a.agentId,
      connectionId: a.connectionId,
      decision: to === 'approved' ? 'allowed' : 'denied',
      metadata: {
        approvalRequestId: id,
        agentName: a.agent.name,
        connectionLabel: a.connection.label,
        ...source,
      },
    });
    emit(audited(event));
    return { gone: false as const, auditId: event.auditId };
  });
  if (result.gone) throw Errors.gone('approval request has expired');
  return { auditId: result.auditId };
}

export async function approve(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  const { auditId } = await decide(deps, actor, id, 'approved');
  return { approved: true as const, approvalRequestId: id, auditId };
}

export async function deny(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  const { auditId } = await decide(deps, actor, id, 'denied');
  return { denied: true as const, approvalRequestId: id, auditId };
}

/**
 * Consumes an approved request for the same agent, connection and request fingerprint.
 * The update is conditional on `status = 'approved'`, so only one redemption can succeed.
 * An approval must be redeemed within the approval TTL after its decision.
 */
export async function redeemApproval(
  deps: ControlPlaneDeps,
  req: ApprovalRedeemRequest,
): Promise<ApprovalRedeemResponse> {
  const now = deps.now();
  const ttlMs = deps.config.approvalTtlSeconds * 1000;
  const res = await deps.prisma.approvalRequest.updateMany({
    where: {
      id: req.approvalId,
      workspaceId: req.workspaceId,
      agentId: req.agentId,
      connectionId: req.connectionId,
      fingerprint: req.fingerprint,
      status: 'approved',
      decidedAt: { gt: new Date(now.getTime() - ttlMs) },
    },
    data: { status: 'consumed', consumedAt: now },
  });
  if (res.count === 1) return { ok: true };
  const a = await deps.prisma.approvalRequest.findFirst({
    where: { id: req.approvalId, workspaceId: req.workspaceId, agentId: req.agentId },
  });
  if (!a) return { ok: false, code: 'not_found' };
  if (a.connectionId !== req.connectionId || a.fingerprint !== req.fingerprint)
    return { ok: false, code: 'mismatch' };
  if (a.status === 'approved') return { ok: false, code: 'expired' };
  if (a.status === 'pending') return { ok: false, code: a.expiresAt <= now ? 'expired' : 'pending' };
  return { ok: false, code: a.status };
}
