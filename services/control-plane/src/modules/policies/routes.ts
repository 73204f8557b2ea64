import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  CreatePolicyBody,
  DeletePolicyResponse,
  ErrorResponse,
  IdParams,
  PolicyListResponse,
  PolicyResponse,
  PolicyView,
  PutAllowlistsBody,
  PutProviderConstraintsBody,
  PutRateLimitsBody,
  PutRulesBody,
  PutTimeWindowsBody,
  RulesResponse,
  UpdatePolicyBody,
} from '@vlt/contracts';
import { Prisma } from '@vlt/db';
import { z } from 'zod';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import {
  createPolicy,
  deletePolicy,
  getPolicy,
  getRules,
  listPolicies,
  setProviderConstraints,
  updatePolicy,
  updatePolicySettings,
} from './service.js';

const json = (v: unknown) => v as Prisma.InputJsonValue;

export function policyRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const read = { auth: 'user' as const, scope: 'api:read' as const };
    const write = { auth: 'user' as const, scope: 'api:write' as const };
    const byId = { tags: ['policies'], params: IdParams };
    const updated = { 200: PolicyResponse, 400: ErrorResponse, 404: ErrorResponse };

    r.post(
      '/v1/policies',
      {
        config: write,
        schema: {
          tags: ['policies'],
          body: CreatePolicyBody,
          response: { 201: PolicyResponse, 404: ErrorResponse, 409: ErrorResponse },
        },
      },
      async (req, reply) => reply.status(201).send(await createPolicy(deps, requireUser(req), req.body)),
    );
    r.get(
      '/v1/policies',
      { config: read, schema: { tags: ['policies'], response: { 200: PolicyListResponse } } },
      async (req) => listPolicies(deps, requireUser(req).workspaceId),
    );
    r.get(
      '/v1/policies/:id',
      {
        config: read,
        schema: { ...byId, response: { 200: z.object({ policy: PolicyView }), 404: ErrorResponse } },
      },
      async (req) => getPolicy(deps, requireUser(req).workspaceId, req.params.id),
    );
    r.put(
      '/v1/policies/:id',
      { config: write, schema: { ...byId, body: UpdatePolicyBody, response: updated } },
      async (req) => updatePolicySettings(deps, requireUser(req), req.params.id, req.body),
    );
    r.put(
      '/v1/policies/:id/allowlists',
      { config: write, schema: { ...byId, body: PutAllowlistsBody, response: updated } },
      async (req) =>
        updatePolicy(deps, requireUser(req), req.params.id, 'allowlists', {
          allowlists: json(req.body.allowlists),
        }),
    );
    r.put(
      '/v1/policies/:id/rate-limits',
      { config: write, schema: { ...byId, body: PutRateLimitsBody, response: updated } },
      async (req) =>
        updatePolicy(deps, requireUser(req), req.params.id, 'rateLimits', {
          rateLimits: req.body.rateLimits === null ? Prisma.DbNull : json(req.body.rateLimits),
        }),
    );
    r.put(
      '/v1/policies/:id/time-windows',
      { config: write, schema: { ...byId, body: PutTimeWindowsBody, response: updated } },
      async (req) =>
        updatePolicy(deps, requireUser(req), req.params.id, 'timeWindows', {
          timeWindows: json(req.body.timeWindows),
        }),
    );
    r.get(
      '/v1/policies/:id/rules',
      { config: read, schema: { ...byId, response: { 200: RulesResponse, 404: ErrorResponse } } },
      async (req) => getRules(deps, requireUser(req).workspaceId, req.params.id),
    );
    r.put(
      '/v1/policies/:id/rules',
      { config: write, schema: { ...byId, body: PutRulesBody, response: updated } },
      async (req) =>
        updatePolicy(deps, requireUser(req), req.params.id, 'rules', { rules: json(req.body.rules) }),
    );
    r.put(
      '/v1/policies/:id/provider-constraints',
      { config: write, schema: { ...byId, body: PutProviderConstraintsBody, response: updated } },
      async (req) =>
        setProviderConstraints(deps, requireUser(req), req.params.id, req.body.providerConstraints),
    );
    r.delete(
      '/v1/policies/:id',
      { config: write, schema: { ...byId, response: { 200: DeletePolicyResponse, 404: ErrorResponse } } },
      async (req) => deletePolicy(deps, requireUser(req), req.params.id),
    );
  };
}
