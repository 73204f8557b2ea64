/**
 * Deciding an approval from a bot-chat button. GET only shows what will be decided (chat apps
 * and link previews fetch URLs on their own); POST decides, once: the token row is marked used
 * by a conditional update before the decision, so a replay or a race finds it spent.
 */
import { AppError } from '@vlt/service-kit';
import type { ControlPlaneDeps } from '../../deps.js';
import { decide } from '../approvals/service.js';
import { parseQuickActionToken, verifyQuickAction, type QuickAction } from './tokens.js';

export type QuickActionPage =
  | {
      state: 'ready';
      action: QuickAction;
      agentName: string;
      connectionLabel: string;
      method: string;
      url: string;
      expiresAt: Date;
    }
  | { state: 'done'; action: QuickAction }
  | { state: 'used' }
  | { state: 'already_decided'; status: string }
  | { state: 'expired' }
  | { state: 'invalid' };

async function load(deps: ControlPlaneDeps, token: string) {
  const parsed = parseQuickActionToken(token);
  if (!parsed) return null;
  const row = await deps.prisma.quickActionToken.findUnique({
    where: { id: parsed.id },
    include: {
      approval: { include: { agent: { select: { name: true } }, connection: { select: { label: true } } } },
    },
  });
  if (!row || !verifyQuickAction(deps.keyring, parsed.sig, row)) return null;
  return row;
}

type Loaded = NonNullable<Awaited<ReturnType<typeof load>>>;

function stateOf(deps: ControlPlaneDeps, row: Loaded): QuickActionPage | null {
  if (row.usedAt) return { state: 'used' };
  const a = row.approval;
  if (
    a.status === 'expired' ||
    (a.status === 'pending' && a.expiresAt <= deps.now()) ||
    row.expiresAt <= deps.now()
  )
    return { state: 'expired' };
  if (a.status !== 'pending') return { state: 'already_decided', status: a.status };
  return null;
}

export async function inspectQuickAction(deps: ControlPlaneDeps, token: string): Promise<QuickActionPage> {
  const row = await load(deps, token);
  if (!row) return { state: 'invalid' };
  const settled = stateOf(deps, row);
  if (settled) return settled;
  const details = row.approval.requestDetails as Record<string, unknown>;
  return {
    state: 'ready',
    action: row.action as QuickAction,
    agentName: row.approval.agent.name,
    connectionLabel: row.approval.connection.label,
    method: typeof details.method === 'string' ? details.method : '',
    url: typeof details.url === 'string' ? details.url : '',
    expiresAt: row.approval.expiresAt,
  };
}

export async function runQuickAction(deps: ControlPlaneDeps, token: string): Promise<QuickActionPage> {
  const row = await load(deps, token);
  if (!row) return { state: 'invalid' };
  const settled = stateOf(deps, row);
  if (settled) return settled;
  const spent = await deps.prisma.quickActionToken.updateMany({
    where: { id: row.id, usedAt: null },
    data: { usedAt: deps.now() },
  });
  if (spent.count === 0) return { state: 'used' };
  const action = row.action as QuickAction;
  try {
    await decide(
      deps,
      // The reviewer is the channel the button was sent to (decidedBy and the audit actor say so).
      { userId: `quick-action:${row.channelId ?? 'unknown'}`, workspaceId: row.approval.workspaceId },
      row.approvalId,
      action === 'approve' ? 'approved' : 'denied',
      { via: 'quick_action', channelId: row.channelId },
    );
  } catch (err) {
    if (err instanceof AppError && err.statusCode === 410) return { state: 'expired' };
    if (err instanceof AppError && err.statusCode === 409) {
      const now = await deps.prisma.approvalRequest.findUnique({ where: { id: row.approvalId } });
      return { state: 'already_decided', status: now?.status ?? 'decided' };
    }
    throw err;
  }
  return { state: 'done', action };
}
