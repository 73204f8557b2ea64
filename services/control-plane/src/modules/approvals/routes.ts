import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  ApprovalListResponse,
  ApprovalResponse,
  ApproveResponse,
  DenyResponse,
  ErrorResponse,
  IdParams,
} from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import type { FastifyRequest } from 'fastify';
import { requirePrincipal, requireUser } from '../../plugins/authenticate.js';

function reader(req: FastifyRequest) {
  const p = requirePrincipal(req);
  return { workspaceId: p.workspaceId, agentId: p.kind === 'agent' ? p.agentId : undefined };
}
import { approve, deny, getApproval, listApprovals } from './service.js';

export function approvalRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ['approvals'];
    const decided = { 404: ErrorResponse, 409: ErrorResponse, 410: ErrorResponse };
    r.get(
      '/v1/approvals',
      {
        // Agents read their own (the plugin's approval watcher); users the workspace's.
        config: { auth: 'any', scope: 'api:read', agentScope: 'vault:execute' },
        schema: { tags, response: { 200: ApprovalListResponse } },
      },
      async (req) => listApprovals(deps, reader(req)),
    );
    r.get(
      '/v1/approvals/:id',
      {
        config: { auth: 'any', scope: 'api:read', agentScope: 'vault:execute' },
        schema: { tags, params: IdParams, response: { 200: ApprovalResponse, 404: ErrorResponse } },
      },
      async (req) => getApproval(deps, reader(req), req.params.id),
    );
    // Decisions are POSTs that need the approvals:decide scope: agents never hold it.
    r.post(
      '/v1/approvals/:id/approve',
      {
        config: { auth: 'user', scope: 'approvals:decide' },
        schema: { tags, params: IdParams, response: { 200: ApproveResponse, ...decided } },
      },
      async (req) => approve(deps, requireUser(req), req.params.id),
    );
    r.post(
      '/v1/approvals/:id/deny',
      {
        config: { auth: 'user', scope: 'approvals:decide' },
        schema: { tags, params: IdParams, response: { 200: DenyResponse, ...decided } },
      },
      async (req) => deny(deps, requireUser(req), req.params.id),
    );
  };
}
