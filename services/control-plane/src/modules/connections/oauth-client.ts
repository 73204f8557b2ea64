/**
 * The OAuth 2.0 client side, over `oauth4webapi` (no hand-written protocol code): which app a
 * workspace uses for a provider, the authorization URL, the code exchange, refresh and RFC 7009
 * revocation. HTTP goes through the control plane's upstream client, so provider endpoints get
 * the same SSRF checks, deadlines and size limits as everything else the gateway calls.
 */
import * as oauth from 'oauth4webapi';
import { openJson } from '@vlt/crypto';
import { PROVIDERS, type ProviderId } from '@vlt/contracts';
import { Errors } from '@vlt/service-kit';
import type { ControlPlaneDeps } from '../../deps.js';

export interface OAuthApp {
  clientId: string;
  clientSecret: string;
  source: 'workspace' | 'deployment';
}

export interface OAuthEndpoints {
  as: oauth.AuthorizationServer;
  authorizeUrl: string;
}

export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  expiresAt: number | null;
  scopes: string[] | null;
}

/** Failure of a token-endpoint call, classified for the caller. */
export class OAuthGrantError extends Error {
  constructor(
    readonly kind: 'invalid_grant' | 'refused' | 'unreachable',
    message: string,
  ) {
    super(message);
  }
}

export const workspaceAppAad = (workspaceId: string, provider: string) =>
  `oauth-app:${workspaceId}:${provider}`;

/** The workspace's own app for `provider`, else the deployment's, else none. */
export async function oauthAppFor(
  deps: ControlPlaneDeps,
  workspaceId: string,
  provider: ProviderId,
): Promise<OAuthApp | null> {
  const own = await deps.prisma.workspaceOAuthApp.findUnique({
    where: { workspaceId_provider: { workspaceId, provider } },
  });
  if (own) {
    const clientSecret = openJson<string>(
      deps.keyring,
      own.clientSecret as never,
      workspaceAppAad(workspaceId, provider),
    );
    return { clientId: own.clientId, clientSecret, source: 'workspace' };
  }
  const p = deps.config.providers[provider];
  if (p.clientId && p.clientSecret)
    return { clientId: p.clientId, clientSecret: p.clientSecret, source: 'deployment' };
  return null;
}

export function oauthEndpoints(deps: ControlPlaneDeps, provider: ProviderId): OAuthEndpoints {
  const p = deps.config.providers[provider];
  if (PROVIDERS[provider].authKind !== 'oauth' || !p.authorizeUrl || !p.tokenUrl) {
    throw Errors.badRequest(`${provider} is not connected with OAuth`);
  }
  return {
    authorizeUrl: p.authorizeUrl,
    as: {
      issuer: new URL(p.tokenUrl).origin,
      authorization_endpoint: p.authorizeUrl,
      token_endpoint: p.tokenUrl,
      ...(p.revokeUrl && { revocation_endpoint: p.revokeUrl }),
    },
  };
}

const TOKEN_RESPONSE_LIMIT = 64 * 1024;
/** Revoking at the provider must not hold up revoking in the vault. */
const REVOKE_TIMEOUT_MS = 5_000;

/** `oauth4webapi`'s fetch, answered by the SSRF-guarded upstream client. */
function upstreamFetch(
  deps: ControlPlaneDeps,
): (url: string, options: oauth.CustomFetchOptions<'POST', URLSearchParams>) => Promise<Response> {
  return async (url, options) => {
    const headers: Record<string, string> = {};
    new Headers(options.headers).forEach((v, k) => (headers[k] = v));
    const body = options.body === undefined || options.body === null ? undefined : String(options.body);
    const res = await deps.upstream.request({
      url: new URL(url),
      method: options.method as 'POST',
      headers,
      ...(body !== undefined && { body }),
      maxResponseBytes: TOKEN_RESPONSE_LIMIT,
    });
    return new Response(res.status === 204 || res.status === 304 ? null : new Uint8Array(res.body), {
      status: res.status,
      headers: res.headers,
    });
  };
}

function requestOptions(deps: ControlPlaneDeps) {
  // Deadlines are the upstream client's (VLT_UPSTREAM_* settings of this process).
  return { [oauth.customFetch]: upstreamFetch(deps) };
}

