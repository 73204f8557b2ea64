/**
 * Removes the credential the gateway injected from whatever the provider sends back. Providers
 * that reflect request headers (debug endpoints, echo services, verbose error pages) would
 * otherwise hand the agent the very secret the vault exists to keep from it.
 *
 * Each secret is searched for in the forms a reflection produces: as it is, percent-encoded,
 * JSON-escaped, and base64 (standard and URL-safe alphabets, at each of the three byte
 * alignments, so the secret is found inside a longer base64 text such as `Basic <user:pass>`).
 * Forms shorter than MIN_FORM_LENGTH are not searched: they would match ordinary text.
 *
 * Streaming: matches may straddle chunks, so the longest chunk suffix that could start a match
 * is held back until the next chunk (usually nothing: the common case emits each chunk as it
 * came, without a copy). Work is linear in the input: one native `indexOf` per form.
 */
import { Transform } from 'node:stream';

export const SECRET_REPLACEMENT = '[REDACTED]';
export const MIN_FORM_LENGTH = 8;

const REPLACEMENT = Buffer.from(SECRET_REPLACEMENT);

/** The base64 characters that depend only on the secret's bytes, at one byte alignment. */
function base64Core(secret: Buffer, alignment: 0 | 1 | 2): string {
  const padded = Buffer.concat([Buffer.alloc(alignment), secret]);
  const full = padded.toString('base64').replace(/=+$/, '');
  // Leading characters mix in the alignment bytes; trailing ones mix in whatever follows.
  const lead = alignment === 0 ? 0 : alignment === 1 ? 2 : 3;
  const bitsEnd = (alignment + secret.length) * 8;
  const trail = Math.floor(bitsEnd / 6);
  return full.slice(lead, trail);
}

/** Every searched form of the given secrets, longest first, de-duplicated. */
export function secretForms(secrets: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (!secret) continue;
    const bytes = Buffer.from(secret, 'utf8');
    const candidates = [secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)];
    for (const a of [0, 1, 2] as const) {
      const std = base64Core(bytes, a);
      candidates.push(std, std.replace(/\+/g, '-').replace(/\//g, '_'), std.replace(/\//g, '\\/'));
    }
    for (const c of candidates) if (c.length >= MIN_FORM_LENGTH) forms.add(c);
  }
  return [...forms].sort((x, y) => y.length - x.length);
}

export interface SecretScrubber {
  /** Scrubs one chunk of a stream; may hold back a few bytes for the next call. */
  push(chunk: Buffer): Buffer;
  /** Returns whatever was held back (it cannot be a whole match). */
  end(): Buffer;
  /** Whether any form was found so far. */
  readonly found: boolean;
}

/** A scrubber for one body, or null when no secret has a searchable form. */
export function createSecretScrubber(secrets: readonly string[]): SecretScrubber | null {
  const forms = secretForms(secrets).map((f) => Buffer.from(f, 'utf8'));
  if (forms.length === 0) return null;
  const longest = forms[0]!.length;
  let carry: Buffer | null = null;
  let found = false;

  /** Replaces every occurrence of every form; returns the input when none occurs. */
  function replaceAll(data: Buffer): Buffer {
    let spans: Array<[number, number]> | null = null;
    for (const form of forms) {
      let at = data.indexOf(form);
      while (at !== -1) {
        (spans ??= []).push([at, at + form.length]);
        at = data.indexOf(form, at + form.length);
      }
    }
    if (!spans) return data;
    found = true;
    spans.sort((x, y) => x[0] - y[0] || y[1] - x[1]);
    const parts: Buffer[] = [];
    let pos = 0;
    for (const [from, to] of spans) {
      if (to <= pos) continue; // inside a span already replaced
      if (from >= pos) {
        parts.push(data.subarray(pos, from), REPLACEMENT);
      } // else: overlaps the previous span, which already stands for it
      pos = to;
    }
    parts.push(data.subarray(pos));
    return Buffer.concat(parts);
  }

  /** Length of the longest suffix of `data` that is a proper prefix of some form. */
  function pendingPrefix(data: Buffer): number {
    const window = Math.min(longest - 1, data.length);
    const start = data.length - window;
    let best = 0;
    for (const form of forms) {
      const first = form[0]!;
      // Candidates start where the form's first byte occurs in the window.
      let at = data.indexOf(first, start);
      while (at !== -1) {
        const len = data.length - at;
        if (len < form.length && len > best && data.compare(form, 0, len, at) === 0) best = len;
        at = data.indexOf(first, at + 1);
      }
    }
    return best;
  }

  return {
    get found() {
      return found;
    },
    push(chunk) {
      const data = carry ? Buffer.concat([carry, chunk]) : chunk;
      carry = null;
      const out = replaceAll(data);
      const held = pendingPrefix(out);
      if (held === 0) return out;
      carry = Buffer.from(out.subarray(out.length - held));
      return out.subarray(0, out.length - held);
    },
    end() {
      const rest = carry ?? Buffer.alloc(0);
      carry = null;
      return rest;
    },
  };
}

/** Scrubs a whole body at once. */
export function scrubSecretsFromBuffer(body: Buffer, secrets: readonly string[]): Buffer {
  const s = createSecretScrubber(secrets);
  if (!s) return body;
  const head = s.push(body);
  const tail = s.end();
  return tail.length === 0 ? head : Buffer.concat([head, tail]);
}

/** Scrubs a text (a header value, a decoded string). */
export function scrubSecretsFromText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const form of secretForms(secrets)) {
    if (out.includes(form)) out = out.split(form).join(SECRET_REPLACEMENT);
  }
  return out;
}

/** The scrubber as a Node stream stage. */
export function createSecretScrubStream(secrets: readonly string[]): Transform | null {
  const s = createSecretScrubber(secrets);
  if (!s) return null;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      const out = s.push(chunk);
      cb(null, out.length ? out : undefined);
    },
    flush(cb) {
      const rest = s.end();
      cb(null, rest.length ? rest : undefined);
    },
  });
}
