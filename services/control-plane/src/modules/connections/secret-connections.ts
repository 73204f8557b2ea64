/**
 * Connections made from a long-lived secret a user pastes in: a bot token (`chatbot_a`) or an
 * LLM API key. The secret is checked with one cheap provider call before anything is stored,
 * and never appears in an answer, a log line or an error message.
 */
import { providerSpec, serviceSpec, type ProviderId, type ServiceSpec } from '@vlt/contracts';
import { Errors } from '@vlt/service-kit';
import { UpstreamError, type UpstreamResponse } from '@vlt/upstream';
import type { ControlPlaneDeps } from '../../deps.js';
import { commitChange } from '../../infra/change.js';
import { insertConnection, summary } from './service.js';

type Actor = { userId: string; workspaceId: string };

/** The bot-token shape; it is inserted into a URL path, so nothing else may pass (ADR 0042). */
export const BOT_TOKEN = /^[0-9]{1,20}:[A-Za-z0-9_-]{20,200}$/;

function requireService(id: string, kind: ServiceSpec['authKind']): ServiceSpec {
  const s = serviceSpec(id);
  if (!s) throw Errors.badRequest(`unknown service ${id}`);
  if (s.authKind !== kind) {
    const how = {
      oauth: 'POST /v1/connections/start',
      bot_token: 'POST /v1/connections/bot-token',
      api_key: 'POST /v1/connections/api-key',
      issue_tracker: 'POST /v1/connections/issue-tracker',
    }[s.authKind];
    throw Errors.badRequest(`${id} is connected with ${how}`);
  }
  return s;
}

function apiUrl(deps: ControlPlaneDeps, provider: ProviderId): string {
  const url = deps.config.providers[provider].apiUrl;
  if (!url) throw Errors.badRequest(`${provider} has no API URL configured`);
  return url;
}

/** One provider call; every way it can fail is a 400 that names no secret. */
async function check(
  deps: ControlPlaneDeps,
  what: string,
  req: { url: URL; headers: Record<string, string> },
): Promise<UpstreamResponse> {
  let res: UpstreamResponse;
  try {
    res = await deps.upstream.request({ ...req, method: 'GET', maxResponseBytes: 256 * 1024 });
  } catch (err) {
    if (err instanceof UpstreamError)
      throw Errors.badRequest(`could not reach the provider to check the ${what}`);
    throw err;
  }
  if (res.status === 401 || res.status === 403 || res.status === 404) {
    throw Errors.badRequest(`the provider rejected this ${what}`);
  }
  if (res.status < 200 || res.status >= 300) {
    throw Errors.badRequest(`the provider answered ${res.status} when checking the ${what}`);
  }
  return res;
}

export async function createBotTokenConnection(
  deps: ControlPlaneDeps,
  actor: Actor,
  input: { service: string; botToken: string; label?: string | undefined },
) {
  const service = requireService(input.service, 'bot_token');
  if (!BOT_TOKEN.test(input.botToken))
    throw Errors.badRequest('botToken does not have the shape <digits>:<secret>');
  const base = apiUrl(deps, service.provider);
  const res = await check(deps, 'bot token', {
    url: new URL(`${base}/bot${input.botToken}/getMe`),
    headers: { accept: 'application/json' },
  });
  let me: { ok?: unknown; result?: { id?: unknown; username?: unknown; first_name?: unknown } };
  try {
    me = JSON.parse(res.body.toString('utf8')) as typeof me;
  } catch {
    throw Errors.badRequest('the provider did not answer with JSON');
  }
  const r = me.result;
  if (me.ok !== true || !r || typeof r.id !== 'number' || typeof r.username !== 'string') {
    throw Errors.badRequest('the provider did not confirm this bot token');
  }
  const botInfo = {
    id: r.id,
    username: r.username,
    firstName: typeof r.first_name === 'string' ? r.first_name : '',
  };
  const created = await commitChange(deps, (tx, emit) =>
    insertConnection(deps, tx, emit, actor, {
      service: service.id,
      label: input.label ?? `@${botInfo.username}`,
      grantedScopes: [],
      metadata: { apiUrl: base, botId: botInfo.id, botUsername: botInfo.username },
      credentials: { type: 'bot_token', token: input.botToken },
    }),
  );
  return {
    connection: {
      id: created.row.id,
      provider: created.row.provider,
      label: created.row.label,
      status: 'healthy' as const,
    },
    botInfo,
    message: `Connected @${botInfo.username}. Bind an agent with a policy to let it send messages.`,
    auditId: created.auditId,
  };
}

/** The cheapest authenticated call each LLM provider has: list its models. */
function keyCheck(
  provider: ProviderId,
  base: string,
  key: string,
): { url: URL; headers: Record<string, string> } {
  const injection = providerSpec(provider)!.injection;
  const headers: Record<string, string> = { accept: 'application/json' };
  if (injection.kind === 'header') headers[injection.header] = key;
  else headers.authorization = `Bearer ${key}`;
  if (provider === 'llm_a') headers['anthropic-version'] = '2023-06-01';
  const path = provider === 'llm_c' ? '/v1beta/models' : '/v1/models';
  return { url: new URL(`${base}${path}`), headers };
}

export async function createApiKeyConnection(
  deps: ControlPlaneDeps,
  actor: Actor,
  input: { service: string; apiKey: string; label?: string | undefined },
) {
  const service = requireService(input.service, 'api_key');
  if (!/^[\x21-\x7e]+$/.test(input.apiKey))
    throw Errors.badRequest('apiKey must be printable ASCII without spaces');
  const base = apiUrl(deps, service.provider);
  await check(deps, 'API key', keyCheck(service.provider, base, input.apiKey));
  const created = await commitChange(deps, (tx, emit) =>
    insertConnection(deps, tx, emit, actor, {
      service: service.id,
      label: input.label ?? service.name,
      grantedScopes: [],
      metadata: { apiUrl: base },
      credentials: { type: 'api_key', key: input.apiKey },
    }),
  );
  return { connection: summary(created.row), auditId: created.auditId };
}
