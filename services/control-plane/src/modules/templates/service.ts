/**
 * Policy templates (`/v1/templates/:provider…`): plain data built by @vlt/contracts, with the
 * allowlists on the API URL this deployment configured for the provider (`VLT_<P>_API_URL`,
 * else the real provider's). Nothing here is workspace data, so nothing is read from the
 * database; any signed-in user with `api:read` may look.
 */
import {
  PROVIDERS,
  TEMPLATE_PROVIDERS,
  allowlistTemplates,
  guardTemplates,
  isTemplateProvider,
  ruleTemplates,
  type AllowlistTemplatesResponse,
  type GuardTemplatesResponse,
  type RuleTemplatesResponse,
  type TemplateProvider,
} from '@vlt/contracts';
import { Errors } from '@vlt/service-kit';
import type { ControlPlaneDeps } from '../../deps.js';

function target(deps: ControlPlaneDeps, provider: string): { provider: TemplateProvider; apiUrl: string } {
  // The message does not echo the path parameter.
  if (!isTemplateProvider(provider)) {
    throw Errors.notFound(`no templates for this provider; providers: ${TEMPLATE_PROVIDERS.join(', ')}`);
  }
  const apiUrl = deps.config.providers[provider].apiUrl ?? PROVIDERS[provider].defaults?.apiUrl;
  if (!apiUrl) throw new Error(`provider ${provider} has no API URL`);
  return { provider, apiUrl: apiUrl.replace(/\/+$/, '') };
}

export function listAllowlistTemplates(deps: ControlPlaneDeps, provider: string): AllowlistTemplatesResponse {
  const t = target(deps, provider);
  return { provider: t.provider, apiUrl: t.apiUrl, templates: allowlistTemplates(t.provider, t.apiUrl) };
}

export function listRuleTemplates(deps: ControlPlaneDeps, provider: string): RuleTemplatesResponse {
  const t = target(deps, provider);
  return { provider: t.provider, ...ruleTemplates(t.provider, t.apiUrl) };
}

export function listGuardTemplates(deps: ControlPlaneDeps, provider: string): GuardTemplatesResponse {
  const t = target(deps, provider);
  return { provider: t.provider, guards: guardTemplates(t.provider, t.apiUrl) };
}
