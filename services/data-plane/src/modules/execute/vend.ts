/**
 * Model A: vend a short-lived provider access token (ADR 0042). Only OAuth connections have
 * one; the checks are the policy's model, time window and rate limit; the token comes from the
 * control plane (refreshed there when it is about to expire, the refresh token never leaves
 * it), and is handed out only once `token_vended` is durably recorded.
 */
import { serviceSpec, type ConnectionDescriptor } from '@vlt/contracts';
import { evaluateTokenVending } from '@vlt/policy-engine';
import { AppError, Errors } from '@vlt/service-kit';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import type { Reservation } from '../../rate-counter.js';
import { recordAgentEvent } from './recorder.js';
import { resolveBinding, type ConnectionRef } from './service.js';

/** Spec limit: a vended token is announced for at most an hour. */
export const MAX_VENDED_LIFETIME_S = 3600;

export interface VendedToken {
  model: 'A';
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
  auditId: string;
}

type Binding = Awaited<ReturnType<typeof resolveBinding>>;

/**
 * The policy checks shared by every way an agent obtains a credential (Model A, resolve):
 * a refusal is audited as `token_vend_denied` and thrown; an allow holds a rate-limit slot
 * that the caller keeps (`commit`) once the credential is handed out.
 */
export async function authoriseVending(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  binding: Binding,
  meta: Record<string, unknown>,
): Promise<{ commit(): void; release(): Promise<void> }> {
  const { connection, policy } = binding;
  const deny = async (status: 403 | 429, reason: string, code: string, retryAfter?: number) => {
    const auditId = await recordAgentEvent(deps, agent, connection.id, {
      action: 'token_vend_denied',
      decision: 'denied',
      metadata: { ...meta, reason },
      durable: false,
    });
    return new AppError(code, status, reason, {
      auditId,
      ...(retryAfter !== undefined && { retryAfter, headers: { 'retry-after': String(retryAfter) } }),
    });
  };
  if (!policy) throw await deny(403, 'no policy allows this agent to use this connection', 'POLICY_DENIED');
  let reservation: Reservation | undefined;
  const now = deps.now();
  if (policy.runtime.rateLimits) {
    try {
      reservation = await deps.rateCounter.reserve(agent.agentId, connection.id, now);
    } catch {
      throw Errors.unavailable('cannot count requests for the rate limit right now');
    }
  }
  const decision = evaluateTokenVending(policy.runtime, {
    now,
    requestsInLastHour: reservation?.previous ?? 0,
    ...(reservation?.oldestAt && { oldestRequestInWindowAt: reservation.oldestAt }),
  });
  if (decision.outcome === 'deny') {
    await reservation?.release().catch(() => undefined);
    throw await deny(
      decision.status,
      decision.reason,
      decision.status === 429 ? 'RATE_LIMITED' : 'POLICY_DENIED',
      decision.retryAfter,
    );
  }
  let kept = false;
  return {
    commit: () => void (kept = true),
    release: async () => {
      if (!kept) await reservation?.release().catch(() => undefined);
    },
  };
}

/** The control plane's answer for this agent and connection, as a typed error when refused. */
export async function fetchCredentials(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  connection: ConnectionDescriptor,
) {
  let res;
  try {
    res = await deps.credentials.get({
      workspaceId: agent.workspaceId,
      agentId: agent.agentId,
      connectionId: connection.id,
    });
  } catch {
    throw Errors.unavailable('credentials are unavailable right now');
  }
  if (res.ok) return res;
  if (res.code === 'revoked') throw Errors.connectionRevoked();
  if (res.code === 'needs_reauth') {
    // The control plane just learned it (invalid_grant): do not wait for the pushed descriptor.
    deps.credentials.invalidate(connection.id);
    throw Errors.connectionNeedsReauth();
  }
  if (res.code === 'unavailable')
    throw Errors.unavailable('the provider token cannot be refreshed right now');
  throw Errors.policyDenied('no policy allows this agent to use this connection');
}

export async function vendToken(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  req: ConnectionRef,
): Promise<VendedToken> {
  const binding = await resolveBinding(deps, agent, req);
  const { connection } = binding;
  const spec = serviceSpec(connection.service);
  const meta = { model: 'A', provider: connection.provider, service: connection.service };
  if (!spec?.vendable) {
    // Long-lived secrets and brokered-only services (issue tracker, contacts: ADR 0045) are
    // never handed out; the refusal is audited like any other.
    const reason = `model A is not available for ${connection.service} connections: they are brokered only (model B)`;
    const auditId = await recordAgentEvent(deps, agent, connection.id, {
      action: 'token_vend_denied',
      decision: 'denied',
      metadata: { ...meta, reason },
      durable: false,
    });
    throw Errors.modelNotAvailable(reason, { auditId });
  }
  const slot = await authoriseVending(deps, agent, binding, meta);
  try {
    const res = await fetchCredentials(deps, agent, connection);
    if (res.credentials.type !== 'bearer') throw Errors.modelNotAvailable();
    const remaining =
      res.credentials.expiresAt == null
        ? MAX_VENDED_LIFETIME_S
        : Math.floor((res.credentials.expiresAt - deps.now().getTime()) / 1000);
    if (remaining <= 0) throw Errors.unavailable('the provider token cannot be refreshed right now');
    const expiresIn = Math.min(MAX_VENDED_LIFETIME_S, remaining);
    const auditId = await recordAgentEvent(deps, agent, connection.id, {
      action: 'token_vended',
      decision: 'allowed',
      metadata: { ...meta, expiresIn },
      durable: true,
    });
    slot.commit();
    return { model: 'A', accessToken: res.credentials.token, tokenType: 'Bearer', expiresIn, auditId };
  } catch (err) {
    if (err instanceof AppError && err.extra.auditId === undefined && err.statusCode !== 503) {
      const auditId = await recordAgentEvent(deps, agent, connection.id, {
        action: 'token_vend_denied',
        decision: 'denied',
        metadata: { ...meta, reason: err.message },
        durable: false,
      });
      throw new AppError(err.code, err.statusCode, err.message, { ...err.extra, auditId });
    }
    throw err;
  } finally {
    await slot.release();
  }
}
