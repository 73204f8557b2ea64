/**
 * Text redaction with one semantic for buffered bodies, JSON string values and streams.
 *
 * Semantic: the text is cut into lines at `\n` (a trailing `\r` is not shown to detectors) and
 * each line is scanned left to right; at each point the leftmost match of any detector is
 * replaced (on a tie the detector listed first wins) and scanning resumes after it. Matches
 * never span a line break, so `^`/`$` in custom patterns match at line boundaries.
 *
 * Bounded memory: a line longer than WINDOW code units is processed in rounds at positions fixed
 * by the text alone (every time WINDOW units are pending). A round accepts only matches that
 * start at least LOOKAHEAD units before its end, emits up to there and keeps the rest, together
 * with two units of left context. Because round positions depend on the text and not on how it
 * was chunked, streamed output equals buffered output for every chunking. A match that starts in
 * one round and needs more than LOOKAHEAD units is redacted only up to the round's end; the
 * built-in detectors never need more than BUILT_IN_MAX_SPAN (< LOOKAHEAD) units.
 */
import type { CompiledRedaction } from '@vlt/contracts';
import type { LinearRegex } from './regex.js';
import { compileLinearRegex } from './regex.js';
import type { Detector, DetectorMatch } from './pii-detectors.js';
import {
  creditCardDetector,
  emailDetector,
  ipAddressDetector,
  phoneDetector,
  ssnDetector,
} from './pii-detectors.js';

export const REDACTION_WINDOW = 8192;
export const REDACTION_LOOKAHEAD = 1024;
const CONTEXT = 2;

export const DEFAULT_REPLACEMENTS = {
  email: '[REDACTED_EMAIL]',
  phone: '[REDACTED_PHONE]',
  ssn: '[REDACTED_SSN]',
  credit_card: '[REDACTED_CREDIT_CARD]',
  ip_address: '[REDACTED_IP]',
  custom: '[REDACTED]',
} as const;

/** A detector for an admin-supplied RE2 pattern. Empty matches are skipped, never replaced. */
export function customDetector(regex: LinearRegex, replacement: string): Detector {
  const reusable = regex.matcher('');
  return {
    name: 'custom',
    replacement,
    scan: (text) => {
      // One matcher per detector, re-pointed at each text: a finder is only used until the
      // next scan of the same detector, which every caller here respects (scans are synchronous
      // and never interleave for one detector).
      const matcher = reusable.resetMatcherInput(text);
      return (from) => {
        let pos = from;
        while (pos <= text.length && matcher.find(pos)) {
          const start = matcher.start();
          const end = matcher.end();
          if (end > start) return { start, end };
          pos = start + 1;
        }
        return null;
      };
    },
  };
}

export function createDetector(spec: CompiledRedaction, regex?: LinearRegex): Detector {
  switch (spec.type) {
    case 'email':
      return emailDetector(spec.replacement);
    case 'phone':
      return phoneDetector(spec.replacement);
    case 'ssn':
      return ssnDetector(spec.replacement);
    case 'credit_card':
      return creditCardDetector(spec.replacement);
    case 'ip_address':
      return ipAddressDetector(spec.replacement);
    case 'custom':
      return customDetector(regex ?? compileLinearRegex(spec.pattern ?? ''), spec.replacement);
  }
}

export interface Redactor {
  readonly detectors: readonly Detector[];
}

export function createRedactor(detectors: readonly Detector[]): Redactor {
  return { detectors };
}

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;

/**
 * One round over `buf`, whose first `start` units are left context. When `final` is false only
 * matches starting before `buf.length - LOOKAHEAD` are accepted. Returns the redacted text and
 * how far into `buf` it reaches.
 */
function scanRound(
  buf: string,
  start: number,
  final: boolean,
  detectors: readonly Detector[],
): { out: string; consumed: number } {
  const limit = final ? Number.POSITIVE_INFINITY : buf.length - REDACTION_LOOKAHEAD;
  // Detectors whose cheap precondition fails cannot match anywhere in `buf`.
  const active: Detector[] = [];
  for (const d of detectors) if (!d.mayMatch || d.mayMatch(buf)) active.push(d);
  if (active.length === 0 && final) return { out: buf.slice(start), consumed: buf.length };
  const k = active.length;
  const finders = new Array<((from: number) => DetectorMatch | null) | undefined>(k);
  // undefined: not computed yet; null: no match at or after the position it was computed from.
  const next = new Array<DetectorMatch | null | undefined>(k);
  let out = '';
  let p = start;
  for (;;) {
    let best: DetectorMatch | null = null;
    let bestIdx = -1;
    for (let i = 0; i < k; i++) {
      let m = next[i];
      if (m === undefined || (m !== null && m.start < p)) {
        let finder = finders[i];
        if (!finder) finder = finders[i] = active[i]!.scan(buf);
        m = finder(p);
        next[i] = m;
      }
      if (m && (best === null || m.start < best.start)) {
        best = m;
        bestIdx = i;
      }
    }
    if (!best || best.start >= limit) break;
    out += buf.slice(p, best.start) + active[bestIdx]!.replacement;
    p = best.end;
  }
  if (final) return { out: out + buf.slice(p), consumed: buf.length };
  let cut = Math.max(p, limit);
  // Never emit half of a surrogate pair: the encoder would turn it into U+FFFD.
  if (cut > p && isHighSurrogate(buf.charCodeAt(cut - 1))) cut--;
  return { out: out + buf.slice(p, cut), consumed: cut };
}

