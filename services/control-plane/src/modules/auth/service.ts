import { randomBytes } from 'node:crypto';
import { hashPassword, hashToken, verifyPassword } from '@vlt/crypto';
import { Errors } from '@vlt/service-kit';
import { scopesForRole, type Role, type Scope } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { LIMITS } from '../../infra/rate-limiter.js';

export const SESSION_COOKIE = 'vlt_session';
export const SESSION_TTL_SECONDS = 7 * 24 * 3600;

function newSessionToken(): string {
  return randomBytes(32).toString('base64url');
}

// Compared against when the account does not exist, so both paths cost one scrypt.
let dummyHash: Promise<string> | undefined;

function userView(u: {
  id: string;
  email: string;
  name: string | null;
  platformRole: string;
  createdAt: Date;
}) {
  return {
    id: u.id,
    email: u.email,
    name: u.name,
    platformRole: u.platformRole as 'user' | 'superadmin',
    createdAt: u.createdAt.toISOString(),
  };
}

export async function signUp(
  deps: ControlPlaneDeps,
  input: { email: string; password: string; name?: string | undefined },
  client: { ip: string; userAgent?: string | undefined },
) {
  const email = input.email.trim().toLowerCase();
  await deps.rateLimiter.hit(LIMITS.signUpIp, client.ip);
  const passwordHash = await hashPassword(input.password);
  const sessionToken = newSessionToken();
  const now = deps.now();
  const result = await deps.prisma.$transaction(async (tx) => {
    const userCount = await tx.user.count();
    if (deps.config.signup === 'closed' && userCount > 0) throw Errors.forbidden('sign-up is closed');
    const existing = await tx.user.findUnique({ where: { email } });
    if (existing) throw Errors.emailTaken();
    const user = await tx.user.create({
      data: {
        email,
        name: input.name ?? null,
        passwordHash,
        // The very first account administers the platform.
        platformRole: userCount === 0 ? 'superadmin' : 'user',
      },
    });
    const workspace = await tx.workspace.create({
      data: { name: `${input.name ?? email.split('@')[0]}'s workspace` },
    });
    await tx.membership.create({ data: { workspaceId: workspace.id, userId: user.id, role: 'owner' } });
    const session = await tx.session.create({
      data: {
        userId: user.id,
        workspaceId: workspace.id,
        tokenHash: hashToken(sessionToken),
        expiresAt: new Date(now.getTime() + SESSION_TTL_SECONDS * 1000),
        lastSeenAt: now,
        ip: client.ip,
        userAgent: client.userAgent?.slice(0, 300) ?? null,
      },
    });
    return { user, workspace, session };
  });
  return {
    user: userView(result.user),
    workspace: { id: result.workspace.id, name: result.workspace.name, role: 'owner' as const },
    sessionToken,
  };
}

/** The delay for the n-th attempt past an account's threshold: doubling, at most 5 s. */
export function accountSlowDownMs(n: number): number {
  return Math.min(5_000, 250 * 2 ** Math.min(n - 1, 5));
}

/** Whether this user has signed in from this address before (a session was recorded for it). */
async function signedInFrom(deps: ControlPlaneDeps, userId: string, ip: string): Promise<boolean> {
  return (await deps.prisma.session.count({ where: { userId, ip } })) > 0;
}

export async function signIn(
  deps: ControlPlaneDeps,
  input: { email: string; password: string },
  client: { ip: string; userAgent?: string | undefined },
) {
  const email = input.email.trim().toLowerCase();
  const pair = `${email}|${client.ip}`;
  // Every attempt takes its slots atomically before the password is checked, so a concurrent
  // burst cannot exceed a limit. An attacking address is blocked per address and per
  // (account, address) pair; the account itself is never blocked (that would let anyone lock
  // its owner out), only slowed down past its threshold, and not at all from an address its
  // owner signed in from before.
  await deps.rateLimiter.hit(LIMITS.signInIp, client.ip);
  await deps.rateLimiter.hit(LIMITS.signInAccountAddress, pair);
  const attempts = await deps.rateLimiter.count(LIMITS.signInAccount, email);
  const user = await deps.prisma.user.findUnique({ where: { email } });
  if (attempts > LIMITS.signInAccount.max && !(user && (await signedInFrom(deps, user.id, client.ip)))) {
    await new Promise((r) => setTimeout(r, accountSlowDownMs(attempts - LIMITS.signInAccount.max)));
  }
  dummyHash ??= hashPassword('not-a-real-password-for-timing');
  const ok = await verifyPassword(input.password, user?.passwordHash ?? (await dummyHash));
  if (!user || !ok) throw Errors.unauthorized('invalid e-mail or password');
  await deps.rateLimiter.refund(LIMITS.signInAccount, email);
  await deps.rateLimiter.refund(LIMITS.signInAccountAddress, pair);
  const membership = await deps.prisma.membership.findFirst({
    where: { userId: user.id },
    orderBy: { createdAt: 'asc' },
  });
  if (!membership) throw Errors.unauthorized('invalid e-mail or password');
  const sessionToken = newSessionToken();
  const now = deps.now();
  await deps.prisma.session.create({
    data: {
      userId: user.id,
      workspaceId: membership.workspaceId,
      tokenHash: hashToken(sessionToken),
      expiresAt: new Date(now.getTime() + SESSION_TTL_SECONDS * 1000),
      lastSeenAt: now,
      ip: client.ip,
      userAgent: client.userAgent?.slice(0, 300) ?? null,
    },
  });
  return { user: userView(user), sessionToken };
}

