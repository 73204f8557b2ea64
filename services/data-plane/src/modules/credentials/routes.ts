import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import { ErrorResponse, ResolveCredentialBody, ResolveCredentialResponse } from '@vlt/contracts';
import type { DataPlaneDeps } from '../../deps.js';
import { requireAgent } from '../../plugins/agent-auth.js';
import { resolveCredential } from './service.js';

export function credentialRoutes(deps: DataPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.post(
      '/v1/credentials/resolve',
      {
        schema: {
          tags: ['execution'],
          security: [{ bearer: [] }],
          body: ResolveCredentialBody,
          response: {
            200: ResolveCredentialResponse,
            400: ErrorResponse,
            401: ErrorResponse,
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            429: ErrorResponse,
            503: ErrorResponse,
          },
        },
      },
      async (req) => {
        const { auditId: _auditId, ...out } = await resolveCredential(deps, requireAgent(req), req.body);
        return out;
      },
    );
  };
}
