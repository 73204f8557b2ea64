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
