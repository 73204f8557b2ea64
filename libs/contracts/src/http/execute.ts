import { z } from 'zod';
import { HttpMethod } from '../policy.js';

export const ExecuteModelA = z.object({
  model: z.literal('A'),
  connectionId: z.uuid().optional(),
  service: z.string().optional(),
});

export const ExecuteModelB = z.object({
  model: z.literal('B'),
  connectionId: z.uuid().optional(),
  service: z.string().max(200).optional(),
  method: HttpMethod,
  url: z.string().min(1).max(8192),
  query: z.record(z.string(), z.string()).optional(),
  headers: z.record(z.string(), z.string()).optional(),
  body: z.unknown().optional(),
  stream: z.boolean().optional(),
  download: z.boolean().optional(),
  approvalId: z.uuid().optional(),
  requestFullFields: z.boolean().optional(),
  context: z.record(z.string(), z.unknown()).optional(),
});
export type ExecuteModelB = z.infer<typeof ExecuteModelB>;

export const ExecuteBody = z.discriminatedUnion('model', [ExecuteModelA, ExecuteModelB]);
export type ExecuteBody = z.infer<typeof ExecuteBody>;

export const ExecuteModelBResponse = z.object({
  model: z.literal('B'),
  status: z.number().int(),
  headers: z.record(z.string(), z.string()),
  body: z.unknown(),
  auditId: z.string(),
});
export const ApprovalRequiredResponse = z.object({
  approvalRequired: z.literal(true),
  approvalRequestId: z.uuid(),
  expiresAt: z.string(),
  auditId: z.string(),
});

/**
 * An agent asks a human before acting (the plugin's `request_permission`): the request is
 * checked like a Model B call and filed for approval instead of sent, even where the policy
 * would allow it outright. The agent then runs it with `approvalId` once approved.
 */
export const PermissionToActBody = z.object({
  connectionId: z.uuid(),
  actionDescription: z.string().trim().min(1).max(500),
  method: HttpMethod,
  url: z.string().min(1).max(8192),
  query: z.record(z.string(), z.string()).optional(),
  headers: z.record(z.string(), z.string()).optional(),
  body: z.unknown().optional(),
});
export type PermissionToActBody = z.infer<typeof PermissionToActBody>;
export const PermissionToActResponse = z.object({
  approvalRequestId: z.uuid(),
  expiresAt: z.string(),
  auditId: z.string(),
});

export const ExecuteModelAResponse = z.object({
  model: z.literal('A'),
  accessToken: z.string(),
  tokenType: z.literal('Bearer'),
  expiresIn: z.number().int().positive().max(3600),
  auditId: z.string(),
});

export const ResolveCredentialBody = z.object({
  kind: z.enum(['model_provider', 'channel', 'plugin_config']),
  provider: z.string().min(1).max(100),
  profileId: z.string().min(1).max(200).optional(),
  fields: z.array(z.string().max(100)).max(50).optional(),
});
export const ResolveCredentialResponse = z.object({
  apiKey: z.string(),
  extra: z.record(z.string(), z.unknown()),
  source: z.string(),
  mode: z.enum(['api-key', 'oauth', 'token', 'aws-sdk']),
  cacheTtlMs: z.number().int().nonnegative(),
});

export const ExecuteResponse = z.union([ExecuteModelBResponse, ExecuteModelAResponse]);
