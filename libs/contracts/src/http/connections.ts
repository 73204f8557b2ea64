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
