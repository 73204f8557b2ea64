import { randomUUID } from 'node:crypto';
import { openJson, sealJson } from '@vlt/crypto';
import { Errors } from '@vlt/service-kit';
import { UpstreamError } from '@vlt/upstream';
import type { ConnectionDescriptor, CredentialsResponse, ProviderCredentials } from '@vlt/contracts';
import { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';
import { commitChange, auditEvent, audited } from '../../infra/change.js';
import { kvPut } from '../../infra/outbox.js';

const credentialAad = (connectionId: string) => `connection:${connectionId}`;

/** The site URL is reduced to its origin; anything else in it is refused, not ignored. */
export function normaliseSiteUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw Errors.badRequest('siteUrl is not a valid URL');
  }
  if (url.protocol !== 'https:') throw Errors.badRequest('siteUrl must use https');
  if (url.username || url.password) throw Errors.badRequest('siteUrl must not contain credentials');
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    throw Errors.badRequest('siteUrl must be the site origin, e.g. https://example.issues.test');
  }
  return new URL(url.origin);
}

export function connectionDescriptor(c: {
  id: string;
  workspaceId: string;
  provider: string;
  service: string;
  label: string;
  status: string;
  singleton: boolean;
  metadata: unknown;
}): ConnectionDescriptor {
  const meta = (c.metadata ?? {}) as { siteUrl?: string };
  return {
    v: 1,
    id: c.id,
    workspaceId: c.workspaceId,
    provider: c.provider,
    service: c.service,
    label: c.label,
    status: c.status as ConnectionDescriptor['status'],
    singleton: c.singleton,
    baseUrl: meta.siteUrl ?? null,
  };
}

export async function createIssueTrackerConnection(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  input: { siteUrl: string; email: string; apiToken: string; label?: string | undefined },
) {
  const site = normaliseSiteUrl(input.siteUrl);
  const basic = Buffer.from(`${input.email}:${input.apiToken}`).toString('base64');
  let myself: { accountId?: string; displayName?: string } = {};
  try {
    const res = await deps.upstream.request({
      url: new URL('/rest/api/3/myself', site),
      method: 'GET',
      headers: { authorization: `Basic ${basic}`, accept: 'application/json' },
      maxResponseBytes: 256 * 1024,
    });
    if (res.status === 401 || res.status === 403)
      throw Errors.badRequest('the issue tracker rejected these credentials');
    if (res.status < 200 || res.status >= 300)
      throw Errors.badRequest(`the issue tracker answered ${res.status}`);
    try {
      myself = JSON.parse(res.body.toString('utf8')) as typeof myself;
    } catch {
      throw Errors.badRequest('the issue tracker did not answer with JSON');
    }
  } catch (err) {
    if (err instanceof UpstreamError) {
      throw Errors.badRequest(
        err.kind === 'ssrf_blocked'
          ? 'siteUrl points to an address that is not allowed'
          : 'could not reach the issue tracker',
      );
    }
    throw err;
  }

  const id = randomUUID();
  const credentials: ProviderCredentials = { type: 'basic', username: input.email, password: input.apiToken };
  const label = input.label ?? site.hostname;
  const metadata = {
    siteUrl: site.origin,
    accountId: typeof myself.accountId === 'string' ? myself.accountId : null,
    displayName: typeof myself.displayName === 'string' ? myself.displayName : null,
  };
  const event = auditEvent(deps, {
    action: 'connection_created',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: null,
    connectionId: id,
    decision: 'info',
    metadata: { provider: 'issues', service: 'issues', siteUrl: site.origin },
  });
  const created = await commitChange(deps, async (tx, emit) => {
    const row = await tx.connection.create({
      data: {
        id,
        workspaceId: actor.workspaceId,
        provider: 'issues',
        service: 'issues',
        label,
        status: 'healthy',
        singleton: false,
        grantedScopes: [],
        metadata,
        credentials: sealJson(
          deps.keyring,
          credentials,
          credentialAad(id),
        ) as unknown as Prisma.InputJsonValue,
        createdBy: actor.userId,
      },
    });
    emit(kvPut(deps.names.buckets.connections, id, connectionDescriptor(row)), audited(event));
    return row;
  });
  return {
    connection: {
      id: created.id,
      provider: created.provider,
      service: created.service,
      label: created.label,
      status: created.status as 'healthy',
    },
    auditId: event.auditId,
  };
}

