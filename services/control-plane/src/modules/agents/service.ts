import { randomUUID } from 'node:crypto';
import { importJWK, type JWK } from 'jose';
import { generateToken, hashToken } from '@vlt/crypto';
import { Errors } from '@vlt/service-kit';
import type { AgentTokenRecord } from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';
import { commitChange, auditEvent, audited } from '../../infra/change.js';
import { kvDelete, type OutboxItem } from '../../infra/outbox.js';

type AgentRow = {
  id: string;
  name: string;
  description: string | null;
  iconUrl: string | null;
  status: string;
  enrolledAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
};

export function agentView(a: AgentRow) {
  return {
    id: a.id,
    name: a.name,
    description: a.description,
    iconUrl: a.iconUrl,
    status: a.status as 'created' | 'active' | 'disabled',
    enrolledAt: a.enrolledAt ? a.enrolledAt.toISOString() : null,
    createdAt: a.createdAt.toISOString(),
    updatedAt: a.updatedAt.toISOString(),
  };
}

export async function createAgent(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  input: { name: string; description?: string | undefined; iconUrl?: string | undefined },
) {
  const bootstrapSecret = generateToken('vltb_');
  const now = deps.now();
  const agentId = randomUUID();
  const event = auditEvent(deps, {
    action: 'agent_created',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId,
    connectionId: null,
    decision: 'info',
    metadata: { name: input.name },
  });
  const agent = await commitChange(deps, async (tx, emit) => {
    const created = await tx.agent.create({
      data: {
        id: agentId,
        workspaceId: actor.workspaceId,
        name: input.name,
        description: input.description ?? null,
        iconUrl: input.iconUrl ?? null,
        status: 'created',
        createdBy: actor.userId,
      },
    });
    await tx.bootstrapSecret.create({
      data: {
        agentId,
        secretHash: hashToken(bootstrapSecret),
        expiresAt: new Date(now.getTime() + deps.config.bootstrapSecretTtlSeconds * 1000),
      },
    });
    emit(audited(event));
    return created;
  });
  return { agent: agentView(agent), bootstrapSecret, auditId: event.auditId };
}

export async function getAgent(deps: ControlPlaneDeps, workspaceId: string, id: string) {
  const agent = await deps.prisma.agent.findFirst({ where: { id, workspaceId } });
  if (!agent) throw Errors.notFound('agent not found');
  return agentView(agent);
}

/** KV deletions for every live token of an agent (data planes drop them at once). */
async function revokeAllTokens(tx: Prisma.TransactionClient, deps: ControlPlaneDeps, agentId: string) {
  const tokens = await tx.agentAccessToken.findMany({ where: { agentId }, select: { tokenHash: true } });
  await tx.agentAccessToken.deleteMany({ where: { agentId } });
  const items: OutboxItem[] = tokens.map((t) => kvDelete(deps.names.buckets.agentTokens, t.tokenHash));
  return { count: tokens.length, items };
}

export async function bootstrapAgent(
  deps: ControlPlaneDeps,
  input: { bootstrapSecret: string; publicKey: JWK },
) {
  // Validate the key is a usable P-256 public key before touching the secret.
  try {
    const { kty, crv, x, y } = input.publicKey;
    await importJWK({ kty, crv, x, y }, 'ES256');
  } catch {
    throw Errors.badRequest('publicKey is not a valid EC P-256 public key');
  }
  const publicKey = { kty: 'EC', crv: 'P-256', x: input.publicKey.x, y: input.publicKey.y };
  const now = deps.now();
  const secretHash = hashToken(input.bootstrapSecret);

  const result = await commitChange(deps, async (tx, emit) => {
    const secret = await tx.bootstrapSecret.findUnique({ where: { secretHash }, include: { agent: true } });
    if (!secret || secret.consumedAt || secret.expiresAt <= now) {
      throw Errors.unauthorized('invalid, expired or already used bootstrap secret');
    }
    // Same lock as token issuance: tokens are either issued before this (and revoked below) or refused.
    await tx.$queryRaw`SELECT id FROM agents WHERE id = ${secret.agentId}::uuid FOR UPDATE`;
    if (secret.agent.status === 'disabled') throw Errors.agentDisabled();
    // Consume atomically: a concurrent bootstrap with the same secret updates zero rows.
    const consumed = await tx.bootstrapSecret.updateMany({
      where: { id: secret.id, consumedAt: null },
      data: { consumedAt: now },
    });
    if (consumed.count !== 1) throw Errors.unauthorized('invalid, expired or already used bootstrap secret');
    const wasActive = secret.agent.status === 'active';
    const revoked = wasActive ? await revokeAllTokens(tx, deps, secret.agentId) : { count: 0, items: [] };
    const agent = await tx.agent.update({
      where: { id: secret.agentId },
      data: { status: 'active', publicKeyJwk: publicKey, enrolledAt: now },
    });
    const event = auditEvent(deps, {
      action: 'agent_enrolled',
      actor: `agent:${agent.id}`,
      workspaceId: agent.workspaceId,
      agentId: agent.id,
      connectionId: null,
      decision: 'info',
      metadata: { rebootstrap: wasActive, tokensRevoked: revoked.count },
    });
    emit(...revoked.items, audited(event));
    return agent;
  });
  return {
    agentId: result.id,
    name: result.name,
    status: 'active' as const,
    workspaceId: result.workspaceId,
  };
}

