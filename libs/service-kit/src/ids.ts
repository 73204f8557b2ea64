import { randomUUID } from 'node:crypto';

/**
 * UUIDv7 (RFC 9562): time-ordered, so audit ids sort with their timestamps and serve as
 * stable pagination cursors. Built from randomUUID (batched entropy, cheap on the hot path):
 * its variant bits are already right, and the first 48 bits become the timestamp.
 */
export function uuidv7(now = Date.now()): string {
  // randomUUID is `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`: keep everything after its version digit.
  const random = randomUUID();
  const ms = now.toString(16).padStart(12, '0').slice(-12);
  return `${ms.slice(0, 8)}-${ms.slice(8)}-7${random.slice(15)}`;
}
