/**
 * Typed errors of @vlt/crypto. Each carries a stable `code` (for the service error registry and
 * for alerting) and an HTTP status; messages never contain key material or plaintext, because
 * error messages end up in logs, traces and API responses.
 */

/** Why an envelope could not be opened. `auth_failed` deliberately covers tampering and a wrong aad alike. */
export type DecryptionFailureReason = 'malformed' | 'unsupported_version' | 'unknown_key' | 'auth_failed';

const REASON_MESSAGES: Record<DecryptionFailureReason, string> = {
  malformed: 'envelope is malformed',
  unsupported_version: 'envelope version is not supported',
  unknown_key: 'envelope was sealed with a master key that is not configured',
  auth_failed: 'envelope failed authentication (tampered, or bound to another record)',
};

export class DecryptionError extends Error {
  override readonly name = 'DecryptionError';
  readonly code = 'VLT_DECRYPTION_FAILED' as const;
  /** A stored secret that cannot be opened is a server-side fault, never the caller's. */
  readonly statusCode = 500;
  readonly reason: DecryptionFailureReason;
  /** Non-secret id of the key the envelope names, when it had one; helps operators during rotation. */
  readonly keyId: string | undefined;

  constructor(reason: DecryptionFailureReason, keyId?: string) {
    super(`decryption failed: ${REASON_MESSAGES[reason]}${keyId ? ` (keyId ${keyId})` : ''}`);
    this.reason = reason;
    this.keyId = keyId;
  }
}

export class MasterKeyError extends Error {
  override readonly name = 'MasterKeyError';
  readonly code = 'VLT_MASTER_KEY_INVALID' as const;
  readonly statusCode = 500;
}
