import { Errors } from '@vlt/service-kit';
import type { AuditEventView, AuditExportQuery, AuditListQuery } from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';

type Filters = Omit<AuditExportQuery, 'format'>;

/**
 * Workspace scoping (spec): an event is visible when its actor is the caller, or its agent
 * or connection belongs to the workspace. Events also carry the workspace they happened in,
 * so history stays visible after an agent is deleted.
 */
async function scopeWhere(
  deps: ControlPlaneDeps,
  caller: { userId: string; workspaceId: string },
  f: Filters,
): Promise<Prisma.AuditEventWhereInput> {
  const [agents, connections] = await Promise.all([
    deps.prisma.agent.findMany({ where: { workspaceId: caller.workspaceId }, select: { id: true } }),
    deps.prisma.connection.findMany({ where: { workspaceId: caller.workspaceId }, select: { id: true } }),
  ]);
  const and: Prisma.AuditEventWhereInput[] = [
    {
      OR: [
        { actor: caller.userId },
        { workspaceId: caller.workspaceId },
        { agentId: { in: agents.map((a) => a.id) } },
        { connectionId: { in: connections.map((c) => c.id) } },
      ],
    },
  ];
  if (f.agentId) and.push({ agentId: f.agentId });
  if (f.connectionId) and.push({ connectionId: f.connectionId });
  if (f.action) and.push({ action: f.action });
  if (f.dateFrom) and.push({ timestamp: { gte: new Date(f.dateFrom) } });
  if (f.dateTo) and.push({ timestamp: { lte: new Date(f.dateTo) } });
  return { AND: and };
}

function view(e: Prisma.AuditEventGetPayload<object>): AuditEventView {
  return {
    id: e.id,
    auditId: e.auditId,
    timestamp: e.timestamp.toISOString(),
    actor: e.actor,
    agentId: e.agentId,
    connectionId: e.connectionId,
    action: e.action,
    decision: e.decision,
    metadata: (e.metadata ?? {}) as Record<string, unknown>,
  };
}

const ORDER: Prisma.AuditEventOrderByWithRelationInput[] = [{ timestamp: 'desc' }, { auditId: 'desc' }];

/** Events after `at` in the listing order (newest first): the page boundary for cursors. */
function olderThan(at: { timestamp: Date; auditId: string }): Prisma.AuditEventWhereInput {
  return {
    OR: [{ timestamp: { lt: at.timestamp } }, { timestamp: at.timestamp, auditId: { lt: at.auditId } }],
  };
}

async function cursorWhere(deps: ControlPlaneDeps, cursor: string): Promise<Prisma.AuditEventWhereInput> {
  const at = await deps.prisma.auditEvent.findUnique({ where: { auditId: cursor } });
  if (!at) throw Errors.badRequest('invalid cursor');
  return olderThan(at);
}

export async function listAudit(
  deps: ControlPlaneDeps,
  caller: { userId: string; workspaceId: string },
  q: AuditListQuery,
) {
  const where = await scopeWhere(deps, caller, q);
  if (q.cursor) (where.AND as Prisma.AuditEventWhereInput[]).push(await cursorWhere(deps, q.cursor));
  const rows = await deps.prisma.auditEvent.findMany({ where, orderBy: ORDER, take: q.limit + 1 });
  const page = rows.slice(0, q.limit);
  return {
    events: page.map(view),
    nextCursor: rows.length > q.limit ? page[page.length - 1]!.auditId : null,
  };
}

/** Every matching event, newest first, fetched in pages so memory stays flat. */
export async function* exportAudit(
  deps: ControlPlaneDeps,
  caller: { userId: string; workspaceId: string },
  f: Filters,
): AsyncGenerator<AuditEventView> {
  const base = await scopeWhere(deps, caller, f);
  let cursor: Prisma.AuditEventGetPayload<object> | null = null;
  for (;;) {
    const where: Prisma.AuditEventWhereInput = cursor ? { AND: [base, olderThan(cursor)] } : base;
    const rows = await deps.prisma.auditEvent.findMany({ where, orderBy: ORDER, take: 1000 });
    for (const r of rows) yield view(r);
    if (rows.length < 1000) return;
    cursor = rows[rows.length - 1]!;
  }
}

export const CSV_COLUMNS = [
  'audit_id',
  'timestamp',
  'actor',
  'agent_id',
  'connection_id',
  'action',
  'decision',
  'metadata',
] as const;

/** RFC 4180 quoting, and a leading quote on formula-like cells so spreadsheets never evaluate them. */
export function csvCell(value: string | null): string {
  if (value === null) return '';
  let v = value;
  if (/^[=+\-@\t\r]/.test(v)) v = `'${v}`;
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

export function csvRow(e: AuditEventView): string {
  return (
    [
      e.auditId,
      e.timestamp,
      e.actor,
      e.agentId,
      e.connectionId,
      e.action,
      e.decision,
      JSON.stringify(e.metadata),
    ]
      .map(csvCell)
      .join(',') + '\r\n'
  );
}