export async function listAgents(deps: ControlPlaneDeps, workspaceId: string) {
  const rows = await deps.prisma.agent.findMany({ where: { workspaceId }, orderBy: { createdAt: 'asc' } });
  return rows.map(agentView);
}

async function scopedAgent(deps: ControlPlaneDeps, workspaceId: string, id: string) {
  const agent = await deps.prisma.agent.findFirst({ where: { id, workspaceId } });
  // Another workspace's agent is indistinguishable from none.
  if (!agent) throw Errors.notFound('agent not found');
  return agent;
}

export async function updateAgent(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
  input: {
    name?: string | undefined;
    description?: string | null | undefined;
    iconUrl?: string | null | undefined;
  },
) {
  await scopedAgent(deps, actor.workspaceId, id);
  const changed = Object.keys(input).filter((k) => input[k as keyof typeof input] !== undefined);
  if (changed.length === 0) throw Errors.badRequest('at least one of name, description, iconUrl is required');
  const event = auditEvent(deps, {
    action: 'agent_updated',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: id,
    connectionId: null,
    decision: 'info',
    metadata: { changed },
  });
  const row = await commitChange(deps, async (tx, emit) => {
    const updated = await tx.agent.update({
      where: { id },
      data: {
        ...(input.name !== undefined && { name: input.name }),
        ...(input.description !== undefined && { description: input.description }),
        ...(input.iconUrl !== undefined && { iconUrl: input.iconUrl }),
      },
    });
    emit(audited(event));
    return updated;
  });
  return { agent: agentView(row), auditId: event.auditId };
}

/** Deletes the agent and, by cascade, its policies, tokens, secrets and approval requests. */
export async function deleteAgent(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  const agent = await scopedAgent(deps, actor.workspaceId, id);
  const event = auditEvent(deps, {
    action: 'agent_deleted',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: id,
    connectionId: null,
    decision: 'info',
    metadata: { name: agent.name },
  });
  await commitChange(deps, async (tx, emit) => {
    await tx.$queryRaw`SELECT id FROM agents WHERE id = ${id}::uuid FOR UPDATE`;
    const revoked = await revokeAllTokens(tx, deps, id);
    const policies = await tx.policy.findMany({ where: { agentId: id }, select: { id: true } });
    await tx.agent.delete({ where: { id } });
    emit(...revoked.items, ...policies.map((p): OutboxItem => kvDelete(deps.names.buckets.policies, p.id)), {
      kind: 'event',
      event: {
        ...event,
        metadata: { ...event.metadata, tokensRevoked: revoked.count, policiesDeleted: policies.length },
      },
    });
  });
  return { deleted: true as const, id, auditId: event.auditId };
}

/** A new one-time secret; earlier unused ones stop working. */
export async function newBootstrapSecret(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  const agent = await scopedAgent(deps, actor.workspaceId, id);
  if (agent.status === 'disabled') throw Errors.agentDisabled();
  const bootstrapSecret = generateToken('vltb_');
  const now = deps.now();
  await deps.prisma.$transaction(async (tx) => {
    await tx.bootstrapSecret.updateMany({
      where: { agentId: id, consumedAt: null },
      data: { consumedAt: now },
    });
    await tx.bootstrapSecret.create({
      data: {
        agentId: id,
        secretHash: hashToken(bootstrapSecret),
        expiresAt: new Date(now.getTime() + deps.config.bootstrapSecretTtlSeconds * 1000),
      },
    });
  });
  return { bootstrapSecret };
}

/** Every token is deleted at once and every data plane drops it on the KV delete. */
export async function disableAgent(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  await scopedAgent(deps, actor.workspaceId, id);
  const tokensRevoked = await commitChange(deps, async (tx, emit) => {
    await tx.$queryRaw`SELECT id FROM agents WHERE id = ${id}::uuid FOR UPDATE`;
    const revoked = await revokeAllTokens(tx, deps, id);
    await tx.agent.update({ where: { id }, data: { status: 'disabled' } });
    const event = auditEvent(deps, {
      action: 'agent_disabled',
      actor: actor.userId,
      workspaceId: actor.workspaceId,
      agentId: id,
      connectionId: null,
      decision: 'info',
      metadata: { tokensRevoked: revoked.count },
    });
    emit(...revoked.items, audited(event));
    return revoked.count;
  });
  return { success: true as const, tokensRevoked };
}

export async function enableAgent(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  const agent = await scopedAgent(deps, actor.workspaceId, id);
  if (agent.status !== 'disabled')
    return { success: true as const, status: agent.status as 'created' | 'active' };
  const status = agent.publicKeyJwk ? ('active' as const) : ('created' as const);
  await commitChange(deps, async (tx, emit) => {
    await tx.agent.update({ where: { id }, data: { status } });
    const event = auditEvent(deps, {
      action: 'agent_enabled',
      actor: actor.userId,
      workspaceId: actor.workspaceId,
      agentId: id,
      connectionId: null,
      decision: 'info',
      metadata: { status },
    });
    emit(audited(event));
  });
  return { success: true as const, status };
}

/** What data planes cache for a token: its hash, owner and expiry, never the token. */
export function agentTokenRecord(t: {
  tokenHash: string;
  agentId: string;
  workspaceId: string;
  expiresAt: Date;
}): AgentTokenRecord {
  return {
    v: 1,
    tokenHash: t.tokenHash,
    agentId: t.agentId,
    workspaceId: t.workspaceId,
    expiresAt: t.expiresAt.getTime(),
  };
}
