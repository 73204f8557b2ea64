/**
 * What an approval keeps of a request's body and context for its reviewer (ADR 0099).
 *
 * An approval goes to the control plane as one bus message, is stored as one row, and is read
 * on a review page, in a chat message, and by the agent's plugin to replay the request. A body of
 * megabytes fits none of them: NATS refuses a message over its `max_payload` (1 MiB by default),
 * so a step-up on a chat call carrying an image failed with 503 in the split shape.
 *
 * A body up to REVIEW_BODY_BYTES is kept whole in `body`, as the agent sent it. A larger one is
 * kept as `bodyPreview`, never as `body`, so nothing can mistake a preview for the request: its
 * size, and its members in document order until about REVIEW_PREVIEW_CHARS are shown, each
 * string cut at REVIEW_STRING_CHARS, with what was left out counted where it was left out.
 * What runs after approval is bound by the fingerprint over the whole body, never by this copy.
 */
import { createHash } from 'node:crypto';
import type { InspectedBody } from '@vlt/policy-engine';

/** A body up to this size is kept whole: its size as sent, and as written in the approval. */
export const REVIEW_BODY_BYTES = 256 * 1024;
/** A preview of a larger body stops taking members once it holds about this many characters. */
export const REVIEW_PREVIEW_CHARS = 64 * 1024;
/** The agent's context is shown up to about this many characters. */
export const REVIEW_CONTEXT_CHARS = 16 * 1024;
/** A string in a preview is cut after this many characters. */
export const REVIEW_STRING_CHARS = 1024;
/** A large body that is not JSON is previewed as its first this many characters. */
const REVIEW_TEXT_CHARS = 16 * 1024;

export interface BodyPreview {
  /** The body's size in bytes, as it will be sent. */
  bytes: number;
  shown: unknown;
}

/** The body as a reviewer reads it: whole, as bytes by size and digest, or as a preview. */
export function reviewedBody(
  body: unknown,
  read: { inspected: InspectedBody | undefined; size: number },
): { body: unknown } | { bodyPreview: BodyPreview } {
  if (body instanceof Uint8Array) {
    // Never a JSON array of numbers: a file is shown by its size and digest.
    return { body: { bytes: body.byteLength, sha256: createHash('sha256').update(body).digest('hex') } };
  }
  if (body === undefined || body === null) return { body: null };
  // A string is written escaped in the approval: `\u0001` takes six bytes there for one sent.
  if (read.size <= REVIEW_BODY_BYTES && writtenSize(body) <= REVIEW_BODY_BYTES) return { body };
  const shown =
    read.inspected?.kind === 'json'
      ? previewJson(read.inspected.value, REVIEW_PREVIEW_CHARS).value
      : cut(typeof body === 'string' ? body : String(body), REVIEW_TEXT_CHARS);
  return { bodyPreview: { bytes: read.size, shown } };
}

/** The agent's context for the reviewer: whole when small, else a preview of it. */
export function reviewedContext(context: Record<string, unknown>): Record<string, unknown> {
  const preview = previewJson(context, REVIEW_CONTEXT_CHARS);
  return preview.complete ? context : (preview.value as Record<string, unknown>);
}

function writtenSize(body: unknown): number {
  return typeof body === 'string' ? Buffer.byteLength(JSON.stringify(body)) : 0;
}

/** `text` up to `max` characters, a surrogate pair never split, with how much was cut off. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}… [${text.length - end} more characters]`;
}

/**
 * A copy of a parsed JSON value with about `budget` characters of content at most, and whether
 * nothing had to be left out. Linear in what it shows, not in the value's size: the preview of a
 * 10 MiB body visits as many members as fit.
 */
function previewJson(value: unknown, budget: number): { value: unknown; complete: boolean } {
  let left = budget;
  let complete = true;
  const shorten = (s: string): string => {
    const shown = cut(s, REVIEW_STRING_CHARS);
    if (shown !== s) complete = false;
    return shown;
  };
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const s = shorten(v);
      left -= s.length + 3;
      return s;
    }
    if (v === null || typeof v !== 'object') {
      left -= 8;
      return v;
    }
    // A container's brackets count too: a body of 100,000 empty arrays is cut like any other.
    left -= 2;
    if (Array.isArray(v)) {
      const out: unknown[] = [];
      for (let i = 0; i < v.length; i++) {
        if (left <= 0) {
          complete = false;
          out.push(`… [${v.length - i} more items]`);
          break;
        }
        left -= 1; // its comma
        out.push(walk(v[i]));
      }
      return out;
    }
    const out: Record<string, unknown> = {};
    let shown = 0;
    for (const key in v) {
      if (!Object.prototype.hasOwnProperty.call(v, key)) continue;
      if (left <= 0) {
        complete = false;
        define(out, '…', `${Object.keys(v).length - shown} more members`);
        break;
      }
      const name = shorten(key);
      left -= name.length + 4;
      define(out, name, walk((v as Record<string, unknown>)[key]));
      shown++;
    }
    return out;
  };
  return { value: walk(value), complete };
}

/** An own property even for `__proto__`, which plain assignment would take as the prototype. */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}
