/**
 * Keeps data-plane caches fed: request/reply handlers for what a data plane may not cache
 * or has not seen yet, and a start-up resync of the KV buckets from the database.
 */
import {
  AgentTokenLookupRequest,
  ApprovalCreateRequest,
  ApprovalRedeemRequest,
  CredentialsRequest,
  NotifierChannelsRequest,
  PolicyLookupRequest,
  type AgentTokenRecord,
} from '@vlt/contracts';
import type { ReplyHandle } from '@vlt/bus';
import type { ControlPlaneDeps } from '../../deps.js';
import { enqueueOutbox, kvDelete, kvPut, type OutboxItem } from '../../infra/outbox.js';
import { agentTokenRecord } from '../agents/service.js';
import { createApproval, redeemApproval } from '../approvals/service.js';
import { connectionDescriptor, resolveCredentialsForDataPlane } from '../connections/service.js';
import { channelsForNotifier } from '../notification-channels/service.js';
import { policySnapshot } from '../policies/service.js';

export async function lookupAgentToken(
  deps: ControlPlaneDeps,
  tokenHash: string,
): Promise<AgentTokenRecord | null> {
  const rec = await deps.prisma.agentAccessToken.findUnique({
    where: { tokenHash },
    include: { agent: { select: { status: true } } },
  });
  if (!rec || rec.agent.status !== 'active' || rec.expiresAt <= deps.now()) return null;
  return agentTokenRecord(rec);
}

export async function lookupPolicy(deps: ControlPlaneDeps, agentId: string, connectionId: string) {
  const policy = await deps.prisma.policy.findUnique({
    where: { agentId_connectionId: { agentId, connectionId } },
    include: { connection: true },
  });
  const connection =
    policy?.connection ?? (await deps.prisma.connection.findUnique({ where: { id: connectionId } }));
  return {
    policy: policy ? policySnapshot(policy, policy.connection) : null,
    connection: connection ? connectionDescriptor(connection) : null,
  };
}

export async function serveDataPlaneRequests(deps: ControlPlaneDeps): Promise<ReplyHandle[]> {
  const { bus, names } = deps;
  const queue = { queue: 'control-plane' };
  return Promise.all([
    bus.reply(
      names.rpc.credentialsGet,
      async (data) => resolveCredentialsForDataPlane(deps, CredentialsRequest.parse(data)),
      queue,
    ),
    bus.reply(
      names.rpc.agentTokenLookup,
      async (data) => ({
        record: await lookupAgentToken(deps, AgentTokenLookupRequest.parse(data).tokenHash),
      }),
      queue,
    ),
    bus.reply(
      names.rpc.approvalsCreate,
      async (data) => createApproval(deps, ApprovalCreateRequest.parse(data)),
      queue,
    ),
    bus.reply(
      names.rpc.approvalsRedeem,
      async (data) => redeemApproval(deps, ApprovalRedeemRequest.parse(data)),
      queue,
    ),
    bus.reply(
      names.rpc.notifierChannels,
      async (data) => channelsForNotifier(deps, NotifierChannelsRequest.parse(data)),
      queue,
    ),
    bus.reply(
      names.rpc.policyLookup,
      async (data) => {
        const req = PolicyLookupRequest.parse(data);
        return lookupPolicy(deps, req.agentId, req.connectionId);
      },
      queue,
    ),
  ]);
}

/**
 * Rebuilds every KV bucket from the database. Goes through the outbox, so it is ordered
 * with concurrent changes: a revocation committed meanwhile is never overwritten by a
 * stale put.
 */
export async function resyncCaches(deps: ControlPlaneDeps): Promise<void> {
  const { names, prisma } = deps;
  const buckets = [names.buckets.agentTokens, names.buckets.policies, names.buckets.connections];
  const present = new Map<string, Set<string>>();
  for (const b of buckets) present.set(b, new Set(await (await deps.bus.kv(b)).keys()));

  await prisma.$transaction(
    async (tx) => {
      // Writers of these tables wait while the snapshot is taken, and every change that
      // committed before it is in it: no outbox row of a concurrent revocation can be numbered
      // before this resync's puts and then be overwritten by a stale one.
      await tx.$executeRawUnsafe('LOCK TABLE agent_access_tokens, policies, connections IN SHARE MODE');
      const now = deps.now();
      const [tokens, policies, connections] = await Promise.all([
        tx.agentAccessToken.findMany({ where: { expiresAt: { gt: now }, agent: { status: 'active' } } }),
        tx.policy.findMany({ include: { connection: true } }),
        tx.connection.findMany(),
      ]);
      const items: OutboxItem[] = [];
      const keep = new Map<string, Set<string>>(buckets.map((b) => [b, new Set<string>()]));
      for (const t of tokens) {
        keep.get(names.buckets.agentTokens)!.add(t.tokenHash);
        items.push(kvPut(names.buckets.agentTokens, t.tokenHash, agentTokenRecord(t)));
      }
      for (const p of policies) {
        keep.get(names.buckets.policies)!.add(p.id);
        items.push(kvPut(names.buckets.policies, p.id, policySnapshot(p, p.connection)));
      }
      for (const c of connections) {
        keep.get(names.buckets.connections)!.add(c.id);
        items.push(kvPut(names.buckets.connections, c.id, connectionDescriptor(c)));
      }
      for (const b of buckets) {
        for (const key of present.get(b)!) {
          if (!keep.get(b)!.has(key)) items.push(kvDelete(b, key));
        }
      }
      await enqueueOutbox(tx, names, items);
    },
    { timeout: 120_000 },
  );
  await deps.outbox.settle();
}
