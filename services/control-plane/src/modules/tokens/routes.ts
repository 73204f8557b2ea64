import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import { z } from 'zod';
import { CreatePatBody, CreatePatResponse, IdParams, PatListResponse, PatView } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import { createPat, listPats, renamePat, revokePat } from './service.js';

export function tokenRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.post(
      '/v1/tokens',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags: ['tokens'], body: CreatePatBody, response: { 201: CreatePatResponse } },
      },
      async (req, reply) => reply.status(201).send(await createPat(deps, requireUser(req), req.body)),
    );
    r.get(
      '/v1/tokens',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags: ['tokens'], response: { 200: PatListResponse } },
      },
      async (req) => listPats(deps, requireUser(req)),
    );
    r.put(
      '/v1/tokens/:id',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: {
          tags: ['tokens'],
          params: IdParams,
          body: z.object({ name: z.string().trim().min(1).max(200) }),
          response: { 200: z.object({ token: PatView }) },
        },
      },
      async (req) => renamePat(deps, requireUser(req), req.params.id, req.body.name),
    );
    r.delete(
      '/v1/tokens/:id',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: {
          tags: ['tokens'],
          params: IdParams,
          response: { 200: z.object({ revoked: z.literal(true), id: z.uuid(), auditId: z.string() }) },
        },
      },
      async (req) => revokePat(deps, requireUser(req), req.params.id),
    );
  };
}
