/**
 * Workspaces and memberships. Rules: only owners grant or take away `owner`; an admin
 * manages members and admins below owner; a workspace always keeps at least one owner.
 */
import { Errors } from '@vlt/service-kit';
import type { Role } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';

type Caller = { userId: string; workspaceId: string; roles: Role[] };
type MemberRole = 'owner' | 'admin' | 'member' | 'viewer';

export async function listMyWorkspaces(deps: ControlPlaneDeps, caller: Caller) {
  const rows = await deps.prisma.membership.findMany({
    where: { userId: caller.userId },
    include: { workspace: true },
    orderBy: { createdAt: 'asc' },
  });
  return {
    workspaces: rows.map((m) => ({
      id: m.workspace.id,
      name: m.workspace.name,
      role: m.role as MemberRole,
      current: m.workspaceId === caller.workspaceId,
      createdAt: m.workspace.createdAt.toISOString(),
    })),
  };
}

export async function createWorkspace(deps: ControlPlaneDeps, caller: Caller, name: string) {
  const ws = await deps.prisma.$transaction(async (tx) => {
    const created = await tx.workspace.create({ data: { name } });
    await tx.membership.create({ data: { workspaceId: created.id, userId: caller.userId, role: 'owner' } });
    return created;
  });
  return {
    workspace: {
      id: ws.id,
      name: ws.name,
      role: 'owner' as const,
      current: false,
      createdAt: ws.createdAt.toISOString(),
    },
  };
}

/** Member management acts on the caller's current workspace only (the id must be it). */
function assertCurrent(caller: Caller, workspaceId: string) {
  if (workspaceId !== caller.workspaceId) throw Errors.notFound('workspace not found');
}

function assertMayAssign(caller: Caller, role: MemberRole, targetCurrentRole?: MemberRole) {
  const isOwner = caller.roles.includes('owner');
  if ((role === 'owner' || targetCurrentRole === 'owner') && !isOwner) {
    throw Errors.forbidden('only an owner can grant or change the owner role');
  }
}

export async function listMembers(deps: ControlPlaneDeps, caller: Caller, workspaceId: string) {
  assertCurrent(caller, workspaceId);
  const rows = await deps.prisma.membership.findMany({
    where: { workspaceId },
    include: { user: { select: { id: true, email: true, name: true } } },
    orderBy: { createdAt: 'asc' },
  });
  return {
    members: rows.map((m) => ({
      userId: m.user.id,
      email: m.user.email,
      name: m.user.name,
      role: m.role as MemberRole,
      createdAt: m.createdAt.toISOString(),
    })),
  };
}

export async function addMember(
  deps: ControlPlaneDeps,
  caller: Caller,
  workspaceId: string,
  input: { email: string; role: MemberRole },
) {
  assertCurrent(caller, workspaceId);
  assertMayAssign(caller, input.role);
  const user = await deps.prisma.user.findUnique({ where: { email: input.email.trim().toLowerCase() } });
  if (!user) throw Errors.notFound('no account with this e-mail');
  const existing = await deps.prisma.membership.findUnique({
    where: { workspaceId_userId: { workspaceId, userId: user.id } },
  });
  if (existing) throw Errors.alreadyMember();
  const m = await deps.prisma.membership.create({ data: { workspaceId, userId: user.id, role: input.role } });
  return {
    member: {
      userId: user.id,
      email: user.email,
      name: user.name,
      role: m.role as MemberRole,
      createdAt: m.createdAt.toISOString(),
    },
  };
}

async function lockedOwnerCount(
  tx: Parameters<Parameters<ControlPlaneDeps['prisma']['$transaction']>[0]>[0],
  workspaceId: string,
) {
  // Serialise owner changes per workspace so two concurrent demotions cannot remove the last owner.
  await tx.$queryRaw`SELECT id FROM workspaces WHERE id = ${workspaceId}::uuid FOR UPDATE`;
  return tx.membership.count({ where: { workspaceId, role: 'owner' } });
}

export async function changeMemberRole(
  deps: ControlPlaneDeps,
  caller: Caller,
  workspaceId: string,
  userId: string,
  role: MemberRole,
) {
  assertCurrent(caller, workspaceId);
  return deps.prisma.$transaction(async (tx) => {
    const m = await tx.membership.findUnique({ where: { workspaceId_userId: { workspaceId, userId } } });
    if (!m) throw Errors.notFound('member not found');
    assertMayAssign(caller, role, m.role as MemberRole);
    if (m.role === 'owner' && role !== 'owner' && (await lockedOwnerCount(tx, workspaceId)) <= 1) {
      throw Errors.lastOwner();
    }
    const updated = await tx.membership.update({ where: { id: m.id }, data: { role } });
    return { member: { userId, role: updated.role as MemberRole } };
  });
}

export async function removeMember(
  deps: ControlPlaneDeps,
  caller: Caller,
  workspaceId: string,
  userId: string,
) {
  assertCurrent(caller, workspaceId);
  return deps.prisma.$transaction(async (tx) => {
    const m = await tx.membership.findUnique({ where: { workspaceId_userId: { workspaceId, userId } } });
    if (!m) throw Errors.notFound('member not found');
    assertMayAssign(caller, m.role as MemberRole, m.role as MemberRole);
    if (m.role === 'owner' && (await lockedOwnerCount(tx, workspaceId)) <= 1) {
      throw Errors.lastOwner();
    }
    await tx.membership.delete({ where: { id: m.id } });
    // Their sessions and tokens in this workspace stop working at once.
    await tx.session.updateMany({
      where: { userId, workspaceId, revokedAt: null },
      data: { revokedAt: deps.now() },
    });
    await tx.personalAccessToken.updateMany({
      where: { userId, workspaceId, revokedAt: null },
      data: { revokedAt: deps.now() },
    });
    return { removed: true as const, userId };
  });
}
