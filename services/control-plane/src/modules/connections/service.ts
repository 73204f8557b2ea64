/**
 * Connections: creating them (issue tracker here; OAuth in oauth-flow.ts; bot tokens and API
 * keys in secret-connections.ts, all through `insertConnection`), listing, relabelling,
 * revoking, and serving their credentials to data planes.
 */
import { randomUUID } from 'node:crypto';
import { Errors } from '@vlt/service-kit';
import { UpstreamError } from '@vlt/upstream';
import { serviceSpec, type CredentialsResponse, type ProviderId } from '@vlt/contracts';
import { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';
import { commitChange, auditEvent, audited, type Emit } from '../../infra/change.js';
import { kvPut } from '../../infra/outbox.js';
import { insertPolicy } from '../policies/service.js';
import { connectionDescriptor } from './descriptor.js';
import { oauthAppFor, oauthEndpoints, revokeAtProvider } from './oauth-client.js';
import {
  openCredentials,
  sealCredentials,
  toDataPlane,
  type StoredCredentials,
} from './stored-credentials.js';
import { REFRESH_SKEW_MS, usableCredentials } from './token-refresh.js';

export { connectionDescriptor } from './descriptor.js';

type Actor = { userId: string; workspaceId: string };

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

export interface NewConnection {
  id?: string;
  service: string;
  label: string;
  grantedScopes: string[];
  metadata: Record<string, unknown>;
  credentials: StoredCredentials;
  /** Bind this agent with a new policy in the same transaction (OAuth `agentId`). */
  bind?: { agentId: string; allowedModels: string[] } | undefined;
}

/**
 * Writes a new connection (and its agent's policy when asked) inside the caller's change, with
 * `connection_created` and the data-plane descriptor. A second live connection of a singleton
 * service is 409, also when two requests race (the partial unique index decides).
 */
export async function insertConnection(
  deps: ControlPlaneDeps,
  tx: Prisma.TransactionClient,
  emit: Emit,
  actor: Actor,
  input: NewConnection,
) {
  const service = serviceSpec(input.service);
  if (!service) throw Errors.badRequest(`unknown service ${input.service}`);
  if (service.singleton) {
    const live = await tx.connection.findFirst({
      where: { workspaceId: actor.workspaceId, service: service.id, status: { not: 'revoked' } },
      select: { id: true },
    });
    if (live) throw Errors.connectionExists();
  }
  const id = input.id ?? randomUUID();
  let row;
  try {
    row = await tx.connection.create({
      data: {
        id,
        workspaceId: actor.workspaceId,
        provider: service.provider,
        service: service.id,
        label: input.label,
        status: 'healthy',
        singleton: service.singleton,
        grantedScopes: input.grantedScopes,
        metadata: input.metadata as Prisma.InputJsonValue,
        credentials: sealCredentials(deps.keyring, id, input.credentials),
        createdBy: actor.userId,
      },
    });
  } catch (err) {
    if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002')
      throw Errors.connectionExists();
    throw err;
  }
  const event = auditEvent(deps, {
    action: 'connection_created',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: input.bind?.agentId ?? null,
    connectionId: id,
    decision: 'info',
    metadata: { provider: service.provider, service: service.id, scopes: input.grantedScopes },
  });
  emit(kvPut(deps.names.buckets.connections, id, connectionDescriptor(row)), audited(event));
  if (input.bind) {
    await insertPolicy(deps, tx, emit, actor, {
      agentId: input.bind.agentId,
      connection: row,
      allowedModels: input.bind.allowedModels,
    });
  }
  return { row, auditId: event.auditId };
}

export async function createIssueTrackerConnection(
  deps: ControlPlaneDeps,
  actor: Actor,
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

  const created = await commitChange(deps, (tx, emit) =>
    insertConnection(deps, tx, emit, actor, {
      service: 'issues',
      label: input.label ?? site.hostname,
      grantedScopes: [],
      metadata: {
        siteUrl: site.origin,
        accountId: typeof myself.accountId === 'string' ? myself.accountId : null,
        displayName: typeof myself.displayName === 'string' ? myself.displayName : null,
      },
      credentials: { type: 'basic', username: input.email, password: input.apiToken },
    }),
  );
  return { connection: summary(created.row), auditId: created.auditId };
}

export function summary(c: { id: string; provider: string; service: string; label: string; status: string }) {
  return {
    id: c.id,
    provider: c.provider,
    service: c.service,
    label: c.label,
    status: c.status as 'healthy' | 'needs_reauth' | 'revoked',
  };
}

/**
 * A user sees the workspace's connections; an agent only those a policy binds it to, with only
 * its own policy (other agents' bindings are not its business).
 */
export async function listConnections(deps: ControlPlaneDeps, workspaceId: string, agentId?: string) {
  const rows = await deps.prisma.connection.findMany({
    where: { workspaceId, status: { not: 'revoked' }, ...(agentId && { policies: { some: { agentId } } }) },
    orderBy: { createdAt: 'asc' },
    include: {
      policies: { where: agentId ? { agentId } : {}, include: { agent: { select: { name: true } } } },
    },
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

/** How long a data plane may keep what it was given (never past an access token's refresh point). */
const CREDENTIAL_TTL_MS = 30_000;

/**
 * Served over request/reply to data planes only: a connection's credentials for an agent that
 * holds a policy on it, an OAuth token refreshed first when it is about to expire. The refresh
 * token never leaves this process (`toDataPlane`).
 */
export async function resolveCredentialsForDataPlane(
  deps: ControlPlaneDeps,
  req: { workspaceId: string; agentId: string; connectionId: string },
): Promise<CredentialsResponse> {
  const policy = await deps.prisma.policy.findFirst({
    where: { agentId: req.agentId, connectionId: req.connectionId, workspaceId: req.workspaceId },
    select: { agent: { select: { status: true } } },
  });
  if (!policy || policy.agent.status !== 'active') return { ok: false, code: 'forbidden' };
  const usable = await usableCredentials(deps, req.connectionId);
  if (!usable.ok) return usable;
  const credentials = toDataPlane(usable.credentials);
  const expiresAt = usable.credentials.type === 'oauth' ? usable.credentials.expiresAt : null;
  const ttlMs =
    expiresAt === null
      ? CREDENTIAL_TTL_MS
      : Math.max(0, Math.min(CREDENTIAL_TTL_MS, expiresAt - REFRESH_SKEW_MS - deps.now().getTime()));
  return { ok: true, credentials, ttlMs };
}

async function scopedConnection(deps: ControlPlaneDeps, workspaceId: string, id: string, agentId?: string) {
  const c = await deps.prisma.connection.findFirst({
    where: { id, workspaceId, ...(agentId && { policies: { some: { agentId } } }) },
  });
  if (!c) throw Errors.notFound('connection not found');
  return c;
}

/**
 * Best effort, before the vault forgets the token: RFC 7009 where the provider offers it.
 * The outcome goes into the audit event; a provider that is down never blocks a revoke.
 */
async function revokeUpstream(
  deps: ControlPlaneDeps,
  c: { id: string; workspaceId: string; provider: string; credentials: unknown },
): Promise<'revoked' | 'failed' | 'not_offered'> {
  const endpoints = deps.config.providers[c.provider as ProviderId];
  if (!c.credentials || !endpoints?.revokeUrl) return 'not_offered';
  let stored: StoredCredentials;
  try {
    stored = openCredentials(deps.keyring, c.id, c.credentials);
  } catch {
    return 'failed';
  }
  if (stored.type !== 'oauth') return 'not_offered';
  const app = await oauthAppFor(deps, c.workspaceId, c.provider as ProviderId);
  if (!app) return 'failed';
  // Revoking the refresh token ends the whole grant at providers that tie them together.
  const token = stored.refreshToken ?? stored.accessToken;
  const hint = stored.refreshToken ? 'refresh_token' : 'access_token';
  const ok = await revokeAtProvider(deps, oauthEndpoints(deps, c.provider as ProviderId), app, token, hint);
  return ok ? 'revoked' : 'failed';
}

/**
 * Irreversible: the encrypted credentials are destroyed, the row is kept for audit, and
 * every data plane sees the `revoked` descriptor (Model A and B blocked) via the outbox.
 */
export async function revokeConnection(
  deps: ControlPlaneDeps,
  actor: { workspaceId: string } & ({ userId: string } | { agentId: string }),
  id: string,
) {
  // An agent may revoke only what it is bound to (its own credential hygiene); anything else is 404.
  const byAgent = 'agentId' in actor ? actor.agentId : undefined;
  const current = await scopedConnection(deps, actor.workspaceId, id, byAgent);
  if (current.status === 'revoked') throw Errors.connectionRevoked('connection is already revoked');
  const providerRevocation = await revokeUpstream(deps, current);
  const event = auditEvent(deps, {
    action: 'connection_revoked',
    actor: byAgent ? `agent:${byAgent}` : (actor as { userId: string }).userId,
    workspaceId: actor.workspaceId,
    agentId: byAgent ?? null,
    connectionId: id,
    decision: 'info',
    metadata: { provider: current.provider, service: current.service, providerRevocation },
  });
  const row = await commitChange(deps, async (tx, emit) => {
    const updated = await tx.connection.update({
      where: { id },
      data: {
        status: 'revoked',
        credentials: Prisma.DbNull,
        credentialsVersion: { increment: 1 },
        refreshLeaseUntil: null,
        revokedAt: deps.now(),
      },
    });
    emit(kvPut(deps.names.buckets.connections, id, connectionDescriptor(updated)), audited(event));
    return updated;
  });
  return {
    connection: { id: row.id, provider: row.provider, label: row.label, status: 'revoked' as const },
    auditId: event.auditId,
  };
}

export async function relabelConnection(deps: ControlPlaneDeps, actor: Actor, id: string, label: string) {
  const current = await scopedConnection(deps, actor.workspaceId, id);
  if (current.status === 'revoked') throw Errors.connectionRevoked();
  const row = await commitChange(deps, async (tx, emit) => {
    const updated = await tx.connection.update({ where: { id }, data: { label } });
    emit(kvPut(deps.names.buckets.connections, id, connectionDescriptor(updated)));
    return updated;
  });
  return { connection: summary(row) as ReturnType<typeof summary> & { status: 'healthy' | 'needs_reauth' } };
}