export async function findLiveSession(deps: ControlPlaneDeps, cookie: string | undefined) {
  if (!cookie) return null;
  const session = await deps.prisma.session.findUnique({ where: { tokenHash: hashToken(cookie) } });
  if (!session || session.revokedAt || session.expiresAt <= deps.now()) return null;
  return session;
}

export async function signOut(deps: ControlPlaneDeps, cookie: string | undefined): Promise<void> {
  const session = await findLiveSession(deps, cookie);
  if (session) {
    await deps.prisma.session.update({ where: { id: session.id }, data: { revokedAt: deps.now() } });
  }
}

async function issueJwt(
  deps: ControlPlaneDeps,
  session: { id: string; userId: string },
  workspaceId: string,
  requested?: string[],
  ceiling?: readonly string[],
) {
  const membership = await deps.prisma.membership.findUnique({
    where: { workspaceId_userId: { workspaceId, userId: session.userId } },
  });
  if (!membership) return null;
  const allowed = scopesForRole(membership.role as Role).filter((s) => !ceiling || ceiling.includes(s));
  const scopes: Scope[] =
    requested && requested.length ? allowed.filter((s) => requested.includes(s)) : allowed;
  const signed = await deps.signingKeys.sign(
    { sub: session.userId, sid: session.id, wid: workspaceId, roles: [membership.role], scp: scopes },
    deps.now(),
  );
  return signed;
}

/** Session cookie → 5-minute API JWT for the session's current workspace. */
export async function exchangeSessionForJwt(deps: ControlPlaneDeps, cookie: string | undefined) {
  const session = await findLiveSession(deps, cookie);
  if (!session?.workspaceId) throw Errors.unauthorized('no valid session');
  const signed = await issueJwt(deps, session, session.workspaceId);
  if (!signed) throw Errors.unauthorized('no valid session');
  await deps.prisma.session.update({ where: { id: session.id }, data: { lastSeenAt: deps.now() } });
  return { token: signed.token, expiresAt: signed.expiresAt.toISOString() };
}

/**
 * A signed-in member switches to another of their workspaces: a JWT for that workspace,
 * with the requested scopes narrowed to what their role there allows (docs/authorization.md).
 */
export async function exchangeForWorkspace(
  deps: ControlPlaneDeps,
  principal: { userId: string; sessionId: string | null; roles: Role[]; scopes: Scope[] },
  input: { workspaceId: string; requestedScopes: string[] },
) {
  if (!principal.sessionId) throw Errors.forbidden('token exchange needs a session-bound token');
  // A token that was already narrowed stays narrowed: exchange never widens what was presented.
  const full = new Set(principal.roles.flatMap((r) => scopesForRole(r)));
  const narrowed = principal.scopes.length < full.size;
  const signed = await issueJwt(
    deps,
    { id: principal.sessionId, userId: principal.userId },
    input.workspaceId,
    input.requestedScopes,
    narrowed ? principal.scopes : undefined,
  );
  // Not a member: indistinguishable from a workspace that does not exist.
  if (!signed) throw Errors.notFound('workspace not found');
  return {
    accessToken: signed.token,
    tokenType: 'Bearer' as const,
    expiresIn: Math.max(1, Math.round((signed.expiresAt.getTime() - deps.now().getTime()) / 1000)),
  };
}

export async function listSessions(
  deps: ControlPlaneDeps,
  caller: { userId: string; sessionId: string | null },
) {
  const rows = await deps.prisma.session.findMany({
    where: { userId: caller.userId, revokedAt: null, expiresAt: { gt: deps.now() } },
    orderBy: { lastSeenAt: 'desc' },
  });
  return {
    sessions: rows.map((s) => ({
      id: s.id,
      current: s.id === caller.sessionId,
      createdAt: s.createdAt.toISOString(),
      lastSeenAt: s.lastSeenAt.toISOString(),
      expiresAt: s.expiresAt.toISOString(),
      ip: s.ip,
      userAgent: s.userAgent,
    })),
  };
}

export async function revokeSession(deps: ControlPlaneDeps, caller: { userId: string }, id: string) {
  const res = await deps.prisma.session.updateMany({
    where: { id, userId: caller.userId, revokedAt: null },
    data: { revokedAt: deps.now() },
  });
  if (res.count === 0) throw Errors.notFound('session not found');
  return { revoked: true as const, id };
}
