/**
 * Events on the durable stream. Every audit event is published once with its auditId
 * as the message id; the audit service is the only writer of audit rows.
 */
import { z } from 'zod';

export const AuditAction = z.enum([
  'token_vended',
  'token_vend_denied',
  'execution_requested',
  'execution_completed',
  'execution_denied',
  'execution_error',
  'rate_limit_exceeded',
  'approval_requested',
  'approval_approved',
  'approval_denied',
  'approval_expired',
  'connection_created',
  'connection_reauthorized',
  'oauth_app_created',
  'oauth_app_deleted',
  'permission_requested',
  'permission_request_approved',
  'permission_request_denied',
  'connection_revoked',
  'connection_needs_reauth',
  'credential_resolved',
  'policy_created',
  'policy_updated',
  'policy_deleted',
  'agent_created',
  'agent_updated',
  'agent_deleted',
  'agent_enrolled',
  'agent_disabled',
  'agent_enabled',
  'token_created',
  'token_revoked',
  'notification_channel_saved',
  'notification_channel_verified',
  'notification_channel_enabled',
  'notification_channel_disabled',
  'notification_channel_deleted',
]);
export type AuditAction = z.infer<typeof AuditAction>;

export const AuditDecision = z.enum(['allowed', 'denied', 'info']);
export type AuditDecision = z.infer<typeof AuditDecision>;

export const AuditEventMessage = z.object({
  v: z.literal(1),
  auditId: z.string().min(1),
  action: AuditAction,
  timestamp: z.string(),
  /** User id, or `agent:<agentId>` when an agent triggered it. */
  actor: z.string(),
  workspaceId: z.string().nullable(),
  agentId: z.string().nullable(),
  connectionId: z.string().nullable(),
  decision: AuditDecision,
  metadata: z.record(z.string(), z.unknown()),
});
export type AuditEventMessage = z.infer<typeof AuditEventMessage>;

/** Stream subject category for an action (`execution_completed` → `execution`). */
export function eventCategory(action: AuditAction): string {
  return action.split('_')[0]!;
}
