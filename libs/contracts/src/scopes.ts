/**
 * Scopes and the role → scope matrix. Every route names the scope it needs; a principal
 * carries the scopes of its role (PATs may narrow them). docs/authorization.md shows this table.
 */
import { z } from 'zod';

export const Scope = z.enum([
  'api:read',
  'api:write',
  'capabilities:read',
  'vault:execute',
  'approvals:decide',
  'admin',
]);
export type Scope = z.infer<typeof Scope>;

export const Role = z.enum(['owner', 'admin', 'member', 'viewer', 'agent']);
export type Role = z.infer<typeof Role>;

export const ROLE_SCOPES: Readonly<Record<Role, readonly Scope[]>> = Object.freeze({
  owner: ['api:read', 'api:write', 'capabilities:read', 'approvals:decide', 'admin'],
  admin: ['api:read', 'api:write', 'capabilities:read', 'approvals:decide', 'admin'],
  member: ['api:read', 'api:write', 'capabilities:read', 'approvals:decide'],
  viewer: ['api:read', 'capabilities:read'],
  // Agents reach only agent routes; they can never decide approvals or change configuration.
  agent: ['vault:execute', 'capabilities:read'],
});

export function scopesForRole(role: Role): Scope[] {
  return [...ROLE_SCOPES[role]];
}
