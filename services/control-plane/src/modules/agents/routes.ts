import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  AgentListResponse,
  AgentResponse,
  AgentTokenBody,
  AgentTokenResponse,
  BootstrapBody,
  BootstrapResponse,
  BootstrapSecretResponse,
  CreateAgentBody,
  CreateAgentResponse,
  DeleteAgentResponse,
  DisableAgentResponse,
  EnableAgentResponse,
  ErrorResponse,
  IdParams,
  UpdateAgentBody,
  UpdateAgentResponse,
} from '@vlt/contracts';
import type { JWK } from 'jose';
import type { ControlPlaneDeps } from '../../deps.js';
import { LIMITS } from '../../infra/rate-limiter.js';
import { requireUser } from '../../plugins/authenticate.js';
import { countRefusedTokenRequest, createAgentKeyCache, issueAgentToken } from './token-issuance.js';
import {
  bootstrapAgent,
  createAgent,
  deleteAgent,
  disableAgent,
  enableAgent,
  getAgent,
  listAgents,
  newBootstrapSecret,
  updateAgent,
} from './service.js';

export function agentRoutes(deps: ControlPlaneDeps) {
  const agentKeys = createAgentKeyCache(deps.sql);
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const read = { auth: 'user' as const, scope: 'api:read' as const };
    const write = { auth: 'user' as const, scope: 'api:write' as const };
    const byId = { tags: ['agents'], params: IdParams };

    r.post(
      '/v1/agents',
      {
        config: write,
        schema: { tags: ['agents'], body: CreateAgentBody, response: { 201: CreateAgentResponse } },
      },
      async (req, reply) => reply.status(201).send(await createAgent(deps, requireUser(req), req.body)),
    );
    r.get(
      '/v1/agents',
      { config: read, schema: { tags: ['agents'], response: { 200: AgentListResponse } } },
      async (req) => ({
        agents: await listAgents(deps, requireUser(req).workspaceId),
      }),
    );
    r.get(
      '/v1/agents/:id',
      { config: read, schema: { ...byId, response: { 200: AgentResponse, 404: ErrorResponse } } },
      async (req) => ({ agent: await getAgent(deps, requireUser(req).workspaceId, req.params.id) }),
    );
    r.put(
      '/v1/agents/:id',
      { config: write, schema: { ...byId, body: UpdateAgentBody, response: { 200: UpdateAgentResponse } } },
      async (req) => updateAgent(deps, requireUser(req), req.params.id, req.body),
    );
    r.delete(
      '/v1/agents/:id',
      { config: write, schema: { ...byId, response: { 200: DeleteAgentResponse } } },
      async (req) => deleteAgent(deps, requireUser(req), req.params.id),
    );
    r.post(
      '/v1/agents/:id/bootstrap-secret',
      { config: write, schema: { ...byId, response: { 200: BootstrapSecretResponse, 409: ErrorResponse } } },
      async (req, reply) => {
        reply.header('cache-control', 'no-store');
        return newBootstrapSecret(deps, requireUser(req), req.params.id);
      },
    );
    r.post(
      '/v1/agents/:id/disable',
      { config: write, schema: { ...byId, response: { 200: DisableAgentResponse } } },
      async (req) => disableAgent(deps, requireUser(req), req.params.id),
    );
    r.post(
      '/v1/agents/:id/enable',
      { config: write, schema: { ...byId, response: { 200: EnableAgentResponse } } },
      async (req) => enableAgent(deps, requireUser(req), req.params.id),
    );

    r.post(
      '/v1/agents/bootstrap',
      {
        config: { auth: 'none' },
        schema: { tags: ['agent authentication'], body: BootstrapBody, response: { 200: BootstrapResponse } },
        // Counted before the body is even validated: a flood of garbage is limited too.
        preValidation: async (req) => deps.rateLimiter.hit(LIMITS.bootstrap, req.ip),
      },
      async (req) =>
        bootstrapAgent(deps, {
          bootstrapSecret: req.body.bootstrapSecret,
          publicKey: req.body.publicKey as JWK,
        }),
    );

    r.post(
      '/v1/agents/token',
      {
        config: { auth: 'none' },
        schema: {
          tags: ['agent authentication'],
          body: AgentTokenBody,
          response: { 200: AgentTokenResponse },
        },
        // An address this replica already saw over the limit is refused before any work. The
        // others are counted by the issuing statement itself, or when refused (ADR 0066).
        preValidation: async (req) => deps.rateLimiter.refuseKnownOver(LIMITS.agentToken, req.ip),
        // A malformed body is counted too: it reaches the handler, which counts, then refuses it.
        attachValidation: true,
      },
      async (req, reply) => {
        if (req.validationError) throw await countRefusedTokenRequest(deps, req.ip, req.validationError);
        reply.header('cache-control', 'no-store');
        return issueAgentToken(deps, agentKeys, req.body.client_assertion, req.ip);
      },
    );
  };
}
