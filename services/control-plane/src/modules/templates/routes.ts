import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  AllowlistTemplatesResponse,
  ErrorResponse,
  GuardTemplatesResponse,
  RuleTemplatesResponse,
  TemplateParams,
} from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { listAllowlistTemplates, listGuardTemplates, listRuleTemplates } from './service.js';

/** `/v1/templates/:provider{,/rules,/guards}`: allowlist templates, rule presets and guards. */
export function templateRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const read = { auth: 'user' as const, scope: 'api:read' as const };
    const byProvider = { tags: ['templates'], params: TemplateParams };

    r.get(
      '/v1/templates/:provider',
      {
        config: read,
        schema: { ...byProvider, response: { 200: AllowlistTemplatesResponse, 404: ErrorResponse } },
      },
      async (req) => listAllowlistTemplates(deps, req.params.provider),
    );
    r.get(
      '/v1/templates/:provider/rules',
      {
        config: read,
        schema: { ...byProvider, response: { 200: RuleTemplatesResponse, 404: ErrorResponse } },
      },
      async (req) => listRuleTemplates(deps, req.params.provider),
    );
    r.get(
      '/v1/templates/:provider/guards',
      {
        config: read,
        schema: { ...byProvider, response: { 200: GuardTemplatesResponse, 404: ErrorResponse } },
      },
      async (req) => listGuardTemplates(deps, req.params.provider),
    );
  };
}
