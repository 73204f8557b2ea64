/**
 * Decides who is calling, for every control-plane route, by one explicit rule:
 *  - `Authorization: Bearer vltt_…` → agent access token (agent routes only);
 *  - `Authorization: Bearer <JWT>`   → API JWT (RS256, our issuer, audience `api`);
 *  - `X-API-Key: vltp_…`             → personal access token.
 * A credential presented where it does not belong is refused (401), never reinterpreted.
 * Each route declares `config.auth` (who may call) and `config.scope` (what it needs).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { hashToken } from '@vlt/crypto';
import { Errors } from '@vlt/service-kit';
import { scopesForRole, type Role, type Scope } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../deps.js';

export type Principal =
  | {
      kind: 'user';
      userId: string;
      workspaceId: string;
      roles: Role[];
      scopes: Scope[];
      via: 'jwt' | 'pat';
      sessionId: string | null;
      credentialId: string;
    }
  | {
      kind: 'agent';
      agentId: string;
      workspaceId: string;
      roles: ['agent'];
      scopes: Scope[];
      credentialId: string;
    };

export type RouteAuth = 'none' | 'user' | 'agent' | 'any';

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
    scope?: Scope;
    /** What an agent needs on an `any` route (agents' scopes differ from users'); default `scope`. */
    agentScope?: Scope;
    /**
     * Also accept the bearer token as the `access_token` query parameter (RFC 6750 §2.3), for
     * browsers' EventSource, which cannot send headers. Only routes that stream say so.
     */
    tokenInQuery?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

/** The actor string recorded in audit rows. */
export function actorOf(p: Principal): string {
  return p.kind === 'user' ? p.userId : `agent:${p.agentId}`;
}

export function requireUser(req: FastifyRequest): Extract<Principal, { kind: 'user' }> {
  const p = req.principal;
  if (!p || p.kind !== 'user') throw Errors.forbidden('this route is for workspace users');
  return p;
}

export function requireAgent(req: FastifyRequest): Extract<Principal, { kind: 'agent' }> {
  const p = req.principal;
  if (!p || p.kind !== 'agent') throw Errors.forbidden('this route needs an agent token');
  return p;
}

/** Whoever the route admitted (`auth: 'any'` routes: a user or an agent). */
export function requirePrincipal(req: FastifyRequest): Principal {
  if (!req.principal) throw Errors.unauthorized('authentication required');
  return req.principal;
}

function bearer(req: FastifyRequest): string | null {
  const h = req.headers.authorization;
  if (!h) {
    if (!req.routeOptions.config.tokenInQuery) return null;
    const q = (req.query as Record<string, unknown> | undefined)?.access_token;
    if (q === undefined) return null;
    if (typeof q !== 'string' || q.length === 0 || q.length > 4096) {
      throw Errors.unauthorized('malformed access_token parameter');
    }
    return q;
  }
  const m = /^Bearer\s+(\S+)$/i.exec(h);
  if (!m) throw Errors.unauthorized('malformed Authorization header');
  return m[1]!;
}

