import { generateToken, hashToken } from '@vlt/crypto';
import { Errors } from '@vlt/service-kit';
import type { Role, Scope } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { commitChange, auditEvent, audited } from '../../infra/change.js';

type Caller = { userId: string; workspaceId: string; roles: Role[]; scopes: Scope[] };

function view(t: { id: string; name: string; expiresAt: Date; createdAt: Date }, now: Date) {
  return {
    id: t.id,
    name: t.name,
    expiresAt: t.expiresAt.toISOString(),
    createdAt: t.createdAt.toISOString(),
    isExpired: t.expiresAt <= now,
  };
}

export async function createPat(
  deps: ControlPlaneDeps,
  caller: Caller,
  input: { name: string; expiresInDays: number; scopes?: string[] | undefined },
) {
  // A token never mints a stronger one: the new PAT gets at most the presenting credential's
  // scopes (a narrowed PAT or exchanged JWT stays narrowed), and they are stored explicitly.
  const allowed = caller.scopes;
  const unknown = (input.scopes ?? []).filter((s) => !allowed.includes(s as Scope));
  if (unknown.length)
    throw Errors.badRequest(`scopes not available to this credential: ${unknown.join(', ')}`);
  const scopes = input.scopes?.length ? allowed.filter((s) => input.scopes!.includes(s)) : [...allowed];
  const plainToken = generateToken('vltp_');
  const now = deps.now();
  const event = auditEvent(deps, {
    action: 'token_created',
    actor: caller.userId,
    workspaceId: caller.workspaceId,
    agentId: null,
    connectionId: null,
    decision: 'info',
    metadata: { name: input.name, expiresInDays: input.expiresInDays },
  });
  const row = await commitChange(deps, async (tx, emit) => {
    const created = await tx.personalAccessToken.create({
      data: {
        userId: caller.userId,
        workspaceId: caller.workspaceId,
        name: input.name,
        tokenHash: hashToken(plainToken),
        scopes,
        expiresAt: new Date(now.getTime() + input.expiresInDays * 86_400_000),
      },
    });
    emit({ kind: 'event', event: { ...event, metadata: { ...event.metadata, tokenId: created.id } } });
    return created;
  });
  return { token: view(row, now), plainToken, auditId: event.auditId };
}

export async function listPats(deps: ControlPlaneDeps, caller: Caller) {
  const rows = await deps.prisma.personalAccessToken.findMany({
    where: { userId: caller.userId, workspaceId: caller.workspaceId, revokedAt: null },
    orderBy: { createdAt: 'desc' },
  });
  const now = deps.now();
  return { tokens: rows.map((r) => view(r, now)) };
}

async function ownPat(deps: ControlPlaneDeps, caller: Caller, id: string) {
  const pat = await deps.prisma.personalAccessToken.findFirst({
    where: { id, userId: caller.userId, workspaceId: caller.workspaceId, revokedAt: null },
  });
  if (!pat) throw Errors.notFound('token not found');
  return pat;
}

export async function renamePat(deps: ControlPlaneDeps, caller: Caller, id: string, name: string) {
  await ownPat(deps, caller, id);
  const row = await deps.prisma.personalAccessToken.update({ where: { id }, data: { name } });
  return { token: view(row, deps.now()) };
}

export async function revokePat(deps: ControlPlaneDeps, caller: Caller, id: string) {
  await ownPat(deps, caller, id);
  const event = auditEvent(deps, {
    action: 'token_revoked',
    actor: caller.userId,
    workspaceId: caller.workspaceId,
    agentId: null,
    connectionId: null,
    decision: 'info',
    metadata: { tokenId: id },
  });
  await commitChange(deps, async (tx, emit) => {
    await tx.personalAccessToken.update({ where: { id }, data: { revokedAt: deps.now() } });
    emit(audited(event));
  });
  return { revoked: true as const, id, auditId: event.auditId };
}
