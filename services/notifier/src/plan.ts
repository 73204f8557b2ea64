/**
 * What one event means for reviewers: the in-app notification, whether chat channels get an
 * approval notice, an outcome edit or an alert, and whether devices get a push. Pure, so every
 * mapping is tested without a broker. Texts name method, canonical URL (query values already
 * stripped by the producer), agent and connection; never a body, header or secret.
 */
import type { AuditAction, AuditEventMessage, NotificationType } from '@vlt/contracts';

export interface InAppContent {
  type: NotificationType;
  title: string;
  body: string;
  linkUrl: string | null;
  metadata: Record<string, unknown>;
}

export type ChatPlan =
  | { kind: 'approval_notice'; approvalId: string; text: string }
  | { kind: 'approval_outcome'; approvalId: string; text: string }
  | { kind: 'alert'; text: string; linkUrl: string };

export interface NotificationPlan {
  inApp: InAppContent;
  chat: ChatPlan | null;
  push: { type: 'approval_request' | 'security_alert'; title: string; body: string; url: string } | null;
}

const MAX_FIELD = 200;

/** One line of untrusted text: no control characters, bounded. */
export function clean(value: unknown, fallback = ''): string {
  if (typeof value !== 'string') return fallback;
  // eslint-disable-next-line no-control-regex
  const s = value.replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ').trim();
  return s.length > MAX_FIELD ? `${s.slice(0, MAX_FIELD - 1)}…` : s || fallback;
}

const str = (m: Record<string, unknown>, k: string) => (typeof m[k] === 'string' ? (m[k] as string) : null);

export interface PlanContext {
  publicBaseUrl: string;
}

/**
 * The actions the notifier acts on: those planNotification plans and those the security-alert
 * detector watches. The consumer acks every other event unread (most of the stream is
 * execution traffic nobody is notified of).
 */
export const NOTIFIER_ACTIONS: ReadonlySet<string> = new Set<AuditAction>([
  'approval_requested',
  'approval_approved',
  'approval_denied',
  'approval_expired',
  'permission_requested',
  'connection_needs_reauth',
  'agent_disabled',
  'execution_denied',
]);

export function planNotification(e: AuditEventMessage, ctx: PlanContext): NotificationPlan | null {
  const m = e.metadata;
  const base = ctx.publicBaseUrl.replace(/\/+$/, '');
  const agent = clean(m.agentName, e.agentId ? `agent ${e.agentId.slice(0, 8)}` : 'an agent');
  const connection = clean(m.connectionLabel, 'a connection');
  const approvalId = str(m, 'approvalRequestId');
  switch (e.action) {
    case 'approval_requested': {
      if (!approvalId) return null;
      const what = `${clean(m.method, 'a request').toUpperCase()} ${clean(m.url, '')}`.trim();
      const reason = clean(m.reason);
      const body = `${agent} wants to run ${what} on ${connection}.${reason ? ` Reason: ${reason}` : ''}`;
      const url = `${base}/approvals/${approvalId}`;
      return {
        inApp: {
          type: 'permission_request',
          title: 'Approval needed',
          body,
          linkUrl: url,
          metadata: { approvalRequestId: approvalId, agentId: e.agentId, connectionId: e.connectionId },
        },
        chat: {
          kind: 'approval_notice',
          approvalId,
          text: `Approval needed\n${body}\nExpires in 5 minutes. Details: ${url}`,
        },
        push: { type: 'approval_request', title: 'Approval needed', body, url },
      };
    }
    case 'approval_approved':
    case 'approval_denied':
    case 'approval_expired': {
      if (!approvalId) return null;
      const outcome =
        e.action === 'approval_approved' ? 'approved' : e.action === 'approval_denied' ? 'denied' : 'expired';
      const by =
        e.action === 'approval_expired' ? '' : str(m, 'via') === 'quick_action' ? ' from a chat button' : '';
      const body = `The request of ${agent} on ${connection} was ${outcome}${by}.`;
      return {
        inApp: {
          type: 'approval_resolved',
          title: `Approval ${outcome}`,
          body,
          linkUrl: `${base}/approvals/${approvalId}`,
          metadata: { approvalRequestId: approvalId, outcome },
        },
        chat: {
          kind: 'approval_outcome',
          approvalId,
          text: `Approval ${outcome}\n${body}\nDetails: ${base}/approvals/${approvalId}`,
        },
        push: null,
      };
    }
    case 'permission_requested': {
      const body = `${agent} asks for ${clean(m.actionTemplateId, 'a capability')}.${
        clean(m.reason) ? ` Reason: ${clean(m.reason)}` : ''
      }`;
      return {
        inApp: {
          type: 'permission_request',
          title: 'Capability requested',
          body,
          linkUrl: `${base}/permission-requests`,
          metadata: { requestId: str(m, 'requestId'), agentId: e.agentId },
        },
        chat: null,
        push: null,
      };
    }
    case 'connection_needs_reauth':
      return {
        inApp: {
          type: 'connection_issue',
          title: 'Connection needs to be re-authorised',
          body: `${connection} stopped working and must be connected again.`,
          linkUrl: `${base}/connections/${e.connectionId ?? ''}`,
          metadata: { connectionId: e.connectionId },
        },
        chat: null,
        push: null,
      };
    default:
      return null;
  }
}

/** A security alert's notification (the detector decides when one is due). */
export function planSecurityAlert(
  alert: { title: string; body: string; agentId: string | null },
  ctx: PlanContext,
): NotificationPlan {
  const url = `${ctx.publicBaseUrl.replace(/\/+$/, '')}/activity`;
  return {
    inApp: {
      type: 'security_alert',
      title: alert.title,
      body: alert.body,
      linkUrl: url,
      metadata: { agentId: alert.agentId },
    },
    chat: { kind: 'alert', text: `${alert.title}\n${alert.body}`, linkUrl: url },
    push: { type: 'security_alert', title: alert.title, body: alert.body, url },
  };
}
