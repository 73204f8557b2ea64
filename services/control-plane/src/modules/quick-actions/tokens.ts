/**
 * Quick-action tokens (bot-chat Approve/Deny buttons): `<row id>.<HMAC>` where the HMAC, keyed
 * by a key derived from the master key, covers the row id, the approval, the action and the
 * expiry. The signature makes a token unforgeable without a database read; the row makes it
 * single use and lets it be found again. A token dies with its approval.
 */
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { MasterKeyring } from '@vlt/crypto';
import type { ControlPlaneDeps } from '../../deps.js';

export type QuickAction = 'approve' | 'deny';

function signingKey(master: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'vlt quick-action v1', 32));
}

function mac(key: Buffer, t: { id: string; approvalId: string; action: string; expiresAt: Date }): Buffer {
  return createHmac('sha256', key)
    .update(`${t.id}|${t.approvalId}|${t.action}|${t.expiresAt.getTime()}`)
    .digest();
}

export function signQuickAction(
  keyring: MasterKeyring,
  t: { id: string; approvalId: string; action: QuickAction; expiresAt: Date },
): string {
  return `${t.id}.${mac(signingKey(keyring.current.key), t).toString('base64url')}`;
}

/** Splits a token; null when it cannot be one of ours (no database read for junk). */
export function parseQuickActionToken(token: string): { id: string; sig: Buffer } | null {
  const m = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{43})$/.exec(
    token,
  );
  if (!m) return null;
  return { id: m[1]!, sig: Buffer.from(m[2]!, 'base64url') };
}

/** Checks the signature against the current key and, during a rotation, the old ones. */
export function verifyQuickAction(
  keyring: MasterKeyring,
  sig: Buffer,
  t: { id: string; approvalId: string; action: string; expiresAt: Date },
): boolean {
  for (const k of [keyring.current, ...keyring.old]) {
    const expected = mac(signingKey(k.key), t);
    if (expected.length === sig.length && timingSafeEqual(expected, sig)) return true;
  }
  return false;
}

/** One Approve and one Deny URL for an approval, as sent to one channel. */
export async function mintQuickActions(
  deps: ControlPlaneDeps,
  approval: { id: string; expiresAt: Date },
  channelId: string,
): Promise<{ approveUrl: string; denyUrl: string }> {
  const urls: Record<QuickAction, string> = { approve: '', deny: '' };
  for (const action of ['approve', 'deny'] as const) {
    const row = await deps.prisma.quickActionToken.create({
      data: { approvalId: approval.id, action, expiresAt: approval.expiresAt, channelId },
    });
    const token = signQuickAction(deps.keyring, {
      id: row.id,
      approvalId: approval.id,
      action,
      expiresAt: row.expiresAt,
    });
    urls[action] = `${deps.config.publicBaseUrl}/api/quick-action/${token}`;
  }
  return { approveUrl: urls.approve, denyUrl: urls.deny };
}
