/**
 * The control plane stores what it is sent, and PostgreSQL refuses NUL in text and jsonb (a
 * lone UTF-16 surrogate cannot even be encoded). Such input used to surface as a 500 from the
 * database; it is refused up front with 400, for every route, field and query parameter.
 */
import type { FastifyInstance } from 'fastify';
import { Errors, hasUnstorableText } from '@vlt/service-kit';

/** The path of the first string or key that cannot be stored, or null. */
function findUnstorable(value: unknown, path: string): string | null {
  if (typeof value === 'string') return hasUnstorableText(value) ? path : null;
  if (value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = findUnstorable(value[i], `${path}[${i}]`);
      if (hit) return hit;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    if (hasUnstorableText(k)) return `${path} (a key)`;
    const hit = findUnstorable(v, `${path}.${k}`);
    if (hit) return hit;
  }
  return null;
}

export function refuseUnstorableInput(app: FastifyInstance): void {
  // Bodies are already bounded in depth by the JSON parser, so the walk is shallow.
  app.addHook('preValidation', async (req) => {
    const hit = findUnstorable(req.body, 'body') ?? findUnstorable(req.query, 'query');
    if (hit) {
      const where = hit.length > 120 ? `${hit.slice(0, 120)}…` : hit;
      throw Errors.badRequest(`invalid request: ${where} contains NUL or an unpaired surrogate`);
    }
  });
}
