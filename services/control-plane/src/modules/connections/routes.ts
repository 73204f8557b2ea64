import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  ConnectionListResponse,
  ConnectionSummary,
  CreateConnectionResponse,
  ErrorResponse,
  IdParams,
  IssueTrackerConnectionBody,
} from '@vlt/contracts';
import { z } from 'zod';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import {
  createIssueTrackerConnection,
  listConnections,
  relabelConnection,
  revokeConnection,
} from './service.js';

export function connectionRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();

    r.get(
      '/v1/connections',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags: ['connections'], response: { 200: ConnectionListResponse } },
      },
      async (req) => ({ connections: await listConnections(deps, requireUser(req).workspaceId) }),
    );

    r.post(
      '/v1/connections/issue-tracker',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          body: IssueTrackerConnectionBody,
          response: { 201: CreateConnectionResponse, 400: ErrorResponse },
        },
      },
      async (req, reply) =>
        reply.status(201).send(await createIssueTrackerConnection(deps, requireUser(req), req.body)),
    );

    r.post(
      '/v1/connections/:id/revoke',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          params: IdParams,
          response: {
            200: z.object({
              connection: z.object({
                id: z.uuid(),
                provider: z.string(),
                label: z.string(),
                status: z.literal('revoked'),
              }),
              auditId: z.string(),
            }),
            404: ErrorResponse,
            409: ErrorResponse,
          },
        },
      },
      async (req) => revokeConnection(deps, requireUser(req), req.params.id),
    );

    r.put(
      '/v1/connections/:id/label',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          params: IdParams,
          body: z.object({ label: z.string().trim().min(1).max(200) }),
          response: { 200: z.object({ connection: ConnectionSummary }), 404: ErrorResponse },
        },
      },
      async (req) => relabelConnection(deps, requireUser(req), req.params.id, req.body.label),
    );
  };
}
