/**
 * What the control plane pushes into NATS KV for data-plane caches. Versioned: a data
 * plane that meets a version it does not know ignores the entry (fails closed).
 */
import { z } from 'zod';

export const AgentTokenRecord = z.object({
  v: z.literal(1),
  tokenHash: z.string().regex(/^[0-9a-f]{64}$/),
  agentId: z.uuid(),
  workspaceId: z.uuid(),
  /** Epoch milliseconds. */
  expiresAt: z.number().int(),
});
export type AgentTokenRecord = z.infer<typeof AgentTokenRecord>;

export const ConnectionStatus = z.enum(['healthy', 'needs_reauth', 'revoked']);
export type ConnectionStatus = z.infer<typeof ConnectionStatus>;

export const ConnectionDescriptor = z.object({
  v: z.literal(1),
  id: z.uuid(),
  workspaceId: z.uuid(),
  provider: z.string(),
  service: z.string(),
  label: z.string(),
  status: ConnectionStatus,
  singleton: z.boolean(),
  /** Origin every brokered URL must live under (issue tracker: the site URL). */
  baseUrl: z.string().nullable(),
});
export type ConnectionDescriptor = z.infer<typeof ConnectionDescriptor>;

export const PolicySnapshot = z.object({
  v: z.literal(1),
  policyId: z.uuid(),
  workspaceId: z.uuid(),
  agentId: z.uuid(),
  connectionId: z.uuid(),
  version: z.number().int(),
  /** Output of @vlt/policy-engine compilePolicy: plain JSON, hydrated by the data plane. */
  compiled: z.unknown(),
});
export type PolicySnapshot = z.infer<typeof PolicySnapshot>;
