/**
 * Agent authentication on the data plane: `Authorization: Bearer vltt_…` looked up by its
 * SHA-256 in the pushed token cache. Nothing else is accepted here.
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
}

export function requireAgent(req: FastifyRequest): AgentPrincipal {
  if (!req.agent) throw Errors.unauthorized('agent token required');
  return req.agent;
}

export function installAgentAuth(app: FastifyInstance, deps: DataPlaneDeps): void {
  app.decorateRequest('agent', null);
  app.addHook('onRequest', async (req) => {
    const h = req.headers.authorization;
    const m = h ? /^Bearer\s+(vltt_[A-Za-z0-9_-]{20,200})$/.exec(h) : null;
    if (!m) throw Errors.unauthorized('agent token required');
    const tokenHash = createHash('sha256').update(m[1]!).digest('hex');
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
