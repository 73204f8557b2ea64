/**
 * `POST /v1/credentials/resolve`: the client plugin asks for a credential to use locally (a
 * form of vending, ADR 0042). Only a connection bound to the calling agent by a policy that
 * allows Model A is ever answered; everything else is 404 with no hint that it exists.
 */
import {
  providerSpec,
  serviceSpec,
  type ConnectionDescriptor,
  type ProviderCredentials,
} from '@vlt/contracts';
import { Errors } from '@vlt/service-kit';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import { recordAgentEvent } from '../execute/recorder.js';
import { authoriseVending, fetchCredentials, MAX_VENDED_LIFETIME_S } from '../execute/vend.js';

export interface ResolveRequest {
  kind: 'model_provider' | 'channel' | 'plugin_config';
  provider: string;
  profileId?: string | undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** How long the plugin may keep a long-lived secret before asking again (revocation reach). */
const SECRET_CACHE_TTL_MS = 5 * 60_000;

const notFound = () => Errors.notFound('no matching credential');

/** `provider` names a provider (`llm_a`) or a service (`llm_a-messages`). */
function matchesProvider(c: ConnectionDescriptor, provider: string): boolean {
  return c.provider === provider || c.service === provider;
}

async function candidates(deps: DataPlaneDeps, agent: AgentPrincipal, req: ResolveRequest) {
  if (req.profileId && UUID.test(req.profileId)) {
    const c = deps.caches.connection(req.profileId.toLowerCase());
    return c && c.workspaceId === agent.workspaceId && matchesProvider(c, req.provider) ? [c] : [];
  }
  return deps.caches
    .connectionsOf(agent.workspaceId)
    .filter((c) => matchesProvider(c, req.provider) && c.status !== 'revoked')
    .filter((c) => !req.profileId || c.label === req.profileId)
    .sort((a, b) => a.id.localeCompare(b.id));
}

function answer(c: ProviderCredentials, connection: ConnectionDescriptor, now: number) {
  const extra: Record<string, unknown> = {};
  if (connection.baseUrl) extra.baseUrl = connection.baseUrl;
  switch (c.type) {
    case 'api_key':
      return { apiKey: c.key, extra, mode: 'api-key' as const, cacheTtlMs: SECRET_CACHE_TTL_MS };
    case 'bot_token':
      return { apiKey: c.token, extra, mode: 'token' as const, cacheTtlMs: SECRET_CACHE_TTL_MS };
    case 'bearer': {
      const left = c.expiresAt == null ? MAX_VENDED_LIFETIME_S * 1000 : c.expiresAt - now;
      const cacheTtlMs = Math.max(0, Math.min(MAX_VENDED_LIFETIME_S * 1000, left - 30_000));
      return { apiKey: c.token, extra, mode: 'oauth' as const, cacheTtlMs };
    }
    case 'basic':
      // The issue tracker is brokered only (Model B): never handed out.
      return null;
  }
}

export async function resolveCredential(deps: DataPlaneDeps, agent: AgentPrincipal, req: ResolveRequest) {
  if (!providerSpec(req.provider) && !serviceSpec(req.provider)) throw notFound();
  for (const connection of await candidates(deps, agent, req)) {
    const found = await deps.caches.policyFor(agent.agentId, connection.id).catch(() => {
      throw Errors.unavailable('cannot load the policy right now');
    });
    const policy = found.policy;
    // Unbound, bound for Model B only, or a brokered-only service (issue tracker, contacts):
    // as if there were nothing.
    const spec = serviceSpec(connection.service);
    const brokeredOnly =
      !spec || spec.authKind === 'issue_tracker' || (spec.authKind === 'oauth' && !spec.vendable);
    if (!policy || !policy.runtime.allowedModels.has('A') || brokeredOnly) continue;
    if (connection.status === 'needs_reauth') throw Errors.connectionNeedsReauth();
    const meta = { kind: req.kind, provider: connection.provider, service: connection.service };
    const slot = await authoriseVending(deps, agent, { connection, policy }, meta);
    try {
      const res = await fetchCredentials(deps, agent, connection);
      const out = answer(res.credentials, connection, deps.now().getTime());
      if (!out) throw notFound();
      const auditId = await recordAgentEvent(deps, agent, connection.id, {
        action: 'credential_resolved',
        decision: 'allowed',
        metadata: { ...meta, mode: out.mode },
        durable: true,
      });
      slot.commit();
      return { ...out, source: `vault:${connection.provider}:${connection.id}`, auditId };
    } finally {
      await slot.release();
    }
  }
  throw notFound();
}