export async function listConnections(deps: ControlPlaneDeps, workspaceId: string) {
  const rows = await deps.prisma.connection.findMany({
    where: { workspaceId, status: { not: 'revoked' } },
    orderBy: { createdAt: 'asc' },
    include: { policies: { include: { agent: { select: { name: true } } } } },
  });
  return rows.map((c) => ({
    id: c.id,
    provider: c.provider,
    service: c.service,
    label: c.label,
    status: c.status as 'healthy' | 'needs_reauth' | 'revoked',
    singleton: c.singleton,
    grantedScopes: c.grantedScopes,
    metadata: (c.metadata ?? {}) as Record<string, unknown>,
    createdAt: c.createdAt.toISOString(),
    policies: c.policies.map((p) => ({
      id: p.id,
      agentId: p.agentId,
      agentName: p.agent.name,
      defaultMode: p.defaultMode,
      stepUpApproval: p.stepUpApproval,
      allowedModels: p.allowedModels as ('A' | 'B')[],
      allowlists: p.allowlists as never,
      rateLimits: (p.rateLimits ?? null) as never,
      timeWindows: p.timeWindows as never,
    })),
  }));
}

/**
 * Served over request/reply to data planes only: decrypts a connection's credentials for
 * an agent that holds a policy on it. The refresh token (OAuth) never leaves this process.
 */
export async function resolveCredentialsForDataPlane(
  deps: ControlPlaneDeps,
  req: { workspaceId: string; agentId: string; connectionId: string },
): Promise<CredentialsResponse> {
  const policy = await deps.prisma.policy.findFirst({
    where: { agentId: req.agentId, connectionId: req.connectionId, workspaceId: req.workspaceId },
    include: { connection: true, agent: { select: { status: true } } },
  });
  if (!policy || policy.agent.status !== 'active') return { ok: false, code: 'forbidden' };
  const c = policy.connection;
  if (c.status === 'revoked' || !c.credentials) return { ok: false, code: 'revoked' };
  if (c.status === 'needs_reauth') return { ok: false, code: 'needs_reauth' };
  const credentials = openJson<ProviderCredentials>(
    deps.keyring,
    c.credentials as never,
    credentialAad(c.id),
  );
  return { ok: true, credentials, ttlMs: 30_000 };
}

async function scopedConnection(deps: ControlPlaneDeps, workspaceId: string, id: string) {
  const c = await deps.prisma.connection.findFirst({ where: { id, workspaceId } });
  if (!c) throw Errors.notFound('connection not found');
  return c;
}

/**
 * Irreversible: the encrypted credentials are destroyed, the row is kept for audit, and
 * every data plane sees the `revoked` descriptor (Model A and B blocked) via the outbox.
 */
export async function revokeConnection(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
) {
  const current = await scopedConnection(deps, actor.workspaceId, id);
  if (current.status === 'revoked') throw Errors.connectionRevoked('connection is already revoked');
  const event = auditEvent(deps, {
    action: 'connection_revoked',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: null,
    connectionId: id,
    decision: 'info',
    metadata: { provider: current.provider, service: current.service },
  });
  const row = await commitChange(deps, async (tx, emit) => {
    const updated = await tx.connection.update({
      where: { id },
      data: { status: 'revoked', credentials: Prisma.DbNull, revokedAt: deps.now() },
    });
    emit(kvPut(deps.names.buckets.connections, id, connectionDescriptor(updated)), audited(event));
    return updated;
  });
  return {
    connection: { id: row.id, provider: row.provider, label: row.label, status: 'revoked' as const },
    auditId: event.auditId,
  };
}

export async function relabelConnection(
  deps: ControlPlaneDeps,
  actor: { userId: string; workspaceId: string },
  id: string,
  label: string,
) {
  const current = await scopedConnection(deps, actor.workspaceId, id);
  if (current.status === 'revoked') throw Errors.connectionRevoked();
  const row = await commitChange(deps, async (tx, emit) => {
    const updated = await tx.connection.update({ where: { id }, data: { label } });
    emit(kvPut(deps.names.buckets.connections, id, connectionDescriptor(updated)));
    return updated;
  });
  return {
    connection: {
      id: row.id,
      provider: row.provider,
      service: row.service,
      label: row.label,
      status: row.status as 'healthy' | 'needs_reauth',
    },
  };
}
