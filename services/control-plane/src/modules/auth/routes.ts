import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  ApiTokenResponse,
  ErrorResponse,
  Jwks,
  SignInBody,
  SignInResponse,
  SignUpBody,
  SignUpResponse,
  TokenExchangeBody,
  TokenExchangeResponse,
} from '@vlt/contracts';
import { z } from 'zod';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import {
  exchangeForWorkspace,
  exchangeSessionForJwt,
  SESSION_COOKIE,
  SESSION_TTL_SECONDS,
  signIn,
  signOut,
  listSessions,
  revokeSession,
  signUp,
} from './service.js';
import { IdParams } from '@vlt/contracts';

export function authRoutes(deps: ControlPlaneDeps) {
  const secure = deps.config.publicBaseUrl.startsWith('https://');
  const setSessionCookie = (reply: FastifyReply, token: string) =>
    reply.setCookie(SESSION_COOKIE, token, {
      httpOnly: true,
      sameSite: 'lax',
      secure,
      path: '/',
      maxAge: SESSION_TTL_SECONDS,
    });

  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const none = { auth: 'none' as const };

    r.post(
      '/api/auth/sign-up',
      {
        config: none,
        schema: { tags: ['auth'], body: SignUpBody, response: { 201: SignUpResponse, 409: ErrorResponse } },
      },
      async (req, reply) => {
        const out = await signUp(deps, req.body, { ip: req.ip, userAgent: req.headers['user-agent'] });
        setSessionCookie(reply, out.sessionToken);
        return reply.status(201).send({ user: out.user, workspace: out.workspace });
      },
    );

    r.post(
      '/api/auth/sign-in',
      {
        config: none,
        schema: { tags: ['auth'], body: SignInBody, response: { 200: SignInResponse, 401: ErrorResponse } },
      },
      async (req, reply) => {
        const out = await signIn(deps, req.body, { ip: req.ip, userAgent: req.headers['user-agent'] });
        setSessionCookie(reply, out.sessionToken);
        return { user: out.user };
      },
    );

    r.post(
      '/api/auth/sign-out',
      {
        config: none,
        schema: { tags: ['auth'], response: { 200: z.object({ signedOut: z.literal(true) }) } },
      },
      async (req, reply) => {
        await signOut(deps, req.cookies[SESSION_COOKIE]);
        reply.clearCookie(SESSION_COOKIE, { path: '/' });
        return { signedOut: true as const };
      },
    );

    r.post(
      '/api/auth/token',
      { config: none, schema: { tags: ['auth'], response: { 200: ApiTokenResponse, 401: ErrorResponse } } },
      async (req) => exchangeSessionForJwt(deps, req.cookies[SESSION_COOKIE]),
    );

    r.get(
      '/.well-known/jwks.json',
      { config: none, schema: { tags: ['auth'], response: { 200: Jwks } } },
      async (_req, reply) => {
        reply.header('cache-control', 'public, max-age=60');
        return deps.signingKeys.jwks();
      },
    );

    const SessionView = z.object({
      id: z.uuid(),
      current: z.boolean(),
      createdAt: z.string(),
      lastSeenAt: z.string(),
      expiresAt: z.string(),
      ip: z.string().nullable(),
      userAgent: z.string().nullable(),
    });
    r.get(
      '/api/auth/sessions',
      {
        config: { auth: 'user' },
        schema: { tags: ['auth'], response: { 200: z.object({ sessions: z.array(SessionView) }) } },
      },
      async (req) => listSessions(deps, requireUser(req)),
    );
    r.delete(
      '/api/auth/sessions/:id',
      {
        config: { auth: 'user' },
        schema: {
          tags: ['auth'],
          params: IdParams,
          response: { 200: z.object({ revoked: z.literal(true), id: z.uuid() }) },
        },
      },
      async (req) => revokeSession(deps, requireUser(req), req.params.id),
    );

    r.post(
      '/api/internal/token/exchange',
      {
        config: { auth: 'user' },
        schema: { tags: ['auth'], body: TokenExchangeBody, response: { 200: TokenExchangeResponse } },
      },
      async (req) => exchangeForWorkspace(deps, requireUser(req), req.body),
    );
  };
}