async function resolvePrincipal(deps: ControlPlaneDeps, req: FastifyRequest): Promise<Principal | null> {
  const token = bearer(req);
  const apiKey = req.headers['x-api-key'];
  if (token && apiKey) throw Errors.unauthorized('send one credential, not two');
  const now = deps.now();

  if (typeof apiKey === 'string') {
    if (!apiKey.startsWith('vltp_')) throw Errors.unauthorized('invalid API key');
    const pat = await deps.prisma.personalAccessToken.findUnique({ where: { tokenHash: hashToken(apiKey) } });
    if (!pat || pat.revokedAt || pat.expiresAt <= now)
      throw Errors.unauthorized('invalid or expired API key');
    const membership = await deps.prisma.membership.findUnique({
      where: { workspaceId_userId: { workspaceId: pat.workspaceId, userId: pat.userId } },
    });
    if (!membership) throw Errors.unauthorized('invalid API key');
    const roleScopes = scopesForRole(membership.role as Role);
    // A PAT never carries more than its owner's role allows today, whatever it was created with.
    const scopes = roleScopes.filter((s) => pat.scopes.includes(s));
    return {
      kind: 'user',
      userId: pat.userId,
      workspaceId: pat.workspaceId,
      roles: [membership.role as Role],
      scopes,
      via: 'pat',
      sessionId: null,
      credentialId: pat.id,
    };
  }

  if (!token) return null;

  if (token.startsWith('vltt_')) {
    const rec = await deps.prisma.agentAccessToken.findUnique({
      where: { tokenHash: hashToken(token) },
      include: { agent: { select: { status: true, workspaceId: true } } },
    });
    if (!rec || rec.expiresAt <= now || rec.agent.status !== 'active') {
      throw Errors.unauthorized('invalid or expired agent token');
    }
    return {
      kind: 'agent',
      agentId: rec.agentId,
      workspaceId: rec.agent.workspaceId,
      roles: ['agent'],
      scopes: scopesForRole('agent'),
      credentialId: rec.id,
    };
  }
  if (token.startsWith('vltp_') || token.startsWith('vltb_')) {
    throw Errors.unauthorized('this credential is not accepted as a bearer token');
  }

  let claims;
  try {
    claims = await deps.signingKeys.verify(token);
  } catch {
    throw Errors.unauthorized('invalid or expired token');
  }
  // Sign-out, session revocation and membership changes take effect before the JWT's
  // 5 minutes run out: the token never grants more than the member's role allows now.
  const [session, membership] = await Promise.all([
    deps.prisma.session.findUnique({ where: { id: claims.sid } }),
    deps.prisma.membership.findUnique({
      where: { workspaceId_userId: { workspaceId: claims.wid, userId: claims.sub } },
    }),
  ]);
  if (!session || session.revokedAt || session.userId !== claims.sub || session.expiresAt <= now) {
    throw Errors.unauthorized('session ended');
  }
  if (!membership) throw Errors.unauthorized('no longer a member of this workspace');
  const roleScopes = scopesForRole(membership.role as Role);
  return {
    kind: 'user',
    userId: claims.sub,
    workspaceId: claims.wid,
    roles: [membership.role as Role],
    scopes: (claims.scp as Scope[]).filter((s) => roleScopes.includes(s)),
    via: 'jwt',
    sessionId: claims.sid,
    credentialId: claims.jti,
  };
}

/** Registers the authentication hook on an encapsulated route tree. */
export function installAuthentication(app: FastifyInstance, deps: ControlPlaneDeps): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (req) => {
    const auth = req.routeOptions.config.auth ?? 'user';
    if (auth === 'none') return;
    const principal = await resolvePrincipal(deps, req);
    if (!principal) throw Errors.unauthorized('authentication required');
    if (auth === 'user' && principal.kind !== 'user')
      throw Errors.forbidden('agent tokens cannot call this route');
    if (auth === 'agent' && principal.kind !== 'agent')
      throw Errors.forbidden('this route needs an agent token');
    const config = req.routeOptions.config;
    const scope = principal.kind === 'agent' ? (config.agentScope ?? config.scope) : config.scope;
    if (scope && !principal.scopes.includes(scope)) throw Errors.forbidden(`missing scope ${scope}`);
    req.principal = principal;
  });
}

/**
 * For long-lived responses (the notification stream): does the credential that opened it still
 * stand? Sign-out, session or PAT revocation and removal from the workspace end the stream.
 */
export async function principalStillValid(deps: ControlPlaneDeps, p: Principal): Promise<boolean> {
  if (p.kind !== 'user') return false;
  const now = deps.now();
  const membership = await deps.prisma.membership.findUnique({
    where: { workspaceId_userId: { workspaceId: p.workspaceId, userId: p.userId } },
  });
  if (!membership) return false;
  if (p.via === 'pat') {
    const pat = await deps.prisma.personalAccessToken.findUnique({ where: { id: p.credentialId } });
    return !!pat && !pat.revokedAt && pat.expiresAt > now;
  }
  const session = p.sessionId ? await deps.prisma.session.findUnique({ where: { id: p.sessionId } }) : null;
  return !!session && !session.revokedAt && session.expiresAt > now;
}
