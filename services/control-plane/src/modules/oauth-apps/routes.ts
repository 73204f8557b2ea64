import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from '@vlt/service-kit';
import { ErrorResponse, IdParams, WorkspaceOAuthApp, WorkspaceOAuthAppBody } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import { createOAuthApp, deleteOAuthApp, listOAuthApps } from './service.js';

export function oauthAppRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();

    r.post(
      '/v1/workspace-oauth-apps',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          body: WorkspaceOAuthAppBody,
          response: {
            201: z.object({ app: WorkspaceOAuthApp, auditId: z.string() }),
            400: ErrorResponse,
            409: ErrorResponse,
          },
        },
      },
      async (req, reply) => reply.status(201).send(await createOAuthApp(deps, requireUser(req), req.body)),
    );

    r.get(
      '/v1/workspace-oauth-apps',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags: ['connections'], response: { 200: z.object({ apps: z.array(WorkspaceOAuthApp) }) } },
      },
      async (req) => listOAuthApps(deps, requireUser(req).workspaceId),
    );

    r.delete(
      '/v1/workspace-oauth-apps/:id',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          params: IdParams,
          response: { 200: z.object({ deleted: z.literal(true), auditId: z.string() }), 404: ErrorResponse },
        },
      },
      async (req) => deleteOAuthApp(deps, requireUser(req), req.params.id),
    );
  };
}
