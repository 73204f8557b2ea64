import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import { CapabilitiesMeResponse, CapabilitiesServicesResponse, ErrorResponse } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireAgent, requirePrincipal } from '../../plugins/authenticate.js';
import { capabilitiesOfAgent, capabilityServices } from './service.js';

export function capabilityRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ['capabilities'];

    r.get(
      '/v1/capabilities/services',
      {
        config: { auth: 'any', scope: 'capabilities:read' },
        schema: {
          tags,
          response: { 200: CapabilitiesServicesResponse, 401: ErrorResponse, 403: ErrorResponse },
        },
      },
      async (req) => capabilityServices(deps, requirePrincipal(req).workspaceId),
    );

    r.get(
      '/v1/capabilities/me',
      {
        config: { auth: 'agent', scope: 'capabilities:read' },
        schema: { tags, response: { 200: CapabilitiesMeResponse, 401: ErrorResponse, 403: ErrorResponse } },
      },
      async (req) => capabilitiesOfAgent(deps, requireAgent(req)),
    );
  };
}
