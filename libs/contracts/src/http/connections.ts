import { z } from 'zod';
import {
  AllowlistEntry,
  AllowedModel,
  DefaultMode,
  RateLimits,
  StepUpApproval,
  TimeWindow,
} from '../policy.js';

export const ConnectionPolicySummary = z.object({
  id: z.uuid(),
  agentId: z.uuid(),
  agentName: z.string(),
  defaultMode: DefaultMode,
  stepUpApproval: StepUpApproval,
  allowedModels: z.array(AllowedModel),
  allowlists: z.array(AllowlistEntry),
  rateLimits: RateLimits.nullable(),
  timeWindows: z.array(TimeWindow),
});

export const ConnectionListItem = z.object({
  id: z.uuid(),
  provider: z.string(),
  service: z.string(),
  label: z.string(),
  status: z.enum(['healthy', 'needs_reauth', 'revoked']),
  singleton: z.boolean(),
  grantedScopes: z.array(z.string()),
  metadata: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
  policies: z.array(ConnectionPolicySummary),
});
export const ConnectionListResponse = z.object({ connections: z.array(ConnectionListItem) });

export const ConnectionSummary = z.object({
  id: z.uuid(),
  provider: z.string(),
  service: z.string(),
  label: z.string(),
  status: z.enum(['healthy', 'needs_reauth', 'revoked']),
});

export const IssueTrackerConnectionBody = z.object({
  siteUrl: z.url({ protocol: /^https$/, error: 'siteUrl must be an https URL' }).max(2000),
  email: z.email().max(320),
  apiToken: z.string().min(1).max(4096),
  label: z.string().trim().min(1).max(200).optional(),
});
export const CreateConnectionResponse = z.object({ connection: ConnectionSummary, auditId: z.string() });

const Label = z.string().trim().min(1).max(200);
const ServiceId = z.string().min(1).max(100);

export const StartConnectionBody = z.object({
  service: ServiceId,
  scopes: z
    .array(
      z
        .string()
        .min(1)
        .max(500)
        .regex(/^[\x21-\x7e]+$/, 'a scope is printable ASCII without spaces'),
    )
    .max(50),
  label: Label.optional(),
  agentId: z.uuid().optional(),
  allowedModels: z.array(AllowedModel).min(1).max(2).optional(),
});
export const StartConnectionResponse = z.object({
  pendingConnectionId: z.uuid(),
  authorizationUrl: z.string(),
});

export const OAuthCallbackQuery = z.object({
  state: z.string().max(512).optional(),
  code: z.string().max(4096).optional(),
  error: z.string().max(200).optional(),
  error_description: z.string().max(1000).optional(),
});

export const BotTokenConnectionBody = z.object({
  service: ServiceId,
  botToken: z.string().min(1).max(300),
  label: Label.optional(),
});
export const BotTokenConnectionResponse = z.object({
  connection: z.object({
    id: z.uuid(),
    provider: z.string(),
    label: z.string(),
    status: z.literal('healthy'),
  }),
  botInfo: z.object({ id: z.number(), username: z.string(), firstName: z.string() }),
  message: z.string(),
  auditId: z.string(),
});

export const ApiKeyConnectionBody = z.object({
  service: ServiceId,
  apiKey: z.string().min(1).max(4096),
  label: Label.optional(),
});

export const WorkspaceOAuthAppBody = z.object({
  provider: z.string().min(1).max(100),
  clientId: z.string().trim().min(1).max(500),
  clientSecret: z.string().min(1).max(4096),
});
export const WorkspaceOAuthApp = z.object({
  id: z.uuid(),
  provider: z.string(),
  clientId: z.string(),
  createdAt: z.string(),
});
