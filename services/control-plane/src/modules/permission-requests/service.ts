/**
 * Agent permission requests (`request_capability`): an agent asks for an action it cannot do
 * yet; a user with `approvals:decide` approves or denies. Approving records the decision — the
 * connection and policy are still made by a user (the vault never grants itself access).
 */
import { actionTemplate } from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import { Errors } from '@vlt/service-kit';
import type { ControlPlaneDeps } from '../../deps.js';
import { auditEvent, audited, commitChange } from '../../infra/change.js';

type Row = Prisma.AgentPermissionRequestGetPayload<{ include: { agent: { select: { name: true } } } }>;

function view(r: Row) {
  return {
    id: r.id,
    agentId: r.agentId,
    agentName: r.agent.name,
    actionTemplateId: r.actionTemplateId,
    serviceId: actionTemplate(r.actionTemplateId)?.serviceId ?? null,
    reason: r.reason,
    status: r.status as 'pending' | 'approved' | 'denied',
    requestedAt: r.createdAt.toISOString(),
  };
}

/** One pending request per agent and action: a second ask is 409, not a second review. */
export async function createPermissionRequest(
  deps: ControlPlaneDeps,
  agent: { agentId: string; workspaceId: string },
  input: { actionTemplateId: string; reason: string },
) {
  const template = actionTemplate(input.actionTemplateId);
  if (!template) throw Errors.badRequest(`unknown action template ${input.actionTemplateId}`);
  const created = await commitChange(deps, async (tx, emit) => {
    // Serialise this agent's requests on its row, so two concurrent asks cannot both pass.
    await tx.$queryRaw`SELECT id FROM agents WHERE id = ${agent.agentId}::uuid FOR UPDATE`;
    const dup = await tx.agentPermissionRequest.findFirst({
      where: { agentId: agent.agentId, actionTemplateId: template.id, status: 'pending' },
      select: { id: true },
    });
    if (dup) throw Errors.permissionRequestPending();
    const row = await tx.agentPermissionRequest.create({
      data: {
        workspaceId: agent.workspaceId,
        agentId: agent.agentId,
        actionTemplateId: template.id,
        reason: input.reason,
      },
    });
    const event = auditEvent(deps, {
      action: 'permission_requested',
      actor: `agent:${agent.agentId}`,
      workspaceId: agent.workspaceId,
      agentId: agent.agentId,
      connectionId: null,
      decision: 'info',
      metadata: {
        requestId: row.id,
        actionTemplateId: template.id,
        serviceId: template.serviceId,
        reason: input.reason,
      },
    });
    emit(audited(event));
    return { row, auditId: event.auditId };
  });
  return {
    success: true as const,
    requestId: created.row.id,
    actionTemplateId: template.id,
    message: `Asked the workspace to allow "${template.label}". You will be able to use it once an admin connects it.`,
    auditId: created.auditId,
  };
}

export async function listPermissionRequests(
  deps: ControlPlaneDeps,
  caller: { workspaceId: string; agentId?: string | undefined },
) {
  const rows = await deps.prisma.agentPermissionRequest.findMany({
    where: { workspaceId: caller.workspaceId, ...(caller.agentId && { agentId: caller.agentId }) },
    include: { agent: { select: { name: true } } },
    orderBy: { createdAt: 'desc' },
    take: 500,
  });
  return { requests: rows.map(view) };
}

export async function decidePermissionRequest(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
  outcome: 'approved' | 'denied',
) {
  const current = await deps.prisma.agentPermissionRequest.findFirst({
    where: { id, workspaceId: actor.workspaceId },
  });
  if (!current) throw Errors.notFound('permission request not found');
  const result = await commitChange(deps, async (tx, emit) => {
    const moved = await tx.agentPermissionRequest.updateMany({
      where: { id, status: 'pending' },
      data: { status: outcome },
    });
    if (moved.count !== 1) throw Errors.permissionRequestResolved();
    const row = await tx.agentPermissionRequest.findUniqueOrThrow({
      where: { id },
      include: { agent: { select: { name: true } } },
    });
    const event = auditEvent(deps, {
      action: outcome === 'approved' ? 'permission_request_approved' : 'permission_request_denied',
      actor: actor.userId,
      workspaceId: actor.workspaceId,
      agentId: row.agentId,
      connectionId: null,
      decision: 'info',
      metadata: { requestId: row.id, actionTemplateId: row.actionTemplateId },
    });
    emit(audited(event));
    return { row, auditId: event.auditId };
  });
  return { request: view(result.row), auditId: result.auditId };
}
