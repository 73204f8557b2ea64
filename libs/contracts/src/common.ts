import { z } from 'zod';

export const Uuid = z.uuid();
export const IsoTimestamp = z.string();

/** Every error body: an `error` string, optionally a stable `code` and execution context. */
export const ErrorResponse = z.object({
  error: z.string(),
  code: z.string().optional(),
  auditId: z.string().optional(),
  retryAfter: z.number().int().optional(),
  details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
export type ErrorResponse = z.infer<typeof ErrorResponse>;

export const IdParams = z.object({ id: z.uuid() });
export type IdParams = z.infer<typeof IdParams>;

export const HealthResponse = z.object({ status: z.string() });
