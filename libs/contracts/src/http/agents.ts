import { z } from 'zod';

export const AgentStatus = z.enum(['created', 'active', 'disabled']);

export const AgentView = z.object({
  id: z.uuid(),
  name: z.string(),
  description: z.string().nullable(),
  iconUrl: z.string().nullable(),
  status: AgentStatus,
  enrolledAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type AgentView = z.infer<typeof AgentView>;

export const CreateAgentBody = z.object({
  name: z.string().trim().min(1, 'name must not be empty').max(200),
  description: z.string().max(2000).optional(),
  iconUrl: z
    .url({ protocol: /^https?$/ })
    .max(2000)
    .optional(),
});
export const CreateAgentResponse = z.object({
  agent: AgentView,
  bootstrapSecret: z.string(),
  auditId: z.string(),
});
export const AgentResponse = z.object({ agent: AgentView });

/** EC P-256 public JWK; private parts and other curves are refused. */
export const PublicJwk = z
  .object({
    kty: z.literal('EC'),
    crv: z.literal('P-256'),
    x: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'x must be 32 bytes base64url'),
    y: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'y must be 32 bytes base64url'),
    d: z.undefined({ error: 'private key material must not be sent' }).optional(),
  })
  .loose();

export const BootstrapBody = z.object({
  bootstrapSecret: z.string().startsWith('vltb_', 'bootstrapSecret must start with vltb_').max(200),
  publicKey: PublicJwk,
});
export const BootstrapResponse = z.object({
  agentId: z.uuid(),
  name: z.string(),
  status: z.literal('active'),
  workspaceId: z.uuid(),
});

export const AgentTokenBody = z.object({
  grant_type: z.literal('client_assertion'),
  client_assertion_type: z.literal('urn:ietf:params:oauth:client-assertion-type:jwt-bearer'),
  client_assertion: z.string().min(1).max(8192),
});
export const AgentTokenResponse = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
});

export const UpdateAgentBody = z
  .object({
    name: z.string().trim().min(1, 'name must not be empty').max(200).optional(),
    description: z.string().max(2000).nullable().optional(),
    iconUrl: z
      .url({ protocol: /^https?$/ })
      .max(2000)
      .nullable()
      .optional(),
  })
  .strict()
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    message: 'at least one of name, description, iconUrl is required',
  });
export const UpdateAgentResponse = z.object({ agent: AgentView, auditId: z.string() });
export const AgentListResponse = z.object({ agents: z.array(AgentView) });
export const DeleteAgentResponse = z.object({ deleted: z.literal(true), id: z.uuid(), auditId: z.string() });
export const BootstrapSecretResponse = z.object({ bootstrapSecret: z.string() });
export const DisableAgentResponse = z.object({ success: z.literal(true), tokensRevoked: z.number().int() });
export const EnableAgentResponse = z.object({
  success: z.literal(true),
  status: z.enum(['created', 'active']),
});
