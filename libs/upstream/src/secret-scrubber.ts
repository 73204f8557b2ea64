/**
 * Removes the credential the gateway injected from whatever the provider sends back. Providers
 * that reflect request headers (debug endpoints, echo services, verbose error pages) would
 * otherwise hand the agent the very secret the vault exists to keep from it.
 *
 * Each secret is searched for in the forms a reflection produces: as it is, percent-encoded,
 * JSON-escaped, and base64 (standard and URL-safe alphabets, at each of the three byte
 * alignments, so the secret is found inside a longer base64 text such as `Basic <user:pass>`).
 * Forms shorter than MIN_FORM_LENGTH are not searched: they would match ordinary text. Bodies
 * are bytes, so each text form is also searched as UTF-16 (both byte orders): a provider may
 * answer `charset=utf-16le`, and the agent decodes what the gateway passes.
 *
 * Streaming: matches may straddle chunks, so the longest chunk suffix that could start a match
 * is held back until the next chunk (usually nothing: the common case emits each chunk as it
 * came, without a copy). Work is linear in the input: one native `indexOf` per root form (a form
 * that contains no other form); a form that contains a root is only compared where that root
 * occurs (ADR 0070).
 */
import { Transform } from 'node:stream';

export const SECRET_REPLACEMENT = '[REDACTED]';
export const MIN_FORM_LENGTH = 8;

interface ByteForm {
  bytes: Buffer;
  /** The replacement in the same encoding, so the text around it still decodes. */
  replacement: Buffer;
  /** UTF-16 code units start at even offsets of a body; an odd match is a shadow of one. */
  evenOnly: boolean;
  /** The form holds a NUL byte, so a body without one cannot contain it. */
  needsNul: boolean;
}

function utf16be(text: string): Buffer {
  return Buffer.from(text, 'utf16le').swap16();
}

function byteForm(bytes: Buffer, replacement: Buffer, evenOnly: boolean): ByteForm {
  return { bytes, replacement, evenOnly, needsNul: bytes.includes(0) };
}

/** Every form as the bytes it appears as in a body, longest first. */
function byteForms(textForms: readonly string[]): ByteForm[] {
  const out: ByteForm[] = [];
  for (const form of textForms) {
    out.push(
      byteForm(Buffer.from(form, 'utf8'), Buffer.from(SECRET_REPLACEMENT, 'utf8'), false),
      byteForm(Buffer.from(form, 'utf16le'), Buffer.from(SECRET_REPLACEMENT, 'utf16le'), true),
      byteForm(utf16be(form), utf16be(SECRET_REPLACEMENT), true),
    );
  }
  return out.sort((x, y) => y.bytes.length - x.bytes.length);
}

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

/** A form that is searched for, with the forms that contain it and where they hold it. */
interface SearchRoot {
  form: ByteForm;
  /** Each occurs wherever `offset` bytes before an occurrence of the root it matches. */
  dependents: Array<{ form: ByteForm; offset: number }>;
}

/**
 * The searched forms of a set of secrets, derived once: a response's headers and body are
 * scrubbed with the same forms, and deriving them per header had cost more than the searches.
 */
export interface SecretForms {
  readonly text: readonly string[];
  readonly bytes: readonly ByteForm[];
  /** The forms searched for; every other form contains one of them. */
  readonly roots: readonly SearchRoot[];
  /** The byte forms that start with each byte value (undefined: none), for the held-back suffix. */
  readonly byFirstByte: readonly (readonly Buffer[] | undefined)[];
}

/**
 * Groups each form under a root it contains: a form with no other form inside it. A secret's
 * forms overlap a lot: the raw token is inside `user:token`, inside its percent-encoding, and
 * the token's base64 inside that of `user:token` at the matching alignment. Searching the roots
 * and comparing the containing forms at their hits finds the same occurrences with a fraction of
 * the passes over the body (an issue-tracker credential: 4 searches instead of 9).
 */
function searchRoots(forms: readonly ByteForm[]): SearchRoot[] {
  const roots: SearchRoot[] = [];
  for (const form of [...forms].sort((x, y) => x.bytes.length - y.bytes.length)) {
    let attached = false;
    // Any root inside the form will do; the longest has the fewest false hits.
    for (let i = roots.length - 1; i >= 0 && !attached; i--) {
      const root = roots[i]!;
      const offset = form.bytes.indexOf(root.form.bytes);
      if (offset === -1) continue;
      root.dependents.push({ form, offset });
      attached = true;
    }
    if (!attached) roots.push({ form, dependents: [] });
  }
  return roots;
}

export function compileSecretForms(secrets: readonly string[]): SecretForms {
  const text = secretForms(secrets);
  const bytes = byteForms(text);
  const byFirstByte = new Array<Buffer[] | undefined>(256);
  for (const f of bytes) (byFirstByte[f.bytes[0]!] ??= []).push(f.bytes);
  return { text, bytes, roots: searchRoots(bytes), byFirstByte };
}

