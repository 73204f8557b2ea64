/**
 * OAuth 2.0 authorization code with PKCE (S256) for connecting a provider (ADR 0042, RFC 9700):
 * `start` and `reauth` store a pending flow and answer the authorization URL; the callback
 * consumes the flow exactly once, exchanges the code once, and creates (or, for a reauth,
 * refreshes) the connection — or stores nothing at all.
 */
import { createHash, randomUUID } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import { openJson, sealJson } from '@vlt/crypto';
import { PROVIDERS, serviceSpec, type ProviderId, type ServiceSpec } from '@vlt/contracts';
import { AppError, Errors } from '@vlt/service-kit';
import type { Prisma } from '@vlt/db';
import type { ControlPlaneDeps } from '../../deps.js';
import { auditEvent, audited, commitChange } from '../../infra/change.js';
import { kvPut } from '../../infra/outbox.js';
import { connectionDescriptor } from './descriptor.js';
import { exchangeCode, OAuthGrantError, oauthAppFor, oauthEndpoints } from './oauth-client.js';
import { insertConnection } from './service.js';
import { sealCredentials } from './stored-credentials.js';

type Actor = { userId: string; workspaceId: string };

/** How long a started flow may be completed (RFC 9700: short-lived, single use). */
export const OAUTH_FLOW_TTL_MS = 15 * 60 * 1000;

const stateHash = (state: string) => createHash('sha256').update(state).digest('hex');
const verifierAad = (pendingId: string) => `oauth-verifier:${pendingId}`;

export function redirectUri(deps: ControlPlaneDeps): string {
  return `${deps.config.publicBaseUrl}/v1/connections/callback`;
}

function oauthService(id: string): ServiceSpec {
  const s = serviceSpec(id);
  if (!s) throw Errors.badRequest(`unknown service ${id}`);
  if (s.authKind !== 'oauth') throw Errors.badRequest(`${id} is not connected with OAuth`);
  return s;
}

async function beginFlow(
  deps: ControlPlaneDeps,
  actor: Actor,
  service: ServiceSpec,
  flow: {
    scopes: string[];
    label?: string | undefined;
    agentId?: string | undefined;
    allowedModels?: string[] | undefined;
    reauthConnectionId?: string;
  },
) {
  const provider = service.provider;
  const endpoints = oauthEndpoints(deps, provider);
  const app = await oauthAppFor(deps, actor.workspaceId, provider);
  if (!app) {
    throw Errors.badRequest(
      `no OAuth app is configured for ${provider}: add one with POST /v1/workspace-oauth-apps`,
    );
  }
  const id = randomUUID();
  const state = oauth.generateRandomState();
  const verifier = oauth.generateRandomCodeVerifier();
  const challenge = await oauth.calculatePKCECodeChallenge(verifier);
  const redirect = redirectUri(deps);
  await deps.prisma.pendingConnection.create({
    data: {
      id,
      workspaceId: actor.workspaceId,
      userId: actor.userId,
      provider,
      service: service.id,
      scopes: flow.scopes,
      label: flow.label ?? null,
      agentId: flow.agentId ?? null,
      allowedModels: flow.allowedModels ?? ['B'],
      stateHash: stateHash(state),
      codeVerifier: sealJson(deps.keyring, verifier, verifierAad(id)) as unknown as Prisma.InputJsonValue,
      redirectUri: redirect,
      reauthConnectionId: flow.reauthConnectionId ?? null,
      expiresAt: new Date(deps.now().getTime() + OAUTH_FLOW_TTL_MS),
    },
  });
  const url = new URL(endpoints.authorizeUrl);
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: app.clientId,
    redirect_uri: redirect,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    ...(flow.scopes.length > 0 && { scope: flow.scopes.join(' ') }),
    ...providerParams(provider),
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return { pendingConnectionId: id, authorizationUrl: url.toString() };
}