function redactLine(line: string, detectors: readonly Detector[]): string {
  if (line.endsWith('\r')) return `${scanRound(line.slice(0, -1), 0, true, detectors).out}\r`;
  return scanRound(line, 0, true, detectors).out;
}

/**
 * Incremental, line-local redaction. `push` returns what can be emitted now; `end` returns the
 * rest. Memory is bounded by REDACTION_WINDOW units whatever the input.
 */
export class TextRedactor {
  private pending = '';
  private context = '';
  /** Index of the first "\n" in `pending`, or -1 when `pending[0, searched)` has none. */
  private newline = -1;
  private searched = 0;

  constructor(private readonly detectors: readonly Detector[]) {}

  push(text: string): string {
    if (text === '') return '';
    this.pending += text;
    let out = '';
    for (;;) {
      const nl = this.findNewline();
      if (nl !== -1 && nl < REDACTION_WINDOW) {
        out += this.finishLine(this.pending.slice(0, nl)) + '\n';
        this.dropPending(nl + 1);
        continue;
      }
      if (this.pending.length >= REDACTION_WINDOW) {
        const contextLength = this.context.length;
        const buf = this.context + this.pending.slice(0, REDACTION_WINDOW);
        const round = scanRound(buf, contextLength, false, this.detectors);
        out += round.out;
        this.context = buf.slice(Math.max(0, round.consumed - CONTEXT), round.consumed);
        this.dropPending(round.consumed - contextLength);
        continue;
      }
      break;
    }
    return out;
  }

  end(): string {
    const out = this.pending === '' && this.context === '' ? '' : this.finishLine(this.pending);
    this.pending = '';
    this.context = '';
    this.newline = -1;
    this.searched = 0;
    return out;
  }

  /** Searches each part of `pending` for a newline only once, so long lines cost linear time. */
  private findNewline(): number {
    if (this.newline === -1 && this.searched < this.pending.length) {
      const i = this.pending.indexOf('\n', this.searched);
      if (i === -1) this.searched = this.pending.length;
      else this.newline = i;
    }
    return this.newline;
  }

  private dropPending(n: number): void {
    this.pending = this.pending.slice(n);
    if (this.newline !== -1) {
      this.newline -= n;
      if (this.newline < 0) {
        this.newline = -1;
        this.searched = 0;
      }
    } else {
      this.searched = Math.max(0, this.searched - n);
    }
  }

  private finishLine(line: string): string {
    const ctx = this.context;
    this.context = '';
    if (ctx === '') return redactLine(line, this.detectors);
    const cr = line.endsWith('\r');
    const body = cr ? line.slice(0, -1) : line;
    return scanRound(ctx + body, ctx.length, true, this.detectors).out + (cr ? '\r' : '');
  }
}

// Every built-in detector needs a digit, "@" or ":" somewhere in its match.
const BUILT_IN_TRIGGER = /[0-9@:]/;

/** Buffered redaction; identical to streaming the same text through a TextRedactor. */
export function redactText(text: string, detectors: readonly Detector[]): string {
  if (detectors.length === 0 || text === '') return text;
  if (!BUILT_IN_TRIGGER.test(text) && detectors.every((d) => d.name !== 'custom')) return text;
  if (text.length < REDACTION_WINDOW && text.indexOf('\n') === -1) {
    // Most values hold no match at all: find that out without scanRound's bookkeeping.
    const line = text.endsWith('\r') ? text.slice(0, -1) : text;
    let any = false;
    for (const d of detectors) {
      if ((!d.mayMatch || d.mayMatch(line)) && d.scan(line)(0) !== null) {
        any = true;
        break;
      }
    }
    return any ? redactLine(text, detectors) : text;
  }
  const r = new TextRedactor(detectors);
  return r.push(text) + r.end();
}
