import { z } from 'zod';

export const ApprovalStatus = z.enum(['pending', 'approved', 'denied', 'expired', 'consumed']);
export type ApprovalStatus = z.infer<typeof ApprovalStatus>;

export const ApprovalView = z.object({
  id: z.uuid(),
  policyId: z.uuid(),
  agentId: z.uuid(),
  connectionId: z.uuid(),
  actor: z.string(),
  status: ApprovalStatus,
  requestDetails: z
    .record(z.string(), z.unknown())
    .describe(
      'The request as it would run: method, url, headers, body, requestFullFields, context, and ' +
        'emailMetadata, chatBotMetadata or teamChatMetadata for a message the vault reads. A body ' +
        'over 256 KiB is kept as bodyPreview ({ bytes, shown }) instead of body: the fingerprint ' +
        'still binds the whole body, and the agent sends it again with its approval id.',
    ),
  expiresAt: z.string(),
  createdAt: z.string(),
  decidedAt: z.string().nullable(),
  agentName: z.string(),
  connectionLabel: z.string(),
  connectionProvider: z.string(),
});
export type ApprovalView = z.infer<typeof ApprovalView>;

export const ApprovalListResponse = z.object({ approvals: z.array(ApprovalView) });
export const ApprovalResponse = z.object({ approval: ApprovalView });
export const ApproveResponse = z.object({
  approved: z.literal(true),
  approvalRequestId: z.uuid(),
  auditId: z.string(),
});
export const DenyResponse = z.object({
  denied: z.literal(true),
  approvalRequestId: z.uuid(),
  auditId: z.string(),
});
