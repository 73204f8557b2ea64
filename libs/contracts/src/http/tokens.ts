import { z } from 'zod';

export const PatView = z.object({
  id: z.uuid(),
  name: z.string(),
  expiresAt: z.string(),
  createdAt: z.string(),
  isExpired: z.boolean(),
});
export const CreatePatBody = z.object({
  name: z.string().trim().min(1).max(200),
  expiresInDays: z.number().int().min(1).max(90).default(30),
  scopes: z.array(z.string()).optional(),
});
export const CreatePatResponse = z.object({ token: PatView, plainToken: z.string(), auditId: z.string() });
export const PatListResponse = z.object({ tokens: z.array(PatView) });
