/**
 * Every subject, stream and bucket in one place. A prefix keeps concurrent runs
 * (test suites, environments sharing a NATS server) apart.
 */
export interface BusNames {
  eventsStream: string;
  /** Subject for an event; `category` is e.g. `execution`, `agent`, `policy`. */
  eventSubject(category: string, action: string): string;
  eventsWildcard: string;
  buckets: {
    /** Compiled policy snapshots, key = policy id. */
    policies: string;
    /** Agent access-token records, key = sha256 hex of the token. */
    agentTokens: string;
    /** Connection descriptors without secrets, key = connection id. */
    connections: string;
    /** Per agent+connection request counts for policy rate limits, shared by data planes. */
    rateCounters: string;
  };
  rpc: {
    credentialsGet: string;
    approvalsCreate: string;
    approvalsRedeem: string;
    agentTokenLookup: string;
    policyLookup: string;
    notifierChannels: string;
    notifierChannelStatus: string;
  };
  durable: { audit: string; notifier: string };
  /** Core (at-most-once) fan-out subjects: every subscriber gets every message. */
  broadcast: {
    /** In-app notifications of one workspace, for every control-plane replica's SSE streams. */
    notifications(workspaceId: string): string;
    notificationsWildcard: string;
  };
}

export function busNames(prefix = 'vlt'): BusNames {
  if (!/^[A-Za-z0-9_-]+$/.test(prefix)) throw new Error(`invalid bus prefix: ${prefix}`);
  const p = prefix;
  return {
    eventsStream: `${p.toUpperCase().replace(/-/g, '_')}_EVENTS`,
    eventSubject: (category, action) => `${p}.events.${category}.${action}`,
    eventsWildcard: `${p}.events.>`,
    buckets: {
      policies: `${p}-policies`,
      agentTokens: `${p}-agent-tokens`,
      connections: `${p}-connections`,
      rateCounters: `${p}-rate-counters`,
    },
    rpc: {
      credentialsGet: `${p}.rpc.credentials.get`,
      approvalsCreate: `${p}.rpc.approvals.create`,
      approvalsRedeem: `${p}.rpc.approvals.redeem`,
      agentTokenLookup: `${p}.rpc.agent-tokens.lookup`,
      policyLookup: `${p}.rpc.policies.lookup`,
      notifierChannels: `${p}.rpc.notifier.channels`,
      notifierChannelStatus: `${p}.rpc.notifier.channel-status`,
    },
    durable: { audit: `${p}-audit`, notifier: `${p}-notifier` },
    broadcast: {
      notifications: (workspaceId) => `${p}.broadcast.notifications.${workspaceId}`,
      notificationsWildcard: `${p}.broadcast.notifications.*`,
    },
  };
}
