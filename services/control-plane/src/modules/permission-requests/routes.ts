import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  ErrorResponse,
  IdParams,
  PermissionRequestBody,
  PermissionRequestCreated,
  PermissionRequestDecision,
  PermissionRequestList,
} from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireAgent, requirePrincipal, requireUser } from '../../plugins/authenticate.js';
import { createPermissionRequest, decidePermissionRequest, listPermissionRequests } from './service.js';

export function permissionRequestRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ['agent-permission-requests'];
    const decided = { 404: ErrorResponse, 409: ErrorResponse };

    r.post(
      '/v1/agent-permission-requests',
      {
        config: { auth: 'agent', scope: 'capabilities:read' },
        schema: {
          tags,
          body: PermissionRequestBody,
          response: { 201: PermissionRequestCreated, 400: ErrorResponse, 409: ErrorResponse },
        },
      },
      async (req, reply) =>
        reply.status(201).send(await createPermissionRequest(deps, requireAgent(req), req.body)),
    );

    r.get(
      '/v1/agent-permission-requests',
      {
        // Users see the workspace's requests; an agent sees its own.
        config: { auth: 'any', scope: 'capabilities:read' },
        schema: { tags, response: { 200: PermissionRequestList } },
      },
      async (req) => {
        const p = requirePrincipal(req);
        return listPermissionRequests(deps, {
          workspaceId: p.workspaceId,
          agentId: p.kind === 'agent' ? p.agentId : undefined,
        });
      },
    );

    r.post(
      '/v1/agent-permission-requests/:id/approve',
      {
        config: { auth: 'user', scope: 'approvals:decide' },
        schema: { tags, params: IdParams, response: { 200: PermissionRequestDecision, ...decided } },
      },
      async (req) => decidePermissionRequest(deps, requireUser(req), req.params.id, 'approved'),
    );

    r.post(
      '/v1/agent-permission-requests/:id/deny',
      {
        config: { auth: 'user', scope: 'approvals:decide' },
        schema: { tags, params: IdParams, response: { 200: PermissionRequestDecision, ...decided } },
      },
      async (req) => decidePermissionRequest(deps, requireUser(req), req.params.id, 'denied'),
    );
  };
}
