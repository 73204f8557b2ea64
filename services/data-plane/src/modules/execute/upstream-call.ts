/**
 * Calling the provider for an allowed request: fetch the connection's credentials, inject them
 * into exactly what the policy engine judged, and turn every upstream failure into one typed
 * error. Reused by every brokered path (Model B, the LLM proxy).
 */
import { providerSpec, type ConnectionDescriptor, type CredentialsResponse } from '@vlt/contracts';
import type { ExecutionTarget } from '@vlt/policy-engine';
import type { AppError } from '@vlt/service-kit';
import { Errors, upstreamAppError } from '@vlt/service-kit';
import { UpstreamError, type UpstreamRequest } from '@vlt/upstream';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import type { CallRecorder } from './recorder.js';

type Credentials = Extract<CredentialsResponse, { ok: true }>['credentials'];

/** The connection's credentials, or the recorded refusal when there are none to use. */
export async function credentialsFor(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  connectionId: string,
  recorder: CallRecorder,
): Promise<Credentials> {
  let creds: CredentialsResponse;
  try {
    creds = await deps.credentials.get({
      workspaceId: agent.workspaceId,
      agentId: agent.agentId,
      connectionId,
    });
  } catch {
    recorder.failed('credentials unavailable');
    throw Errors.unavailable('credentials are unavailable right now');
  }
  if (creds.ok) return creds.credentials;
  if (creds.code === 'unavailable') {
    const auditId = recorder.failed('token refresh unavailable');
    throw Errors.unavailable('the provider token cannot be refreshed right now', { auditId });
  }
  const auditId = recorder.terminal('execution_denied', { reason: creds.code });
  if (creds.code === 'revoked') throw Errors.connectionRevoked(undefined, { auditId });
  if (creds.code === 'needs_reauth') {
    // The control plane just learned it (invalid_grant): do not wait for the pushed descriptor.
    deps.credentials.invalidate(connectionId);
    throw Errors.connectionNeedsReauth(undefined, { auditId });
  }

  throw Errors.policyDenied('no policy allows this agent to use this connection', { auditId });
}

/**
 * The provider request: the policy engine's canonical target, headers and body, plus the
 * credential, placed where the provider's catalog entry says (ADR 0042). `secrets` are the
 * injected values the upstream client scrubs from the answer.
 */
export function buildUpstreamRequest(
  target: ExecutionTarget,
  credentials: Credentials,
  connection: Pick<ConnectionDescriptor, 'provider' | 'baseUrl'>,
  o: { bodyIsAgentText: boolean },
): Omit<UpstreamRequest, 'maxResponseBytes'> & { secrets: string[] } {
  const headers: Record<string, string> = { ...target.headers };
  if (target.body !== undefined && !o.bodyIsAgentText && !('content-type' in headers)) {
    headers['content-type'] = 'application/json';
  }
  headers.accept ??= 'application/json';
  const url = new URL(target.href);
  const c = credentials;
  // Agent-supplied key headers are never forwarded, whichever header this provider reads.
  delete headers['x-api-key'];
  delete headers['x-goog-api-key'];
  switch (c.type) {
    case 'basic':
      headers.authorization = `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
      // A Basic header is base64 of user:password; the scrubber finds that inside any base64 text.
      return {
        url,
        method: target.method,
        headers,
        body: target.body,
        secrets: [`${c.username}:${c.password}`, c.password],
      };
    case 'bearer':
      headers.authorization = `Bearer ${c.token}`;
      break;
    case 'api_key': {
      const injection = providerSpec(connection.provider)?.injection;
      if (injection?.kind === 'header') headers[injection.header] = c.key;
      else headers.authorization = `Bearer ${c.key}`;
      return { url, method: target.method, headers, body: target.body, secrets: [c.key] };
    }
    case 'bot_token':
      return {
        url: botMethodUrl(url, connection.baseUrl, c.token),
        method: target.method,
        headers,
        body: target.body,
        secrets: [c.token],
      };
  }
  return { url, method: target.method, headers, body: target.body, secrets: [c.token] };
}

/**
 * `chatbot_a` takes its token in the path: the agent addresses `<API URL>/<method>` and the
 * provider gets `<API URL>/bot<token>/<method>`. The token's shape was checked when it was
 * stored, so it cannot add segments; a target outside the API URL never gets it.
 */
function botMethodUrl(target: URL, baseUrl: string | null, token: string): URL {
  if (!/^[0-9]{1,20}:[A-Za-z0-9_-]{20,200}$/.test(token))
    throw new Error('stored bot token has an unexpected shape');
  const base = new URL(baseUrl ?? target.origin);
  const basePath = base.pathname.replace(/\/+$/, '');
  if (target.origin !== base.origin || !target.pathname.startsWith(`${basePath}/`)) {
    throw Errors.policyDenied('url is outside the provider API');
  }
  const out = new URL(target.href);
  out.pathname = `${basePath}/bot${token}${target.pathname.slice(basePath.length)}`;
  return out;
}

/** Records a failed provider call and returns the typed error the agent gets. */
export function upstreamFailure(err: unknown, recorder: CallRecorder): AppError {
  const failure =
    err instanceof UpstreamError ? err : new UpstreamError('unavailable', 'provider request failed');
  return upstreamAppError(failure, { auditId: recorder.failed(failure.kind) });
}