function providerParams(provider: ProviderId): Record<string, string> {
  return PROVIDERS[provider].authorizeParams ?? {};
}

export async function startConnection(
  deps: ControlPlaneDeps,
  actor: Actor,
  input: {
    service: string;
    scopes: string[];
    label?: string | undefined;
    agentId?: string | undefined;
    allowedModels?: ('A' | 'B')[] | undefined;
  },
) {
  const service = oauthService(input.service);
  if (input.agentId) {
    const agent = await deps.prisma.agent.findFirst({
      where: { id: input.agentId, workspaceId: actor.workspaceId },
      select: { id: true },
    });
    if (!agent) throw Errors.notFound('agent not found');
  }
  if (service.singleton) {
    const live = await deps.prisma.connection.findFirst({
      where: { workspaceId: actor.workspaceId, service: service.id, status: { not: 'revoked' } },
      select: { id: true },
    });
    if (live) throw Errors.connectionExists();
  }
  const scopes = [...new Set(input.scopes.length > 0 ? input.scopes : service.defaultScopes)];
  return beginFlow(deps, actor, service, {
    scopes,
    label: input.label,
    agentId: input.agentId,
    allowedModels: input.allowedModels ? [...new Set(input.allowedModels)] : ['B'],
  });
}

/** A new flow for a connection the provider stopped honouring; its id and policies stay. */
export async function reauthConnection(deps: ControlPlaneDeps, actor: Actor, connectionId: string) {
  const c = await deps.prisma.connection.findFirst({
    where: { id: connectionId, workspaceId: actor.workspaceId },
  });
  if (!c) throw Errors.notFound('connection not found');
  const service = serviceSpec(c.service);
  if (!service || service.authKind !== 'oauth') {
    throw Errors.badRequest(`${c.service} connections cannot be reauthorised: revoke and create a new one`);
  }
  if (c.status === 'revoked') throw Errors.connectionRevoked();
  if (c.status !== 'needs_reauth') throw Errors.connectionNotReauthable();
  return beginFlow(deps, actor, service, {
    scopes: c.grantedScopes.length > 0 ? c.grantedScopes : [...service.defaultScopes],
    reauthConnectionId: c.id,
  });
}

/** What the browser is shown at the end of the flow. */
export interface CallbackOutcome {
  status: 200 | 400;
  title: string;
  detail: string;
}

const refused = (detail: string): CallbackOutcome => ({
  status: 400,
  title: 'Connection not completed',
  detail,
});

/**
 * The provider's redirect. The flow is consumed before anything else happens, so a state can
 * be used once whatever the outcome; a failure stores nothing.
 */
