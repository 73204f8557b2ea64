import { z } from 'zod';

export const AuditEventView = z.object({
  id: z.string(),
  auditId: z.string(),
  timestamp: z.string(),
  actor: z.string(),
  agentId: z.string().nullable(),
  connectionId: z.string().nullable(),
  action: z.string(),
  decision: z.string(),
  metadata: z.record(z.string(), z.unknown()),
});
export type AuditEventView = z.infer<typeof AuditEventView>;

const filters = {
  agentId: z.uuid().optional(),
  connectionId: z.uuid().optional(),
  action: z.string().max(64).optional(),
  dateFrom: z.iso.datetime({ offset: true }).optional(),
  dateTo: z.iso.datetime({ offset: true }).optional(),
};
export const AuditListQuery = z.object({
  ...filters,
  cursor: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});
export type AuditListQuery = z.infer<typeof AuditListQuery>;
export const AuditExportQuery = z.object({ ...filters, format: z.enum(['json', 'csv']).default('json') });
export type AuditExportQuery = z.infer<typeof AuditExportQuery>;

export const AuditListResponse = z.object({
  events: z.array(AuditEventView),
  nextCursor: z.string().nullable(),
});
