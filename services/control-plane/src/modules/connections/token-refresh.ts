/**
 * OAuth access tokens, refreshed in the control plane only and exactly once per expiry across
 * every replica (ADR 0042): the replica that wins a compare-and-set lease on the connection row
 * calls the provider; the others wait for the row's credentials version to move. No
 * transaction (and, on the embedded database, no pool connection) is held during the call.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProviderId } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { auditEvent, audited, commitChange } from '../../infra/change.js';
import { kvPut } from '../../infra/outbox.js';
import { OAuthGrantError, oauthAppFor, oauthEndpoints, refreshTokens } from './oauth-client.js';
import { openCredentials, sealCredentials, type StoredCredentials } from './stored-credentials.js';
import { connectionDescriptor } from './descriptor.js';

/** A token with less than this left is refreshed before it is used or vended. */
export const REFRESH_SKEW_MS = 30_000;
const LEASE_MS = 30_000;
const WAIT_FOR_OTHER_REPLICA_MS = 10_000;
const POLL_MS = 100;
/** A provider's token endpoint gets this long; data planes wait 15 s for the whole answer. */
const REFRESH_CALL_TIMEOUT_MS = 10_000;

type ConnectionRow = NonNullable<Awaited<ReturnType<ControlPlaneDeps['prisma']['connection']['findUnique']>>>;

export type UsableCredentials =
  | { ok: true; credentials: StoredCredentials }
  | { ok: false; code: 'revoked' | 'needs_reauth' | 'unavailable' };

function needsRefresh(c: StoredCredentials, now: number): boolean {
  return (
    c.type === 'oauth' &&
    c.expiresAt !== null &&
    c.expiresAt - now < REFRESH_SKEW_MS &&
    c.refreshToken !== null
  );
}

function state(row: ConnectionRow | null): UsableCredentials | null {
  if (!row || row.status === 'revoked' || !row.credentials) return { ok: false, code: 'revoked' };
  if (row.status === 'needs_reauth') return { ok: false, code: 'needs_reauth' };
  return null;
}

/** Concurrent callers in this process share one wait; the lease covers the other replicas. */
const inflight = new WeakMap<ControlPlaneDeps, Map<string, Promise<UsableCredentials>>>();

/** The connection's credentials, refreshed first when an OAuth token is about to expire. */
export async function usableCredentials(
  deps: ControlPlaneDeps,
  connectionId: string,
): Promise<UsableCredentials> {
  const row = await deps.prisma.connection.findUnique({ where: { id: connectionId } });
  const refused = state(row);
  if (refused) return refused;
  const creds = openCredentials(deps.keyring, row!.id, row!.credentials);
  if (!needsRefresh(creds, deps.now().getTime())) return { ok: true, credentials: creds };

  let mine = inflight.get(deps);
  if (!mine) inflight.set(deps, (mine = new Map()));
  const pending = mine.get(connectionId);
  if (pending) return pending;
  const p = refreshOnce(deps, row!).finally(() => mine.delete(connectionId));
  mine.set(connectionId, p);
  return p;
}

async function refreshOnce(deps: ControlPlaneDeps, seen: ConnectionRow): Promise<UsableCredentials> {
  const deadline = Date.now() + WAIT_FOR_OTHER_REPLICA_MS;
  for (;;) {
    const now = deps.now();
    const lease = await deps.prisma.connection.updateMany({
      where: {
        id: seen.id,
        status: 'healthy',
        credentialsVersion: seen.credentialsVersion,
        OR: [{ refreshLeaseUntil: null }, { refreshLeaseUntil: { lt: now } }],
      },
      data: { refreshLeaseUntil: new Date(now.getTime() + LEASE_MS) },
    });
    if (lease.count === 1) return refreshWithLease(deps, seen);

    await sleep(POLL_MS);
    const row = await deps.prisma.connection.findUnique({ where: { id: seen.id } });
    const refused = state(row);
    if (refused) return refused;
    // Another replica wrote fresh credentials: use them as they are.
    if (row!.credentialsVersion !== seen.credentialsVersion) {
      return { ok: true, credentials: openCredentials(deps.keyring, row!.id, row!.credentials) };
    }
    if (Date.now() > deadline) return { ok: false, code: 'unavailable' };
  }
}