export async function completeConnection(
  deps: ControlPlaneDeps,
  query: { state?: string | undefined; code?: string | undefined; error?: string | undefined },
  session: { userId: string } | null,
): Promise<CallbackOutcome> {
  if (!query.state) return refused('The sign-in link is missing its state. Start the connection again.');
  const now = deps.now();
  const pending = await deps.prisma.pendingConnection.findUnique({
    where: { stateHash: stateHash(query.state) },
  });
  if (!pending || pending.consumedAt || pending.expiresAt <= now) {
    return refused('This sign-in link is invalid, expired or already used. Start the connection again.');
  }
  // A browser signed in as someone else must not complete another user's flow.
  if (session && session.userId !== pending.userId) {
    return refused('This connection was started by another user. Sign in as that user or start again.');
  }
  const consumed = await deps.prisma.pendingConnection.updateMany({
    where: { id: pending.id, consumedAt: null, expiresAt: { gt: now } },
    data: { consumedAt: now },
  });
  if (consumed.count !== 1) {
    return refused('This sign-in link is invalid, expired or already used. Start the connection again.');
  }
  if (query.error !== undefined) {
    const reason = /^[a-z_]{1,64}$/.test(query.error) ? query.error : 'an error';
    return refused(`The provider answered ${reason}; nothing was connected.`);
  }
  if (!query.code) return refused('The provider sent no authorization code; nothing was connected.');

  const provider = pending.provider as ProviderId;
  const app = await oauthAppFor(deps, pending.workspaceId, provider);
  if (!app) return refused('The OAuth app for this provider was removed; nothing was connected.');
  let tokens;
  try {
    tokens = await exchangeCode(deps, oauthEndpoints(deps, provider), app, {
      params: new URLSearchParams({ code: query.code, state: query.state }),
      state: query.state,
      redirectUri: pending.redirectUri,
      codeVerifier: openJson<string>(deps.keyring, pending.codeVerifier as never, verifierAad(pending.id)),
    });
  } catch (err) {
    if (err instanceof OAuthGrantError) return refused(`${err.message}; nothing was connected.`);
    throw err;
  }
  const actor = { userId: pending.userId, workspaceId: pending.workspaceId };
  const credentials = {
    type: 'oauth' as const,
    accessToken: tokens.accessToken,
    refreshToken: tokens.refreshToken,
    expiresAt: tokens.expiresAt,
  };
  const grantedScopes = tokens.scopes ?? pending.scopes;
  try {
    if (pending.reauthConnectionId) {
      await finishReauth(deps, actor, pending.reauthConnectionId, credentials, grantedScopes);
      return { status: 200, title: 'Connection restored', detail: 'You can close this window.' };
    }
    const service = serviceSpec(pending.service)!;
    const agentStillThere =
      pending.agentId &&
      (await deps.prisma.agent.findFirst({
        where: { id: pending.agentId, workspaceId: pending.workspaceId },
      }));
    await commitChange(deps, (tx, emit) =>
      insertConnection(deps, tx, emit, actor, {
        service: service.id,
        label: pending.label ?? service.name,
        grantedScopes,
        metadata: { apiUrl: deps.config.providers[provider].apiUrl ?? null },
        credentials,
        bind: agentStillThere
          ? { agentId: pending.agentId!, allowedModels: pending.allowedModels }
          : undefined,
      }),
    );
  } catch (err) {
    if (err instanceof AppError && err.statusCode < 500)
      return refused(`${err.message}; nothing was connected.`);
    throw err;
  }
  return { status: 200, title: 'Connected', detail: 'The connection is ready. You can close this window.' };
}

async function finishReauth(
  deps: ControlPlaneDeps,
  actor: Actor,
  connectionId: string,
  credentials: { type: 'oauth'; accessToken: string; refreshToken: string | null; expiresAt: number | null },
  grantedScopes: string[],
) {
  const event = auditEvent(deps, {
    action: 'connection_reauthorized',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: null,
    connectionId,
    decision: 'info',
    metadata: { scopes: grantedScopes },
  });
  await commitChange(deps, async (tx, emit) => {
    const moved = await tx.connection.updateMany({
      where: { id: connectionId, status: 'needs_reauth' },
      data: {
        status: 'healthy',
        credentials: sealCredentials(deps.keyring, connectionId, credentials),
        credentialsVersion: { increment: 1 },
        refreshLeaseUntil: null,
        grantedScopes,
      },
    });
    if (moved.count !== 1)
      throw Errors.connectionNotReauthable('the connection was revoked or reauthorised meanwhile');
    const row = await tx.connection.findUniqueOrThrow({ where: { id: connectionId } });
    emit(kvPut(deps.names.buckets.connections, connectionId, connectionDescriptor(row)), audited(event));
  });
}

/** Flows are kept an hour past their end (for support questions), then deleted with their verifier. */
export async function purgeSpentOAuthFlows(deps: ControlPlaneDeps): Promise<number> {
  const before = new Date(deps.now().getTime() - 60 * 60 * 1000);
  const r = await deps.prisma.pendingConnection.deleteMany({
    where: { OR: [{ expiresAt: { lt: before } }, { consumedAt: { lt: before } }] },
  });
  return r.count;
}
