import { setImmediate as setImmediatePromise } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  ApprovalRequiredResponse,
  ErrorResponse,
  ExecuteBody,
  ExecuteResponse,
  PermissionToActBody,
  PermissionToActResponse,
} from '@vlt/contracts';
import type { DataPlaneDeps } from '../../deps.js';
import { requireAgent } from '../../plugins/agent-auth.js';
import { agentGoneSignal } from './agent-gone.js';
import { envelopeJson, RawJsonBody } from './respond.js';
import { executeModelB } from './service.js';
import { vendToken } from './vend.js';

/** Envelopes from this size on are decided in a later turn of the event loop than they were parsed in. */
const LARGE_BODY_BYTES = 256 * 1024;

export function executeRoutes(deps: DataPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.post(
      '/v1/vault/execute',
      {
        schema: {
          tags: ['execution'],
          security: [{ bearer: [] }],
          body: ExecuteBody,
          response: {
            200: ExecuteResponse,
            202: ApprovalRequiredResponse,
            400: ErrorResponse,
            401: ErrorResponse,
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            429: ErrorResponse,
            502: ErrorResponse,
            503: ErrorResponse,
          },
        },
      },
      async (req, reply) => {
        const agent = requireAgent(req);
        if (req.body.model === 'A') return vendToken(deps, agent, req.body);
        // Parsing a large envelope was one long step; deciding on it is the next. Let other
        // requests (and health checks) run in between instead of stalling for both at once.
        if (Number(req.headers['content-length'] ?? 0) >= LARGE_BODY_BYTES) await setImmediatePromise();
        const out = await executeModelB(deps, agent, req.body, { agentGone: agentGoneSignal(reply) });
        if ('approvalRequired' in out) return reply.status(202).send(out);
        // Streams bypass the response schema: Fastify sends them as they are.
        if ('streamed' in out)
          return (reply as FastifyReply).status(out.status).headers(out.headers).send(out.body);
        if (out.body instanceof RawJsonBody) {
          // Serialised in the response-filter pool: written as it is, not serialised again.
          return (reply as FastifyReply)
            .type('application/json; charset=utf-8')
            .serializer((text: string) => text)
            .send(envelopeJson({ ...out, body: out.body }));
        }
        return out;
      },
    );

    r.post(
      '/v1/vault/permission-requests',
      {
        schema: {
          tags: ['execution'],
          security: [{ bearer: [] }],
          description:
            'Files a request for a human decision before the agent acts: checked like a Model B ' +
            'call (allowlist, SSRF, rules, rate limit), filed for approval even where the policy ' +
            'would allow it, never sent. Run it later with `approvalId` once approved.',
          body: PermissionToActBody,
          response: {
            201: PermissionToActResponse,
            400: ErrorResponse,
            401: ErrorResponse,
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            413: ErrorResponse,
            429: ErrorResponse,
            503: ErrorResponse,
          },
        },
      },
      async (req, reply) => {
        const agent = requireAgent(req);
        const { actionDescription, ...call } = req.body;
        const out = await executeModelB(
          deps,
          agent,
          { ...call, model: 'B' },
          { permissionRequest: { actionDescription } },
        );
        if (!('approvalRequired' in out)) throw new Error('a permission request returned an execution');
        return reply.status(201).send({
          approvalRequestId: out.approvalRequestId,
          expiresAt: out.expiresAt,
          auditId: out.auditId,
        });
      },
    );
  };
}
