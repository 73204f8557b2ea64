/** Request/reply between data plane and control plane. */
import { z } from 'zod';
import { AgentTokenRecord, ConnectionDescriptor, PolicySnapshot } from './snapshots.js';

export const CredentialsRequest = z.object({
  v: z.literal(1),
  workspaceId: z.uuid(),
  agentId: z.uuid(),
  connectionId: z.uuid(),
});
export type CredentialsRequest = z.infer<typeof CredentialsRequest>;

/**
 * What a data plane receives to inject: never a refresh token (it stays in the control plane).
 * `bearer` carries an OAuth access token's expiry (epoch ms) when the provider gave one.
 */
export const ProviderCredentials = z.discriminatedUnion('type', [
  z.object({ type: z.literal('basic'), username: z.string(), password: z.string() }),
  z.object({
    type: z.literal('bearer'),
    token: z.string(),
    expiresAt: z.number().int().nullable().optional(),
  }),
  z.object({ type: z.literal('api_key'), key: z.string() }),
  z.object({ type: z.literal('bot_token'), token: z.string() }),
]);
export type ProviderCredentials = z.infer<typeof ProviderCredentials>;

export const CredentialsResponse = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), credentials: ProviderCredentials, ttlMs: z.number().int() }),
  z.object({
    ok: z.literal(false),
    code: z.enum(['not_found', 'revoked', 'needs_reauth', 'forbidden', 'unavailable']),
  }),
]);
export type CredentialsResponse = z.infer<typeof CredentialsResponse>;

/** Cache-miss lookups: a data plane that has not seen a record yet asks once. */
export const AgentTokenLookupRequest = z.object({ v: z.literal(1), tokenHash: z.string() });
export const AgentTokenLookupResponse = z.object({ record: AgentTokenRecord.nullable() });

export const PolicyLookupRequest = z.object({
  v: z.literal(1),
  agentId: z.uuid(),
  connectionId: z.uuid(),
});
export const PolicyLookupResponse = z.object({
  policy: PolicySnapshot.nullable(),
  connection: ConnectionDescriptor.nullable(),
});

/** Data plane → control plane: a request needs step-up approval. */
export const ApprovalCreateRequest = z.object({
  v: z.literal(1),
  workspaceId: z.uuid(),
  agentId: z.uuid(),
  connectionId: z.uuid(),
  policyId: z.uuid(),
  fingerprint: z.string().min(1).max(200),
  reason: z.string().max(500),
  requestDetails: z.record(z.string(), z.unknown()),
});
export type ApprovalCreateRequest = z.infer<typeof ApprovalCreateRequest>;
export const ApprovalCreateResponse = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), approvalRequestId: z.uuid(), expiresAt: z.string(), auditId: z.string() }),
  z.object({ ok: z.literal(false), code: z.enum(['forbidden', 'revoked', 'too_many_pending']) }),
]);

/** Data plane → control plane: consume an approved request, exactly once. */
export const ApprovalRedeemRequest = z.object({
  v: z.literal(1),
  approvalId: z.uuid(),
  workspaceId: z.uuid(),
  agentId: z.uuid(),
  connectionId: z.uuid(),
  fingerprint: z.string().min(1).max(200),
});
export type ApprovalRedeemRequest = z.infer<typeof ApprovalRedeemRequest>;
export const ApprovalRedeemResponse = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true) }),
  z.object({
    ok: z.literal(false),
    code: z.enum(['not_found', 'pending', 'denied', 'expired', 'consumed', 'mismatch']),
  }),
]);
export type ApprovalRedeemResponse = z.infer<typeof ApprovalRedeemResponse>;

/**
 * Notifier → control plane: the workspace's verified, enabled chat channels with what it takes
 * to post to them (the bot token or OAuth access token, which only the control plane can
 * decrypt), and for an approval notice one Approve and one Deny quick-action URL per channel.
 */
export const NotifierChannelsRequest = z.object({
  v: z.literal(1),
  workspaceId: z.uuid(),
  /** Mint quick-action links for this pending approval (approval notices only). */
  approvalId: z.uuid().optional(),
  /** Only these channels (an edit after a decision goes where the notice went); default all. */
  channelIds: z.array(z.uuid()).max(10).optional(),
});
export type NotifierChannelsRequest = z.infer<typeof NotifierChannelsRequest>;
export const NotifierChannel = z.object({
  id: z.uuid(),
  channelType: z.enum(['chatbot_a', 'chatbot_b']),
  /** chatId (chatbot_a) or channelId (chatbot_b). */
  target: z.string(),
  apiUrl: z.string(),
  token: z.string(),
  quickActions: z.object({ approveUrl: z.string(), denyUrl: z.string() }).nullable(),
});
export type NotifierChannel = z.infer<typeof NotifierChannel>;
export const NotifierChannelsResponse = z.object({ channels: z.array(NotifierChannel) });
export type NotifierChannelsResponse = z.infer<typeof NotifierChannelsResponse>;
