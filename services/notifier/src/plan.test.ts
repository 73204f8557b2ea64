import { AuditAction, type AuditEventMessage } from '@vlt/contracts';
import { describe, expect, it } from 'vitest';
import { clean, NOTIFIER_ACTIONS, planNotification } from './plan.js';
import { createSecurityAlertDetector, DENIALS_FOR_ALERT } from './security-alerts.js';

const ctx = { publicBaseUrl: 'https://vault.example/' };
const ids = {
  ws: '00000000-0000-4000-8000-000000000001',
  agent: '00000000-0000-4000-8000-000000000002',
  conn: '00000000-0000-4000-8000-000000000003',
  approval: '00000000-0000-4000-8000-000000000004',
};

function event(
  action: AuditEventMessage['action'],
  metadata: Record<string, unknown>,
  at = 0,
): AuditEventMessage {
  return {
    v: 1,
    auditId: `a-${action}-${at}`,
    action,
    timestamp: new Date(1_800_000_000_000 + at).toISOString(),
    actor: `agent:${ids.agent}`,
    workspaceId: ids.ws,
    agentId: ids.agent,
    connectionId: ids.conn,
    decision: 'info',
    metadata,
  };
}

describe('planNotification', () => {
  it('an approval request: in-app, a chat notice and a push, naming method, URL, agent and connection', () => {
    const plan = planNotification(
      event('approval_requested', {
        approvalRequestId: ids.approval,
        method: 'post',
        url: 'https://tracker.example/rest/api/3/issue?jql=REDACTED',
        agentName: 'triage-bot',
        connectionLabel: 'Tracker',
        reason: 'step-up approval required',
      }),
      ctx,
    )!;
    expect(plan.inApp).toMatchObject({
      type: 'permission_request',
      title: 'Approval needed',
      linkUrl: `https://vault.example/approvals/${ids.approval}`,
      metadata: { approvalRequestId: ids.approval },
    });
    expect(plan.inApp.body).toBe(
      'triage-bot wants to run POST https://tracker.example/rest/api/3/issue?jql=REDACTED on Tracker. Reason: step-up approval required',
    );
    expect(plan.chat).toMatchObject({ kind: 'approval_notice', approvalId: ids.approval });
    expect(plan.push).toEqual({
      type: 'approval_request',
      title: 'Approval needed',
      body: plan.inApp.body,
      url: `https://vault.example/approvals/${ids.approval}`,
    });
  });

  it('decisions and expiry edit the chat message and notify in-app, without a push', () => {
    for (const [action, outcome] of [
      ['approval_approved', 'approved'],
      ['approval_denied', 'denied'],
      ['approval_expired', 'expired'],
    ] as const) {
      const plan = planNotification(event(action, { approvalRequestId: ids.approval }), ctx)!;
      expect(plan.inApp.type).toBe('approval_resolved');
      expect(plan.inApp.title).toBe(`Approval ${outcome}`);
      expect(plan.chat).toMatchObject({ kind: 'approval_outcome', approvalId: ids.approval });
      expect(plan.push).toBeNull();
    }
  });

  it('a connection that needs re-authorisation is a connection issue; routine events notify nobody', () => {
    expect(planNotification(event('connection_needs_reauth', {}), ctx)?.inApp.type).toBe('connection_issue');
    expect(planNotification(event('execution_completed', {}), ctx)).toBeNull();
    expect(planNotification(event('policy_updated', {}), ctx)).toBeNull();
  });

  it('untrusted text is one bounded line: no control characters, no line breaks to forge a second message', () => {
    expect(clean('a\nb\r\u0000c\u2028d')).toBe('a b c d');
    expect(clean('x'.repeat(1000))).toHaveLength(200);
    const plan = planNotification(
      event('approval_requested', {
        approvalRequestId: ids.approval,
        agentName: 'evil\nApproval approved',
        method: 'get',
      }),
      ctx,
    )!;
    expect(plan.inApp.body.split('\n')).toHaveLength(1);
  });
});

describe('security alerts', () => {
  it('an SSRF attempt and a disabled agent alert at once', () => {
    const d = createSecurityAlertDetector();
    expect(d.check(event('execution_denied', { reason: 'destination address is not allowed' }))?.title).toBe(
      'Blocked request to a private address',
    );
    expect(d.check(event('agent_disabled', {}))?.title).toBe('Agent disabled');
  });

  it(`alerts once after ${DENIALS_FOR_ALERT} denials in five minutes, then stays quiet; step-up waits do not count`, () => {
    const d = createSecurityAlertDetector();
    const deny = (at: number, reason = 'not in the allowlist') =>
      d.check(event('execution_denied', { reason }, at));
    for (let i = 0; i < 10; i++) expect(deny(i, 'step-up approval required')).toBeNull();
    for (let i = 0; i < DENIALS_FOR_ALERT - 1; i++) expect(deny(i * 1000)).toBeNull();
    expect(deny(5_000)?.title).toBe('Repeated denials');
    for (let i = 0; i < DENIALS_FOR_ALERT * 2; i++) expect(deny(6_000 + i)).toBeNull();
    // Spread out over more than the window: no alert.
    const slow = createSecurityAlertDetector();
    for (let i = 0; i < DENIALS_FOR_ALERT * 2; i++)
      expect(slow.check(event('execution_denied', { reason: 'x' }, i * 120_000))).toBeNull();
  });
});

describe('NOTIFIER_ACTIONS', () => {
  it('every action outside the set is one nothing is planned or alerted for (the consumer skips it unread)', () => {
    const skipped = AuditAction.options.filter((a) => !NOTIFIER_ACTIONS.has(a));
    expect(skipped).toContain('execution_requested');
    expect(skipped).toContain('execution_completed');
    // Metadata that would make any planned action produce something.
    const rich = {
      approvalRequestId: ids.approval,
      method: 'GET',
      url: 'https://tracker.example/x',
      reason: 'destination address is not allowed',
      agentName: 'a',
    };
    for (const action of skipped) {
      const detector = createSecurityAlertDetector();
      expect(planNotification(event(action, rich), ctx), action).toBeNull();
      for (let i = 0; i <= DENIALS_FOR_ALERT; i++) {
        expect(detector.check(event(action, rich, i)), action).toBeNull();
      }
    }
  });
});
