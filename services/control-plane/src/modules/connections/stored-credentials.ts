/**
 * What a connection's sealed `credentials` column holds. Only the control plane reads it: the
 * OAuth refresh token lives here and nowhere else (data planes get `toDataPlane`'s view).
 */
import { openJson, sealJson } from '@vlt/crypto';
import type { MasterKeyring } from '@vlt/crypto';
import type { ProviderCredentials } from '@vlt/contracts';
import type { Prisma } from '@vlt/db';
import { z } from 'zod';

export const StoredCredentials = z.discriminatedUnion('type', [
  z.object({ type: z.literal('basic'), username: z.string(), password: z.string() }),
  z.object({
    type: z.literal('oauth'),
    accessToken: z.string(),
    refreshToken: z.string().nullable(),
    /** Epoch milliseconds; null when the provider gave no lifetime. */
    expiresAt: z.number().int().nullable(),
  }),
  z.object({ type: z.literal('api_key'), key: z.string() }),
  z.object({ type: z.literal('bot_token'), token: z.string() }),
]);
export type StoredCredentials = z.infer<typeof StoredCredentials>;

/** Bound to the row: an envelope copied onto another connection does not open. */
const aad = (connectionId: string) => `connection:${connectionId}`;

export function sealCredentials(
  keyring: MasterKeyring,
  connectionId: string,
  c: StoredCredentials,
): Prisma.InputJsonValue {
  return sealJson(keyring, c, aad(connectionId)) as unknown as Prisma.InputJsonValue;
}

export function openCredentials(
  keyring: MasterKeyring,
  connectionId: string,
  sealed: unknown,
): StoredCredentials {
  return StoredCredentials.parse(openJson(keyring, sealed as never, aad(connectionId)));
}

/** What a data plane may hold: the refresh token is dropped here. */
export function toDataPlane(c: StoredCredentials): ProviderCredentials {
  switch (c.type) {
    case 'oauth':
      return { type: 'bearer', token: c.accessToken, expiresAt: c.expiresAt };
    case 'basic':
      return { type: 'basic', username: c.username, password: c.password };
    case 'api_key':
      return { type: 'api_key', key: c.key };
    case 'bot_token':
      return { type: 'bot_token', token: c.token };
  }
}
