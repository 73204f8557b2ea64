import { Prisma } from './generated/prisma/client.js';

/**
 * True for a unique-constraint violation, from Prisma (P2002) or from node-postgres (23505).
 * Single-use records (assertion `jti`, audit ids, notification source events) rely on it: the
 * first insert wins, every later one lands here.
 */
export function isUniqueViolation(error: unknown): boolean {
  if (error instanceof Prisma.PrismaClientKnownRequestError) return error.code === 'P2002';
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505';
}
