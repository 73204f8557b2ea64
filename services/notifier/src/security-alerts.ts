/**
 * Which events are security alerts: an agent disabled, an SSRF attempt, or an agent denied
 * again and again (at least DENIALS_FOR_ALERT times in DENIAL_WINDOW_MS, then quiet for
 * ALERT_QUIET_MS). The repeated-denial window is kept per notifier process: with several
 * notifier replicas an alert may come a little later, never twice for the same event.
 */
import type { AuditEventMessage } from '@vlt/contracts';

export const DENIALS_FOR_ALERT = 5;
export const DENIAL_WINDOW_MS = 5 * 60_000;
export const ALERT_QUIET_MS = 15 * 60_000;
const MAX_TRACKED_AGENTS = 10_000;

/** Denials that are the policy working as configured, not an agent probing. */
const ROUTINE = new Set(['step-up approval required']);
const SSRF = /destination address is not allowed|only https upstreams are allowed/;

export interface SecurityAlert {
  title: string;
  body: string;
  agentId: string | null;
}

export function createSecurityAlertDetector() {
  const denials = new Map<string, { times: number[]; quietUntil: number }>();
  return {
    check(e: AuditEventMessage, now = Date.parse(e.timestamp) || Date.now()): SecurityAlert | null {
      const who =
        typeof e.metadata.agentName === 'string' ? e.metadata.agentName : (e.agentId ?? 'unknown agent');
      if (e.action === 'agent_disabled') {
        return {
          title: 'Agent disabled',
          body: `Agent ${who} was disabled; its tokens are revoked.`,
          agentId: e.agentId,
        };
      }
      if (e.action !== 'execution_denied' || !e.agentId) return null;
      const reason = typeof e.metadata.reason === 'string' ? e.metadata.reason : '';
      if (SSRF.test(reason)) {
        return {
          title: 'Blocked request to a private address',
          body: `Agent ${who} tried to reach an address the gateway does not allow (SSRF protection).`,
          agentId: e.agentId,
        };
      }
      if (ROUTINE.has(reason)) return null;
      let entry = denials.get(e.agentId);
      if (!entry) {
        if (denials.size >= MAX_TRACKED_AGENTS) denials.delete(denials.keys().next().value!);
        entry = { times: [], quietUntil: 0 };
        denials.set(e.agentId, entry);
      }
      entry.times = entry.times.filter((t) => t > now - DENIAL_WINDOW_MS);
      entry.times.push(now);
      if (entry.times.length < DENIALS_FOR_ALERT || now < entry.quietUntil) return null;
      entry.quietUntil = now + ALERT_QUIET_MS;
      entry.times = [];
      return {
        title: 'Repeated denials',
        body: `Agent ${who} was denied ${DENIALS_FOR_ALERT} times within 5 minutes.`,
        agentId: e.agentId,
      };
    },
  };
}
