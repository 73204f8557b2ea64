import { compilePolicy } from '@vlt/policy-engine';
import { Errors } from '@vlt/service-kit';
import { DEFAULT_CONTACT_FIELDS, defaultAllowlistFor, isContactsService, serviceSpec } from '@vlt/contracts';
import type { AllowlistEntry, AuditAction, PolicyDocument, PolicySnapshot, PolicyView } from '@vlt/contracts';
import { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';
import { commitChange, auditEvent, audited, type Emit } from '../../infra/change.js';
import { kvDelete, kvPut } from '../../infra/outbox.js';

type PolicyRow = Prisma.PolicyGetPayload<object>;

export function policyDocument(p: PolicyRow): PolicyDocument {
  return {
    id: p.id,
    workspaceId: p.workspaceId,
    agentId: p.agentId,
    connectionId: p.connectionId,
    allowedModels: p.allowedModels as PolicyDocument['allowedModels'],
    defaultMode: p.defaultMode as PolicyDocument['defaultMode'],
    stepUpApproval: p.stepUpApproval as PolicyDocument['stepUpApproval'],
    allowlists: p.allowlists as PolicyDocument['allowlists'],
    rateLimits: (p.rateLimits ?? null) as PolicyDocument['rateLimits'],
    timeWindows: p.timeWindows as PolicyDocument['timeWindows'],
    rules: p.rules as PolicyDocument['rules'],
    providerConstraints: (p.providerConstraints ?? null) as PolicyDocument['providerConstraints'],
    contactFields: (p.contactFields ?? null) as PolicyDocument['contactFields'],
    version: p.version,
  };
}

/** `service`: the connection's; a contacts policy shows what it enforces, the default included. */
export function policyView(p: PolicyRow, service: string): PolicyView {
  const doc = policyDocument(p);
  return {
    id: doc.id,
    agentId: doc.agentId,
    connectionId: doc.connectionId,
    allowedModels: doc.allowedModels,
    defaultMode: doc.defaultMode,
    stepUpApproval: doc.stepUpApproval,
    allowlists: doc.allowlists,
    rateLimits: doc.rateLimits,
    timeWindows: doc.timeWindows,
    rules: doc.rules,
    providerConstraints: doc.providerConstraints,
    contactFields: isContactsService(service) ? { ...(doc.contactFields ?? DEFAULT_CONTACT_FIELDS) } : null,
    version: doc.version,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
  };
}

/** What data planes enforce: the policy compiled once here, published as a versioned snapshot. */
export function policySnapshot(
  p: PolicyRow,
  connection: { provider: string; service: string },
): PolicySnapshot {
  return {
    v: 1,
    policyId: p.id,
    workspaceId: p.workspaceId,
    agentId: p.agentId,
    connectionId: p.connectionId,
    version: p.version,
    compiled: compilePolicy(policyDocument(p), connection),
  };
}

/**
 * Service-specific allowlist defaults so Model B works as soon as a policy exists (ADR 0007,
 * 0042): the catalog's entries on the origin the connection was made against. Writes still
 * pass the step-up and mode checks.
 */
export function defaultAllowlists(connection: { service: string; metadata: unknown }): AllowlistEntry[] {
  const meta = (connection.metadata ?? {}) as { siteUrl?: unknown; apiUrl?: unknown };
  const base =
    typeof meta.siteUrl === 'string' ? meta.siteUrl : typeof meta.apiUrl === 'string' ? meta.apiUrl : null;
  const service = serviceSpec(connection.service);
  return service && base ? defaultAllowlistFor(service, base) : [];
}

async function loadScoped(deps: ControlPlaneDeps, workspaceId: string, id: string) {
  const policy = await deps.prisma.policy.findFirst({
    where: { id, workspaceId },
    include: { connection: true },
  });
  if (!policy) throw Errors.notFound('policy not found');
  return policy;
}

export async function createPolicy(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  input: {
    agentId: string;
    connectionId: string;
    allowedModels?: ('A' | 'B')[] | undefined;
    defaultMode?: PolicyDocument['defaultMode'] | undefined;
    stepUpApproval?: PolicyDocument['stepUpApproval'] | undefined;
  },
) {
  const [agent, connection] = await Promise.all([
    deps.prisma.agent.findFirst({ where: { id: input.agentId, workspaceId: actor.workspaceId } }),
    deps.prisma.connection.findFirst({ where: { id: input.connectionId, workspaceId: actor.workspaceId } }),
  ]);
  if (!agent) throw Errors.notFound('agent not found');
  if (!connection || connection.status === 'revoked') throw Errors.notFound('connection not found');
  const allowedModels = input.allowedModels ? [...new Set(input.allowedModels)] : ['A', 'B'];

  const result = await commitChange(deps, (tx, emit) =>
    insertPolicy(deps, tx, emit, actor, {
      agentId: agent.id,
      connection,
      allowedModels,
      defaultMode: input.defaultMode,
      stepUpApproval: input.stepUpApproval,
    }),
  );
  return { policy: policyView(result.row, connection.service), auditId: result.auditId };
}

/**
 * Creates the binding inside the caller's change (a new connection creates its agent's policy
 * in the same transaction): the default allowlist, the compiled snapshot and `policy_created`.
 */
export async function insertPolicy(
  deps: ControlPlaneDeps,
  tx: Prisma.TransactionClient,
  emit: Emit,
  actor: { userId: string; workspaceId: string },
  input: {
    agentId: string;
    connection: { id: string; provider: string; service: string; metadata: unknown };
    allowedModels: string[];
    defaultMode?: PolicyDocument['defaultMode'] | undefined;
    stepUpApproval?: PolicyDocument['stepUpApproval'] | undefined;
  },
) {
  const { connection, allowedModels } = input;
  const existing = await tx.policy.findUnique({
    where: { agentId_connectionId: { agentId: input.agentId, connectionId: connection.id } },
  });
  if (existing) throw Errors.policyExists();
  const row = await tx.policy.create({
    data: {
      workspaceId: actor.workspaceId,
      agentId: input.agentId,
      connectionId: connection.id,
      allowedModels,
      defaultMode: input.defaultMode ?? 'read_only',
      stepUpApproval: input.stepUpApproval ?? 'risk_based',
      allowlists: defaultAllowlists(connection) as unknown as Prisma.InputJsonValue,
      timeWindows: [],
      rules: { request: [], response: [] },
    },
  });
  const event = auditEvent(deps, {
    action: 'policy_created',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: input.agentId,
    connectionId: connection.id,
    decision: 'info',
    metadata: {
      policyId: row.id,
      allowedModels,
      defaultMode: row.defaultMode,
      stepUpApproval: row.stepUpApproval,
    },
  });
  emit(kvPut(deps.names.buckets.policies, row.id, policySnapshot(row, connection)), audited(event));
  return { row, auditId: event.auditId };
}

/**
 * Every policy change bumps the version, republishes the compiled snapshot and is audited
 * as `policy_updated` with the part that changed — all in one transaction.
 */
export async function updatePolicy(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
  part: string,
  data: Prisma.PolicyUpdateInput,
  /** More audit metadata: the new value of a security setting worth reading in the trail. */
  auditMetadata: Record<string, unknown> = {},
) {
  const current = await loadScoped(deps, actor.workspaceId, id);
  const result = await commitChange(deps, async (tx, emit) => {
    const row = await tx.policy.update({
      where: { id: current.id },
      data: { ...data, version: { increment: 1 } },
    });
    // Compile before commit: a policy the engine cannot compile is never stored.
    let snapshot;
    try {
      snapshot = policySnapshot(row, current.connection);
    } catch (err) {
      throw Errors.badRequest(`policy cannot be compiled: ${(err as Error).message}`);
    }
    const action: AuditAction = 'policy_updated';
    const event = auditEvent(deps, {
      action,
      actor: actor.userId,
      workspaceId: actor.workspaceId,
      agentId: row.agentId,
      connectionId: row.connectionId,
      decision: 'info',
      metadata: { policyId: row.id, changed: part, version: row.version, ...auditMetadata },
    });
    emit(kvPut(deps.names.buckets.policies, row.id, snapshot), audited(event));
    return { row, auditId: event.auditId };
  });
  return { policy: policyView(result.row, current.connection.service), auditId: result.auditId };
}

export interface PolicySettingsInput {
  allowedModels?: ('A' | 'B')[] | undefined;
  defaultMode?: PolicyDocument['defaultMode'] | undefined;
  stepUpApproval?: PolicyDocument['stepUpApproval'] | undefined;
  /** null restores the default. */
  contactFields?: PolicyDocument['contactFields'];
}

/**
 * `PUT /v1/policies/:id`. Contact field settings exist on contacts connections only (400
 * elsewhere); their new value is written into the `policy_updated` audit event (ADR 0045).
 */
export async function updatePolicySettings(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
  input: PolicySettingsInput,
) {
  const data: Prisma.PolicyUpdateInput = {
    ...(input.allowedModels && { allowedModels: [...new Set(input.allowedModels)] }),
    ...(input.defaultMode && { defaultMode: input.defaultMode }),
    ...(input.stepUpApproval && { stepUpApproval: input.stepUpApproval }),
  };
  const audit: Record<string, unknown> = {};
  if (input.contactFields !== undefined) {
    const current = await loadScoped(deps, actor.workspaceId, id);
    if (!isContactsService(current.connection.service)) {
      throw Errors.badRequest(
        `contactFields only applies to contacts connections; this policy's connection is ${current.connection.service}`,
      );
    }
    data.contactFields =
      input.contactFields === null
        ? Prisma.DbNull
        : (input.contactFields as unknown as Prisma.InputJsonValue);
    audit.contactFields = input.contactFields ?? { ...DEFAULT_CONTACT_FIELDS, default: true };
  }
  const onlyContactFields = Object.keys(data).length === 1 && input.contactFields !== undefined;
  return updatePolicy(deps, actor, id, onlyContactFields ? 'contactFields' : 'settings', data, audit);
}

export async function listPolicies(deps: ControlPlaneDeps, workspaceId: string) {
  // Scoped through the workspace's agents (spec).
  const rows = await deps.prisma.policy.findMany({
    where: { agent: { workspaceId } },
    orderBy: { createdAt: 'asc' },
    include: { connection: { select: { service: true } } },
  });
  return { policies: rows.map((r) => policyView(r, r.connection.service)) };
}

export async function getPolicy(deps: ControlPlaneDeps, workspaceId: string, id: string) {
  const p = await loadScoped(deps, workspaceId, id);
  return { policy: policyView(p, p.connection.service) };
}

export async function getRules(deps: ControlPlaneDeps, workspaceId: string, id: string) {
  return { rules: policyDocument(await loadScoped(deps, workspaceId, id)).rules };
}

export async function setProviderConstraints(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
  constraints: PolicyDocument['providerConstraints'],
) {
  const current = await loadScoped(deps, actor.workspaceId, id);
  if (constraints && constraints.provider !== current.connection.provider) {
    throw Errors.badRequest(
      `providerConstraints.provider must be the connection's provider (${current.connection.provider})`,
    );
  }
  return updatePolicy(deps, actor, id, 'providerConstraints', {
    providerConstraints:
      constraints === null ? Prisma.DbNull : (constraints as unknown as Prisma.InputJsonValue),
  });
}

export async function deletePolicy(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  const current = await loadScoped(deps, actor.workspaceId, id);
  const event = auditEvent(deps, {
    action: 'policy_deleted',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: current.agentId,
    connectionId: current.connectionId,
    decision: 'info',
    metadata: { policyId: id },
  });
  await commitChange(deps, async (tx, emit) => {
    await tx.policy.delete({ where: { id } });
    emit(kvDelete(deps.names.buckets.policies, id), audited(event));
  });
  return { deleted: true as const, id, auditId: event.auditId };
}
