import { randomUUID } from 'node:crypto';

/**
 * UUIDv7 (RFC 9562): time-ordered, so audit ids sort with their timestamps and serve as
 * stable pagination cursors. Built from randomUUID (batched entropy, cheap on the hot path):
 * its variant bits are already right, and the first 48 bits become the timestamp.
 */
export function uuidv7(now = Date.now()): string {
  const random = randomUUID().replace(/-/g, '');
  const hex = now.toString(16).padStart(12, '0').slice(-12) + '7' + random.slice(13);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