function tokenSet(
  deps: ControlPlaneDeps,
  r: oauth.TokenEndpointResponse,
  previousRefresh: string | null,
): TokenSet {
  const expiresIn = typeof r.expires_in === 'number' && r.expires_in > 0 ? r.expires_in : null;
  return {
    accessToken: r.access_token,
    // Providers that do not rotate refresh tokens answer without one: keep the old.
    refreshToken: typeof r.refresh_token === 'string' ? r.refresh_token : previousRefresh,
    expiresAt: expiresIn === null ? null : deps.now().getTime() + expiresIn * 1000,
    scopes: typeof r.scope === 'string' ? r.scope.split(/[\s,]+/).filter(Boolean) : null,
  };
}

function grantError(err: unknown): OAuthGrantError {
  if (err instanceof oauth.ResponseBodyError) {
    return err.error === 'invalid_grant'
      ? new OAuthGrantError('invalid_grant', 'the provider no longer accepts this grant')
      : new OAuthGrantError('refused', `the provider refused the request (${err.error})`);
  }
  if (err instanceof oauth.WWWAuthenticateChallengeError) {
    return new OAuthGrantError('refused', 'the provider refused the client credentials');
  }
  if (err instanceof oauth.OperationProcessingError || err instanceof TypeError) {
    return new OAuthGrantError('refused', 'the provider answered with an invalid token response');
  }
  return new OAuthGrantError('unreachable', 'the provider could not be reached');
}

/** Exchanges an authorization code, once, with the flow's verifier and exact redirect URI. */
export async function exchangeCode(
  deps: ControlPlaneDeps,
  endpoints: OAuthEndpoints,
  app: OAuthApp,
  callback: { params: URLSearchParams; state: string; redirectUri: string; codeVerifier: string },
): Promise<TokenSet> {
  const client: oauth.Client = { client_id: app.clientId };
  let params: URLSearchParams;
  try {
    params = oauth.validateAuthResponse(endpoints.as, client, callback.params, callback.state);
  } catch (err) {
    if (err instanceof oauth.AuthorizationResponseError) {
      throw new OAuthGrantError('refused', `the provider answered ${err.error}`);
    }
    throw new OAuthGrantError('refused', 'the provider sent an invalid authorization response');
  }
  try {
    const res = await oauth.authorizationCodeGrantRequest(
      endpoints.as,
      client,
      oauth.ClientSecretPost(app.clientSecret),
      params,
      callback.redirectUri,
      callback.codeVerifier,
      requestOptions(deps),
    );
    return tokenSet(deps, await oauth.processAuthorizationCodeResponse(endpoints.as, client, res), null);
  } catch (err) {
    throw grantError(err);
  }
}

export async function refreshTokens(
  deps: ControlPlaneDeps,
  endpoints: OAuthEndpoints,
  app: OAuthApp,
  refreshToken: string,
): Promise<TokenSet> {
  const client: oauth.Client = { client_id: app.clientId };
  try {
    const res = await oauth.refreshTokenGrantRequest(
      endpoints.as,
      client,
      oauth.ClientSecretPost(app.clientSecret),
      refreshToken,
      requestOptions(deps),
    );
    return tokenSet(deps, await oauth.processRefreshTokenResponse(endpoints.as, client, res), refreshToken);
  } catch (err) {
    throw grantError(err);
  }
}

/** RFC 7009, best effort: true when the provider confirmed. */
export async function revokeAtProvider(
  deps: ControlPlaneDeps,
  endpoints: OAuthEndpoints,
  app: OAuthApp,
  token: string,
  hint: 'refresh_token' | 'access_token',
): Promise<boolean> {
  if (!endpoints.as.revocation_endpoint) return false;
  const client: oauth.Client = { client_id: app.clientId };
  const attempt = async () => {
    const res = await oauth.revocationRequest(
      endpoints.as,
      client,
      oauth.ClientSecretPost(app.clientSecret),
      token,
      {
        ...requestOptions(deps),
        additionalParameters: { token_type_hint: hint },
      },
    );
    await oauth.processRevocationResponse(res);
    return true;
  };
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), REVOKE_TIMEOUT_MS);
  });
  try {
    return await Promise.race([attempt(), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
