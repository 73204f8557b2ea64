/**
 * In-memory copies of what the control plane publishes: agent tokens, compiled policies,
 * connection descriptors. Fed by KV watches (full snapshot at start, live updates after);
 * a miss asks the control plane once, and deletions win over any answer still in flight.
 */
import type { Bus, BusNames, KvEntry, KvWatch } from '@vlt/bus';
import {
  AgentTokenLookupResponse,
  AgentTokenRecord,
  ConnectionDescriptor,
  PolicyLookupResponse,
  PolicySnapshot,
} from '@vlt/contracts';
import { hydratePolicy, type PolicyRuntime } from '@vlt/policy-engine';
import type { FastifyBaseLogger } from 'fastify';

export interface CachedPolicy {
  snapshot: PolicySnapshot;
  runtime: PolicyRuntime;
}

export interface SnapshotCaches {
  ready: Promise<void>;
  agentToken(tokenHash: string): Promise<AgentTokenRecord | null>;
  policyFor(
    agentId: string,
    connectionId: string,
  ): Promise<{ policy: CachedPolicy | null; connection: ConnectionDescriptor | null }>;
  connection(id: string): ConnectionDescriptor | null;
  connectionsOf(workspaceId: string): ConnectionDescriptor[];
  stop(): Promise<void>;
  stats(): { tokens: number; policies: number; connections: number };
}

const NEGATIVE_TTL_MS = 5_000;
const TOMBSTONE_TTL_MS = 10 * 60_000;
const MAX_NEGATIVE = 50_000;

class ExpiringSet {
  private readonly map = new Map<string, number>();
  constructor(private readonly max: number) {}
  add(key: string, ttlMs: number): void {
    if (this.map.size >= this.max) {
      // Drop the oldest insertion: bounded memory under a flood of random tokens.
      const first = this.map.keys().next().value;
      if (first !== undefined) this.map.delete(first);
    }
    this.map.set(key, Date.now() + ttlMs);
  }
  has(key: string): boolean {
    const until = this.map.get(key);
    if (until === undefined) return false;
    if (until < Date.now()) {
      this.map.delete(key);
      return false;
    }
    return true;
  }
  delete(key: string): void {
    this.map.delete(key);
  }
}

export async function createSnapshotCaches(deps: {
  bus: Bus;
  names: BusNames;
  logger: FastifyBaseLogger;
  rpcTimeoutMs?: number;
}): Promise<SnapshotCaches> {
  const { bus, names, logger } = deps;
  const tokens = new Map<string, AgentTokenRecord>();
  const policies = new Map<string, CachedPolicy>();
  const policyByPair = new Map<string, string>();
  const connections = new Map<string, ConnectionDescriptor>();
  const missingTokens = new ExpiringSet(MAX_NEGATIVE);
  const deletedPolicies = new ExpiringSet(MAX_NEGATIVE);
  const pair = (a: string, c: string) => `${a}:${c}`;

  function putPolicy(snapshot: PolicySnapshot): void {
    const existing = policies.get(snapshot.policyId);
    if (existing && existing.snapshot.version > snapshot.version) return;
    try {
      policies.set(snapshot.policyId, { snapshot, runtime: hydratePolicy(snapshot.compiled) });
      policyByPair.set(pair(snapshot.agentId, snapshot.connectionId), snapshot.policyId);
    } catch (err) {
      // A snapshot this pod cannot load is treated as absent: fail closed.
      logger.error(
        { policyId: snapshot.policyId, err: (err as Error).message },
        'cannot load policy snapshot',
      );
      policies.delete(snapshot.policyId);
    }
  }

  function onToken(e: KvEntry): void {
    if (e.operation === 'delete') {
      tokens.delete(e.key);
      missingTokens.add(e.key, TOMBSTONE_TTL_MS);
      return;
    }
    const parsed = AgentTokenRecord.safeParse(e.value);
    if (!parsed.success) return logger.warn({ bucket: 'agent-tokens' }, 'ignoring unknown token record');
    tokens.set(e.key, parsed.data);
    missingTokens.delete(e.key);
  }
  function onPolicy(e: KvEntry): void {
    if (e.operation === 'delete') {
      const old = policies.get(e.key);
      if (old) policyByPair.delete(pair(old.snapshot.agentId, old.snapshot.connectionId));
      policies.delete(e.key);
      deletedPolicies.add(e.key, TOMBSTONE_TTL_MS);
      return;
    }
    const parsed = PolicySnapshot.safeParse(e.value);
    if (!parsed.success) return logger.warn({ bucket: 'policies' }, 'ignoring unknown policy snapshot');
    deletedPolicies.delete(e.key);
    putPolicy(parsed.data);
  }
  function onConnection(e: KvEntry): void {
    if (e.operation === 'delete') {
      connections.delete(e.key);
      return;
    }
    const parsed = ConnectionDescriptor.safeParse(e.value);
    if (!parsed.success)
      return logger.warn({ bucket: 'connections' }, 'ignoring unknown connection descriptor');
    connections.set(e.key, parsed.data);
  }

  const watches: KvWatch[] = await Promise.all([
    bus.kv(names.buckets.agentTokens).then((kv) => kv.watch(onToken)),
    bus.kv(names.buckets.policies).then((kv) => kv.watch(onPolicy)),
    bus.kv(names.buckets.connections).then((kv) => kv.watch(onConnection)),
  ]);
  const timeoutMs = deps.rpcTimeoutMs ?? 2_000;

  return {
    ready: Promise.all(watches.map((w) => w.ready)).then(() => undefined),
    async agentToken(tokenHash) {
      const hit = tokens.get(tokenHash);
      if (hit) return hit;
      if (missingTokens.has(tokenHash)) return null;
      const res = AgentTokenLookupResponse.parse(
        await bus.request(names.rpc.agentTokenLookup, { v: 1, tokenHash }, { timeoutMs }),
      );
      // A deletion that arrived while we asked wins.
      if (!res.record || missingTokens.has(tokenHash)) {
        missingTokens.add(tokenHash, NEGATIVE_TTL_MS);
        return null;
      }
      tokens.set(tokenHash, res.record);
      return res.record;
    },
    async policyFor(agentId, connectionId) {
      const id = policyByPair.get(pair(agentId, connectionId));
      const cached = id ? policies.get(id) : undefined;
      const conn = connections.get(connectionId) ?? null;
      if (cached && conn) return { policy: cached, connection: conn };
      const res = PolicyLookupResponse.parse(
        await bus.request(names.rpc.policyLookup, { v: 1, agentId, connectionId }, { timeoutMs }),
      );
      if (res.connection && !connections.has(res.connection.id))
        connections.set(res.connection.id, res.connection);
      if (res.policy && !deletedPolicies.has(res.policy.policyId)) putPolicy(res.policy);
      const pid = policyByPair.get(pair(agentId, connectionId));
      return {
        policy: pid ? (policies.get(pid) ?? null) : null,
        connection: connections.get(connectionId) ?? null,
      };
    },
    connection: (id) => connections.get(id) ?? null,
    connectionsOf: (workspaceId) => [...connections.values()].filter((c) => c.workspaceId === workspaceId),
    async stop() {
      await Promise.all(watches.map((w) => w.stop()));
    },
    stats: () => ({ tokens: tokens.size, policies: policies.size, connections: connections.size }),
  };
}
