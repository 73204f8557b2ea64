import { z } from 'zod';

export const ActionTemplateView = z.object({
  id: z.string(),
  label: z.string(),
  description: z.string(),
  requiresApproval: z.boolean(),
});

export const CatalogServiceView = z.object({
  id: z.string(),
  name: z.string(),
  provider: z.string(),
  icon: z.string(),
  category: z.string(),
  description: z.string(),
  authKind: z.enum(['oauth', 'bot_token', 'api_key', 'issue_tracker']),
  singleton: z.boolean(),
  defaultScopes: z.array(z.string()),
  actions: z.array(ActionTemplateView),
});

export const CapabilitiesServicesResponse = z.object({
  services: z.array(CatalogServiceView),
  /** Per OAuth provider: whether an OAuth app exists, and whose (`workspace` or `platform`). */
  oauthStatus: z.record(
    z.string(),
    z.object({ available: z.boolean(), source: z.enum(['workspace', 'platform']).nullable() }),
  ),
});

export const CapabilitiesMeResponse = z.object({
  agentId: z.uuid(),
  activeConnections: z.array(
    z.object({
      connectionId: z.uuid().nullable(),
      service: z.string(),
      provider: z.string(),
      status: z.enum(['healthy', 'needs_reauth']),
      credentialType: z.enum(['oauth', 'bot_token', 'api_key', 'basic']),
      category: z.string(),
      displayName: z.string(),
      label: z.string(),
      actionTemplateId: z.string().nullable(),
      allowedModels: z.array(z.enum(['A', 'B'])),
    }),
  ),
  pendingRequests: z.array(
    z.object({ id: z.uuid(), actionTemplateId: z.string(), reason: z.string(), requestedAt: z.string() }),
  ),
  availableActions: z.array(ActionTemplateView.extend({ serviceId: z.string() })),
});

export const PermissionRequestBody = z.object({
  actionTemplateId: z.string().min(1).max(200),
  reason: z.string().trim().min(1).max(1000),
});
export const PermissionRequestCreated = z.object({
  success: z.literal(true),
  requestId: z.uuid(),
  actionTemplateId: z.string(),
  message: z.string(),
  auditId: z.string(),
});
export const PermissionRequestView = z.object({
  id: z.uuid(),
  agentId: z.uuid(),
  agentName: z.string(),
  actionTemplateId: z.string(),
  serviceId: z.string().nullable(),
  reason: z.string(),
  status: z.enum(['pending', 'approved', 'denied']),
  requestedAt: z.string(),
});
export const PermissionRequestList = z.object({ requests: z.array(PermissionRequestView) });
export const PermissionRequestDecision = z.object({
  request: PermissionRequestView,
  auditId: z.string(),
});
