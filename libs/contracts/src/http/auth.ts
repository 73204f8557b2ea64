import { z } from 'zod';

export const WorkspaceRole = z.enum(['owner', 'admin', 'member', 'viewer']);
export type WorkspaceRole = z.infer<typeof WorkspaceRole>;

export const UserView = z.object({
  id: z.uuid(),
  email: z.string(),
  name: z.string().nullable(),
  platformRole: z.enum(['user', 'superadmin']),
  createdAt: z.string(),
});
export const WorkspaceView = z.object({ id: z.uuid(), name: z.string(), role: WorkspaceRole });

export const SignUpBody = z.object({
  email: z.email().max(320),
  password: z.string().min(12, 'password must be at least 12 characters').max(1024),
  name: z.string().trim().min(1).max(200).optional(),
});
export const SignUpResponse = z.object({ user: UserView, workspace: WorkspaceView });

export const SignInBody = z.object({ email: z.string().max(320), password: z.string().max(1024) });
export const SignInResponse = z.object({ user: UserView });

export const ApiTokenResponse = z.object({ token: z.string(), expiresAt: z.string() });

export const TokenExchangeBody = z.object({
  workspaceId: z.uuid(),
  requestedScopes: z.array(z.string()).default([]),
});
export const TokenExchangeResponse = z.object({
  accessToken: z.string(),
  tokenType: z.literal('Bearer'),
  expiresIn: z.number().int().positive(),
});

export const Jwks = z.object({ keys: z.array(z.record(z.string(), z.unknown())) });