type Secrets = readonly string[] | SecretForms;

const compiled = (s: Secrets): SecretForms => ('bytes' in s ? s : compileSecretForms(s));

export interface SecretScrubber {
  /** Scrubs one chunk of a stream; may hold back a few bytes for the next call. */
  push(chunk: Buffer): Buffer;
  /** Returns whatever was held back (it cannot be a whole match). */
  end(): Buffer;
  /** Whether any form was found so far. */
  readonly found: boolean;
}

/** A scrubber for one body, or null when no secret has a searchable form. */
export function createSecretScrubber(secrets: Secrets): SecretScrubber | null {
  const { bytes: forms, roots, byFirstByte } = compiled(secrets);
  if (forms.length === 0) return null;
  const longest = forms[0]!.bytes.length;
  let carry: Buffer | null = null;
  let found = false;
  /** Input bytes seen so far (for the parity of UTF-16 matches). */
  let consumed = 0;

  /**
   * Replaces every occurrence of every form; returns the input when none occurs. `base` is the
   * offset of `data[0]` in the whole body.
   */
  function replaceAll(data: Buffer, base: number): Buffer {
    // Typed by assertion: the closure below assigns it, which narrowing from `= null` ignores.
    let spans = null as Array<[number, number, Buffer]> | null;
    // A form occurs at `from` (UTF-16 forms only at even body offsets).
    const add = (form: ByteForm, from: number) => {
      if (!form.evenOnly || (base + from) % 2 === 0) {
        (spans ??= []).push([from, from + form.bytes.length, form.replacement]);
      }
    };
    // UTF-16 text of an ASCII secret is half NUL bytes; the common body has none, and then
    // those forms (and every form containing one) cannot occur in it.
    const hasNul = data.indexOf(0) !== -1;
    for (const { form: root, dependents } of roots) {
      if (root.needsNul && !hasNul) continue;
      const { bytes } = root;
      let at = data.indexOf(bytes);
      while (at !== -1) {
        add(root, at);
        for (const { form, offset } of dependents) {
          const from = at - offset;
          const to = from + form.bytes.length;
          if (
            from >= 0 &&
            to <= data.length &&
            data.compare(form.bytes, 0, form.bytes.length, from, to) === 0
          ) {
            add(form, from);
          }
        }
        // Every occurrence, overlapping ones too: each may be where a containing form sits.
        at = data.indexOf(bytes, at + 1);
      }
    }
    if (!spans) return data;
    found = true;
    spans.sort((x, y) => x[0] - y[0] || y[1] - x[1]);
    const parts: Buffer[] = [];
    let pos = 0;
    for (const [from, to, replacement] of spans) {
      if (to <= pos) continue; // inside a span already replaced
      if (from >= pos) {
        parts.push(data.subarray(pos, from), replacement);
      } // else: overlaps the previous span, which already stands for it
      pos = to;
    }
    parts.push(data.subarray(pos));
    return Buffer.concat(parts);
  }

  /**
   * Length of the longest suffix of `data` that is a proper prefix of some form. The window is
   * walked once from its start, so the first suffix that matches is the longest; a position is
   * looked at only when its byte starts some form. (One native search per form and window had
   * cost more than the body search itself on small chunks, for a window of at most 84 bytes.)
   */
  function pendingPrefix(data: Buffer): number {
    const end = data.length;
    const last = data[end - 1];
    for (let at = end - Math.min(longest - 1, end); at < end; at++) {
      const candidates = byFirstByte[data[at]!];
      if (candidates === undefined) continue;
      const len = end - at;
      for (const form of candidates) {
        // The candidate's last byte must be the form's byte at that length: a comparison that
        // rules out nearly every candidate before the (dearer) native compare.
        if (len < form.length && form[len - 1] === last && data.compare(form, 0, len, at) === 0) return len;
      }
    }
    return 0;
  }

  return {
    get found() {
      return found;
    },
    push(chunk) {
      // A held-back suffix is unreplaced input (no replacement starts a form), so it sits
      // right before this chunk in the body.
      const base = consumed - (carry?.length ?? 0);
      consumed += chunk.length;
      const data = carry ? Buffer.concat([carry, chunk]) : chunk;
      carry = null;
      const out = replaceAll(data, base);
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
export function scrubSecretsFromBuffer(body: Buffer, secrets: Secrets): Buffer {
  const s = createSecretScrubber(secrets);
  if (!s) return body;
  const head = s.push(body);
  const tail = s.end();
  return tail.length === 0 ? head : Buffer.concat([head, tail]);
}

/** Scrubs a text (a header value, a decoded string). */
export function scrubSecretsFromText(text: string, secrets: Secrets): string {
  let out = text;
  for (const form of compiled(secrets).text) {
    if (out.includes(form)) out = out.split(form).join(SECRET_REPLACEMENT);
  }
  return out;
}

/** A scrubber as a Node stream stage of its own (after content decoders). */
export function createSecretScrubStream(s: SecretScrubber): Transform {
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
