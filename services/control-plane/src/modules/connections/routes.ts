import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  ApiKeyConnectionBody,
  BotTokenConnectionBody,
  ConnectionListResponse,
  ConnectionSummary,
  CreateConnectionResponse,
  ErrorResponse,
  IdParams,
  IssueTrackerConnectionBody,
  OAuthCallbackQuery,
  StartConnectionBody,
  StartConnectionResponse,
  BotTokenConnectionResponse,
} from '@vlt/contracts';
import { z } from 'zod';
import type { ControlPlaneDeps } from '../../deps.js';
import { requirePrincipal, requireUser } from '../../plugins/authenticate.js';
import {
  createIssueTrackerConnection,
  listConnections,
  relabelConnection,
  revokeConnection,
} from './service.js';
import { completeConnection, reauthConnection, startConnection, type CallbackOutcome } from './oauth-flow.js';
import { createApiKeyConnection, createBotTokenConnection } from './secret-connections.js';
import { findLiveSession, SESSION_COOKIE } from '../auth/service.js';

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The end of the browser's round trip: a small page, no script, never a stack trace. */
function callbackPage(o: CallbackOutcome): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(o.title)}</title></head><body><main><h1>${escapeHtml(o.title)}</h1><p>${escapeHtml(o.detail)}</p></main></body></html>`;
}

export function connectionRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();

    r.get(
      '/v1/connections',
      {
        config: { auth: 'any', scope: 'api:read', agentScope: 'vault:execute' },
        schema: { tags: ['connections'], response: { 200: ConnectionListResponse } },
      },
      async (req) => {
        const p = requirePrincipal(req);
        return {
          connections: await listConnections(deps, p.workspaceId, p.kind === 'agent' ? p.agentId : undefined),
        };
      },
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
      '/v1/connections/start',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          body: StartConnectionBody,
          response: {
            200: StartConnectionResponse,
            400: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
          },
        },
      },
      async (req) => startConnection(deps, requireUser(req), req.body),
    );

    r.get(
      '/v1/connections/callback',
      {
        config: { auth: 'none' },
        schema: { tags: ['connections'], querystring: OAuthCallbackQuery },
      },
      async (req, reply) => {
        const session = await findLiveSession(deps, req.cookies[SESSION_COOKIE]);
        const outcome = await completeConnection(deps, req.query, session);
        return reply
          .status(outcome.status)
          .header('content-type', 'text/html; charset=utf-8')
          .header('cache-control', 'no-store')
          .header('referrer-policy', 'no-referrer')
          .header('content-security-policy', "default-src 'none'")
          .send(callbackPage(outcome));
      },
    );

    r.post(
      '/v1/connections/:id/reauth',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          params: IdParams,
          response: {
            200: StartConnectionResponse,
            400: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
          },
        },
      },
      async (req) => reauthConnection(deps, requireUser(req), req.params.id),
    );

    r.post(
      '/v1/connections/bot-token',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          body: BotTokenConnectionBody,
          response: { 201: BotTokenConnectionResponse, 400: ErrorResponse, 409: ErrorResponse },
        },
      },
      async (req, reply) =>
        reply.status(201).send(await createBotTokenConnection(deps, requireUser(req), req.body)),
    );

    r.post(
      '/v1/connections/api-key',
      {
        config: { auth: 'user', scope: 'api:write' },
        schema: {
          tags: ['connections'],
          body: ApiKeyConnectionBody,
          response: { 201: CreateConnectionResponse, 400: ErrorResponse, 409: ErrorResponse },
        },
      },
      async (req, reply) =>
        reply.status(201).send(await createApiKeyConnection(deps, requireUser(req), req.body)),
    );

    r.post(
      '/v1/connections/:id/revoke',
      {
        config: { auth: 'any', scope: 'api:write', agentScope: 'vault:execute' },
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
      async (req) => {
        const p = requirePrincipal(req);
        return revokeConnection(
          deps,
          p.kind === 'agent'
            ? { agentId: p.agentId, workspaceId: p.workspaceId }
            : { userId: p.userId, workspaceId: p.workspaceId },
          req.params.id,
        );
      },
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
