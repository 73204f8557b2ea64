/**
 * Agent authentication on the data plane: `Authorization: Bearer vltt_…` looked up by its
 * SHA-256 in the pushed token cache. Routes that official LLM SDKs call (`agentToken: 'sdk'`)
 * also take it where each SDK puts its key (`x-api-key`, `x-goog-api-key`); `'none'` routes
 * (the legacy LLM path's redirect) need no token. Nothing else is accepted here.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createHash } from 'node:crypto';
import { BusError } from '@vlt/bus';
import { Errors } from '@vlt/service-kit';
import type { DataPlaneDeps } from '../deps.js';

export interface AgentPrincipal {
  agentId: string;
  workspaceId: string;
  tokenHash: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    agent: AgentPrincipal | null;
  }
  interface FastifyContextConfig {
    /** Where the agent token may be: `bearer` (default), `sdk` (also SDK key headers), `none`. */
    agentToken?: 'bearer' | 'sdk' | 'none';
  }
}

const AGENT_TOKEN = /^vltt_[A-Za-z0-9_-]{20,200}$/;

/** The agent token from the places this route accepts it; null when absent or malformed. */
function presentedToken(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  const bearer = h ? /^Bearer\s+(\S+)$/.exec(h)?.[1] : undefined;
  if (bearer !== undefined) return AGENT_TOKEN.test(bearer) ? bearer : null;
  if (req.routeOptions.config?.agentToken !== 'sdk') return null;
  for (const name of ['x-api-key', 'x-goog-api-key'] as const) {
    const v = req.headers[name];
    if (typeof v === 'string') return AGENT_TOKEN.test(v.trim()) ? v.trim() : null;
  }
  return null;
}

export function requireAgent(req: FastifyRequest): AgentPrincipal {
  if (!req.agent) throw Errors.unauthorized('agent token required');
  return req.agent;
}

export function installAgentAuth(app: FastifyInstance, deps: DataPlaneDeps): void {
  app.decorateRequest('agent', null);
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.agentToken === 'none') return;
    const token = presentedToken(req);
    if (!token) throw Errors.unauthorized('agent token required');
    const tokenHash = createHash('sha256').update(token).digest('hex');
    let record;
    try {
      record = await deps.caches.agentToken(tokenHash);
    } catch (err) {
      // Cannot confirm the token: refuse rather than guess (fail closed).
      if (err instanceof BusError) throw Errors.unavailable('cannot verify the agent token right now');
      throw err;
    }
    if (!record || record.expiresAt <= deps.now().getTime())
      throw Errors.unauthorized('invalid or expired agent token');
    req.agent = { agentId: record.agentId, workspaceId: record.workspaceId, tokenHash };
  });
}
