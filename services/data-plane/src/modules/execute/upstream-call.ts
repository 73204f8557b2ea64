/**
 * Calling the provider for an allowed request: fetch the connection's credentials, inject them
 * into exactly what the policy engine judged, and turn every upstream failure into one typed
 * error. Reused by every brokered path (Model B, the LLM proxy).
 */
import type { CredentialsResponse } from '@vlt/contracts';
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
  const auditId = recorder.terminal('execution_denied', { reason: creds.code });
  if (creds.code === 'revoked') throw Errors.connectionRevoked(undefined, { auditId });
  if (creds.code === 'needs_reauth') throw Errors.connectionNeedsReauth(undefined, { auditId });
  throw Errors.policyDenied('no policy allows this agent to use this connection', { auditId });
}

/**
 * The provider request: the policy engine's canonical target, headers and body, plus the
 * credential. `secrets` are the injected values the upstream client scrubs from the answer.
 */
export function buildUpstreamRequest(
  target: ExecutionTarget,
  credentials: Credentials,
  o: { bodyIsAgentText: boolean },
): Omit<UpstreamRequest, 'maxResponseBytes'> & { secrets: string[] } {
  const headers: Record<string, string> = { ...target.headers };
  if (target.body !== undefined && !o.bodyIsAgentText && !('content-type' in headers)) {
    headers['content-type'] = 'application/json';
  }
  const c = credentials;
  headers.authorization =
    c.type === 'basic'
      ? `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`
      : `Bearer ${c.token}`;
  headers.accept ??= 'application/json';
  // A Basic header is base64 of user:password; the scrubber finds that inside any base64 text.
  const secrets = c.type === 'basic' ? [`${c.username}:${c.password}`, c.password] : [c.token];
  return { url: new URL(target.href), method: target.method, headers, body: target.body, secrets };
}

/** Records a failed provider call and returns the typed error the agent gets. */
export function upstreamFailure(err: unknown, recorder: CallRecorder): AppError {
  const failure =
    err instanceof UpstreamError ? err : new UpstreamError('unavailable', 'provider request failed');
  return upstreamAppError(failure, { auditId: recorder.failed(failure.kind) });
}