async function refreshWithLease(deps: ControlPlaneDeps, row: ConnectionRow): Promise<UsableCredentials> {
  const current = openCredentials(deps.keyring, row.id, row.credentials);
  const release = () =>
    deps.prisma.connection.updateMany({ where: { id: row.id }, data: { refreshLeaseUntil: null } });
  if (current.type !== 'oauth' || current.refreshToken === null) {
    await release();
    return { ok: true, credentials: current };
  }
  const provider = row.provider as ProviderId;
  try {
    const app = await oauthAppFor(deps, row.workspaceId, provider);
    if (!app) throw new OAuthGrantError('refused', 'no OAuth app is configured for this provider');
    const tokens = await withTimeout(
      refreshTokens(deps, oauthEndpoints(deps, provider), app, current.refreshToken),
      REFRESH_CALL_TIMEOUT_MS,
    );
    const next: StoredCredentials = {
      type: 'oauth',
      accessToken: tokens.accessToken,
      refreshToken: tokens.refreshToken,
      expiresAt: tokens.expiresAt,
    };
    const written = await deps.prisma.connection.updateMany({
      where: { id: row.id, credentialsVersion: row.credentialsVersion, status: 'healthy' },
      data: {
        credentials: sealCredentials(deps.keyring, row.id, next),
        credentialsVersion: { increment: 1 },
        refreshLeaseUntil: null,
        ...(tokens.scopes && { grantedScopes: tokens.scopes }),
      },
    });
    // Revoked while refreshing: the new tokens are dropped with the lease.
    if (written.count === 0)
      return (
        state(await deps.prisma.connection.findUnique({ where: { id: row.id } })) ?? {
          ok: false,
          code: 'unavailable',
        }
      );
    return { ok: true, credentials: next };
  } catch (err) {
    if (err instanceof OAuthGrantError && err.kind === 'invalid_grant') {
      await markNeedsReauth(deps, row);
      return { ok: false, code: 'needs_reauth' };
    }
    await release().catch(() => undefined);
    deps.logger.warn(
      {
        connectionId: row.id,
        provider: row.provider,
        reason: err instanceof OAuthGrantError ? err.message : 'error',
      },
      'token refresh failed',
    );
    return { ok: false, code: 'unavailable' };
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new OAuthGrantError('unreachable', 'the provider did not answer in time')),
      ms,
    );
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The provider no longer honours the grant: the connection waits for a user to reauthorise it.
 * Audited (the notifier turns the event into a `connection_issue` notification) and pushed to
 * every data plane, so use is refused at once.
 */
async function markNeedsReauth(deps: ControlPlaneDeps, row: ConnectionRow): Promise<void> {
  const event = auditEvent(deps, {
    action: 'connection_needs_reauth',
    actor: 'system',
    workspaceId: row.workspaceId,
    agentId: null,
    connectionId: row.id,
    decision: 'info',
    metadata: { provider: row.provider, service: row.service, reason: 'invalid_grant' },
  });
  await commitChange(deps, async (tx, emit) => {
    // Only a healthy connection moves: a revoke that won the race stays a revoke.
    const moved = await tx.connection.updateMany({
      where: { id: row.id, status: 'healthy' },
      data: { status: 'needs_reauth', refreshLeaseUntil: null },
    });
    if (moved.count === 0) return;
    const updated = await tx.connection.findUniqueOrThrow({ where: { id: row.id } });
    emit(kvPut(deps.names.buckets.connections, row.id, connectionDescriptor(updated)), audited(event));
  });
}
