/**
 * Discovery: the catalog as the workspace sees it (which OAuth providers have an app), and an
 * agent's own view — what it is bound to, what it asked for, what it could still ask for.
 */
import {
  actionTemplates,
  catalogService,
  OAUTH_PROVIDERS,
  SERVICES,
  serviceExtras,
  serviceSpec,
} from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';

export async function capabilityServices(deps: ControlPlaneDeps, workspaceId: string) {
  const own = await deps.prisma.workspaceOAuthApp.findMany({
    where: { workspaceId },
    select: { provider: true },
  });
  const ownProviders = new Set(own.map((a) => a.provider));
  const oauthStatus: Record<string, { available: boolean; source: 'workspace' | 'platform' | null }> = {};
  for (const p of OAUTH_PROVIDERS) {
    const platform = deps.config.providers[p];
    oauthStatus[p] = ownProviders.has(p)
      ? { available: true, source: 'workspace' }
      : platform.clientId && platform.clientSecret
        ? { available: true, source: 'platform' }
        : { available: false, source: null };
  }
  return { services: SERVICES.map(catalogService), oauthStatus };
}

const CREDENTIAL_TYPE = {
  oauth: 'oauth',
  bot_token: 'bot_token',
  api_key: 'api_key',
  issue_tracker: 'basic',
} as const;

export async function capabilitiesOfAgent(
  deps: ControlPlaneDeps,
  agent: { agentId: string; workspaceId: string },
) {
  const [policies, pending] = await Promise.all([
    deps.prisma.policy.findMany({
      where: {
        agentId: agent.agentId,
        workspaceId: agent.workspaceId,
        connection: { status: { not: 'revoked' } },
      },
      include: { connection: true },
      orderBy: { createdAt: 'asc' },
    }),
    deps.prisma.agentPermissionRequest.findMany({
      where: { agentId: agent.agentId, status: 'pending' },
      orderBy: { createdAt: 'asc' },
    }),
  ]);
  const activeConnections = policies.flatMap(({ connection: c, allowedModels }) => {
    const spec = serviceSpec(c.service);
    if (!spec) return [];
    const extras = serviceExtras(c.service);
    return [
      {
        // Singletons are addressed by service name, never by id (spec).
        connectionId: c.singleton ? null : c.id,
        service: c.service,
        provider: c.provider,
        status: c.status as 'healthy' | 'needs_reauth',
        credentialType: CREDENTIAL_TYPE[spec.authKind],
        category: extras.category,
        displayName: spec.name,
        label: c.label,
        actionTemplateId: extras.actions[0]?.id ?? null,
        allowedModels: allowedModels as ('A' | 'B')[],
      },
    ];
  });
  const covered = new Set(activeConnections.map((c) => c.service));
  const requested = new Set(pending.map((r) => r.actionTemplateId));
  return {
    agentId: agent.agentId,
    activeConnections,
    pendingRequests: pending.map((r) => ({
      id: r.id,
      actionTemplateId: r.actionTemplateId,
      reason: r.reason,
      requestedAt: r.createdAt.toISOString(),
    })),
    availableActions: actionTemplates().filter((a) => !covered.has(a.serviceId) && !requested.has(a.id)),
  };
}
