/**
 * Streaming response filters. Each filter is a synchronous, pure state machine (`push` bytes in,
 * get bytes out; `end` flushes) wrapped into a Web TransformStream or a Node Transform.
 *
 * - text/event-stream: framed on bytes (CR, LF, CRLF; a blank line ends an event), so a
 *   multi-byte character is never split. Each event's `data:` lines are joined, parsed as JSON,
 *   filtered and re-serialised as one `data:` line; non-JSON data and comment lines are redacted
 *   as text; `event:`, `id:` and `retry:` pass untouched. An unchanged event is emitted as its
 *   original bytes.
 * - application/x-ndjson: the same per line.
 * - text: incremental line-local redaction (see redaction.ts), so a value split across chunks
 *   is still caught, with a UTF-8 decoder that holds back partial characters.
 * - JSON (a JSON endpoint asked for with `stream: true`): buffered up to a bound and filtered
 *   as a whole, so streaming cannot be used to dodge response rules.
 * - anything else, or no applicable rule: null, the caller pipes bytes through untouched.
 *
 * Raw fast path (raw-json.ts): when the plan only redacts with built-in detectors, an SSE event
 * (one `data:` line, no comment) or NDJSON line whose JSON provably cannot change is emitted as
 * its original bytes without being decoded or parsed; anything else takes the full path above.
 * The output is the same either way (property-tested), only the cost differs.
 *
 * Memory is bounded: an SSE event, NDJSON line or buffered JSON body over its limit errors the
 * stream (ResponseFilterLimitError) instead of growing or passing unfiltered bytes.
 */
import { Transform } from 'node:stream';
import type { TextCodec } from './content-type.js';
import { classifyContentType, codecFor } from './content-type.js';
import { findDuplicateKey } from './json-util.js';
import { ByteBuffer } from './byte-buffer.js';
import { ResponseFilterLimitError, ResponseUnfilterableError } from './errors.js';
import type { RawJsonCheck } from './raw-json.js';
import { RawEventFrame, rawJsonCheck, rawJsonEnd, rawJsonUnchanged } from './raw-json.js';
import type { ResponsePlan } from './response-filter.js';
import { filterJsonValue, MAX_JSON_DEPTH, planNeedsStructure } from './response-filter.js';
import { jsonBoundsViolation } from './json-bounds.js';
import { TextRedactor, redactText } from './redaction.js';

export interface StreamFilterLimits {
  /** Largest SSE event held while waiting for its blank line. */
  maxEventBytes: number;
  /** Largest NDJSON line held while waiting for its newline. */
  maxLineBytes: number;
  /** Largest JSON body buffered for filtering. */
  maxBufferedBytes: number;
}

export const DEFAULT_STREAM_LIMITS: StreamFilterLimits = {
  maxEventBytes: 1 << 20,
  maxLineBytes: 1 << 20,
  maxBufferedBytes: 16 << 20,
};

export interface ResponseFilterCore {
  push(chunk: Uint8Array): Uint8Array[];
  end(): Uint8Array[];
}

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const BOM = '\uFEFF';

/**
 * Filters one JSON-or-text payload. Returns null when the payload is unchanged so the caller
 * can emit the original bytes.
 */
// JSON text starts (after whitespace) with one of these; anything else skips the parse attempt.
const JSON_START = /^[\s]*[[{"\-0-9tfn]/;

// A payload that opens like a JSON object or a structured array (after any whitespace, BOM or
// NBSP), but that JSON.parse refuses: lenient parsers (JSON5, comments, single quotes, a BOM)
// would still read fields from it. `[DONE]`-style sentinels do not match.
const STRUCTURED_START = /^[\s\uFEFF\u00A0]*(?:\{|\[[\s\uFEFF\u00A0]*[[{"])/;

/** Whether a plan needs JSON structure (field rules, provider inbound filters, contact fields). */
const isStructural = planNeedsStructure;

/** Provider JSON the filters can walk: as deep as they go, as wide as the size limits allow. */
const PAYLOAD_JSON_BOUNDS = { maxDepth: MAX_JSON_DEPTH, maxMembers: Number.POSITIVE_INFINITY };

/**
 * Filters one payload (an SSE event's data, an NDJSON line, a JSON body). `declaredJson`: the
 * content type says this is JSON, so under field rules anything that does not parse strictly
 * is refused — a Range slice (`"ssn":"…"}`) or a body with junk in front would otherwise be
 * redacted as text with its denied fields still in it.
 */
function filterPayload(text: string, plan: ResponsePlan, declaredJson = false): string | null {
  let parsed: unknown;
  let isJson = false;
  // Checked before parsing: a megabyte of `[[[[` parses into a million-deep value (seconds of
  // allocation and collection) that the walk would refuse anyway.
  // Refused rather than redacted as text: its strings may hide what redaction looks for
  // behind JSON escapes (`\u0040`) that only a parse would undo.
  if (JSON_START.test(text)) {
    const tooDeep = jsonBoundsViolation(text, PAYLOAD_JSON_BOUNDS);
    if (tooDeep !== null) {
      throw new ResponseFilterLimitError(`the provider sent ${tooDeep}; response rules cannot be applied`);
    }
    try {
      parsed = JSON.parse(text);
      isJson = true;
    } catch {
      isJson = false;
    }
  }
  if (!isJson && (declaredJson || STRUCTURED_START.test(text)) && isStructural(plan)) {
    // Redacting it as text would let its denied fields through to a lenient reader.
    throw new ResponseUnfilterableError(
      'the provider sent JSON that does not parse strictly; field rules cannot be applied',
    );
  }
  if (isJson) {
    const out = filterJsonValue(parsed, plan);
    if (out !== parsed) return JSON.stringify(out) ?? 'null';
    // Unchanged as parsed — but JSON.parse keeps only the last of duplicate keys, so the original
    // bytes may still carry an earlier, unfiltered value that another client would read. Such a
    // payload is re-serialised: what leaves is exactly the value that was filtered.
    return findDuplicateKey(text) === null ? null : (JSON.stringify(out) ?? 'null');
  }
  const redacted = redactText(text, plan.detectors);
  return redacted === text ? null : redacted;
}

/** Splits text into lines with their terminators (CRLF, LF or CR). */
function splitLines(text: string): Array<{ content: string; term: string }> {
  const lines: Array<{ content: string; term: string }> = [];
  if (!text.includes('\r')) {
    // The common case: LF only.
    const parts = text.split('\n');
    for (let i = 0; i < parts.length - 1; i++) lines.push({ content: parts[i]!, term: '\n' });
    if (parts[parts.length - 1] !== '') lines.push({ content: parts[parts.length - 1]!, term: '' });
    return lines;
  }
  const re = /\r\n|\r|\n/g;
  let last = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    lines.push({ content: text.slice(last, m.index), term: m[0] });
    last = m.index + m[0].length;
  }
  if (last < text.length) lines.push({ content: text.slice(last), term: '' });
  return lines;
}

class SseFilter implements ResponseFilterCore {
  private readonly buf = new ByteBuffer();
  private scan = 0;
  private lineStart = 0;
  private atStreamStart = true;
  /** Decides the events that repeat one template with a few values changed (raw-json.ts). */
  private readonly frame: RawEventFrame | null;

  constructor(
    private readonly plan: ResponsePlan,
    private readonly codec: TextCodec,
    private readonly limits: StreamFilterLimits,
    private readonly raw: RawJsonCheck | null,
    eventFrames = true,
  ) {
    this.frame = raw !== null && eventFrames ? new RawEventFrame() : null;
  }

  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    // Positions are indexes into `b`: the buffer while a partial event from an earlier chunk is
    // being completed ("carried" bytes), then the chunk itself, so that events are cut from the
    // chunk without copying and a run of unchanged events leaves as one view of it.
    let carried = this.buf.length;
    let b = chunk;
    if (carried > 0) {
      this.buf.append(chunk);
      b = this.buf.view();
    }
    let start = 0; // the current event's first byte
    let runStart = 0; // first byte of unchanged events not emitted yet (direct mode)
    let i = this.scan;
    let lineStart = this.lineStart;
    if (carried === 0) i = lineStart = start = this.skipUnchanged(b, 0);
    // Next LF and CR at or after i (-1: none in the rest of `b`). Native indexOf does the
    // scanning; no byte is searched twice.
    let lf = i < b.length ? b.indexOf(LF, i) : -1;
    let cr = i < b.length ? b.indexOf(CR, i) : -1;
    for (;;) {
      const t = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (t === -1) {
        i = b.length;
        break;
      }
      let termEnd: number;
      if (t === cr) {
        if (t + 1 >= b.length) {
          i = t; // a CRLF may be split across chunks: wait for the next byte
          break;
        }
        termEnd = b[t + 1] === LF ? t + 2 : t + 1;
      } else {
        termEnd = t + 1;
      }
      if (lf !== -1 && lf < termEnd) lf = b.indexOf(LF, termEnd);
      if (cr !== -1 && cr < termEnd) cr = b.indexOf(CR, termEnd);
      if (t !== lineStart) {
        lineStart = i = termEnd; // the end of a field line
        continue;
      }
      // A blank line: the event [start, termEnd) is complete.
      if (carried > 0) {
        // The buffer is reused by later appends, so what leaves it is copied.
        out.push(this.processEvent(b.slice(start, termEnd)));
        start = termEnd;
        if (start < carried) {
          i = lineStart = start;
          continue;
        }
        // The rest lies in the chunk: carry on there.
        start -= carried;
        if (lf !== -1) lf -= carried;
        if (cr !== -1) cr -= carried;
        carried = 0;
        this.buf.clear();
        b = chunk;
        runStart = start;
      } else {
        const event = b.subarray(start, termEnd);
        // skipUnchanged already tried the raw check on this event and it said "don't know".
        const filtered = this.processEvent(event, false);
        if (filtered !== event) {
          if (start > runStart) out.push(b.subarray(runStart, start));
          out.push(filtered);
          runStart = termEnd;
        }
        start = termEnd;
      }
      const next = this.skipUnchanged(b, start);
      if (next !== start) {
        start = next;
        if (lf !== -1 && lf < start) lf = b.indexOf(LF, start);
        if (cr !== -1 && cr < start) cr = b.indexOf(CR, start);
      }
      i = lineStart = start;
    }
    if (carried > 0) {
      this.buf.consume(start);
    } else {
      // A chunk of whole unchanged events (the common case) leaves as itself.
      if (start > runStart) out.push(runStart === 0 && start === b.length ? b : b.subarray(runStart, start));
      if (start < b.length) this.buf.append(b.subarray(start));
    }
    this.scan = i - start;
    this.lineStart = lineStart - start;
    if (this.buf.length > this.limits.maxEventBytes) {
      throw new ResponseFilterLimitError(`event-stream event larger than ${this.limits.maxEventBytes} bytes`);
    }
    return out;
  }

  /**
   * Raw fast path: the end of the run of complete events from `start` that provably stay
   * unchanged, each exactly as push would cut it and processEvent return it (`start` when
   * there is none or the path does not apply).
   */
  private skipUnchanged(b: Uint8Array, start: number): number {
    // The first event goes the full way: it may start with a BOM, which must be stripped.
    const raw = this.raw;
    if (raw === null || this.atStreamStart) return start;
    const frame = this.frame;
    let off = start;
    for (;;) {
      let e = frame === null ? -1 : frame.end(b, off, raw);
      if (e === -1) {
        raw.spanCount = 0; // what learn reads must be this event's
        e = rawEventEnd(b, off, raw, true);
        if (e === -1) return off;
        frame?.learn(b, off, e, raw);
      }
      off = e;
    }
  }

  end(): Uint8Array[] {
    if (this.buf.length === 0) return [];
    const rest = this.buf.view().slice();
    this.buf.clear();
    this.scan = this.lineStart = 0;
    return [this.processEvent(rest)];
  }

  /** `tryRaw` false: the caller already ran the raw check on exactly these bytes. */
  private processEvent(bytes: Uint8Array, tryRaw = true): Uint8Array {
    // The first event goes the full way: it may start with a BOM, which must be stripped.
    if (tryRaw && this.raw !== null && !this.atStreamStart && rawEventEnd(bytes, 0, this.raw, false) !== -1)
      return bytes;
    let text = this.codec.decode(bytes);
    let bom = '';
    if (this.atStreamStart) {
      this.atStreamStart = false;
      // Clients strip a leading BOM before parsing fields; so must we, or "\uFEFFdata:" would
      // not be recognised as data and would escape filtering.
      if (text.startsWith(BOM)) {
        bom = BOM;
        text = text.slice(1);
      }
    }
    // The common event, one data line and LF endings, needs no line bookkeeping.
    const simple = SIMPLE_EVENT.exec(text);
    if (simple) {
      const payload = simple[1]!;
      const filtered = filterPayload(payload, this.plan);
      if (filtered === null) return bytes;
      return this.codec.encode(
        `${bom}${filtered
          .split('\n')
          .map((part) => `data: ${part}`)
          .join('\n')}\n${simple[2]}`,
      );
    }
    const lines = splitLines(text);
    const data: string[] = [];
    let hasComment = false;
    for (const line of lines) {
      if (line.content.startsWith(':')) hasComment = true;
      else if (line.content !== '') {
        const f = parseField(line.content);
        if (f.name === 'data') data.push(f.value);
      }
    }
    const newData = data.length > 0 ? filterPayload(data.join('\n'), this.plan) : null;
    const redactComments = hasComment && this.plan.detectors.length > 0;
    if (newData === null && !redactComments) return bytes;
    let changed = newData !== null;
    let out = bom;
    let dataWritten = false;
    for (const line of lines) {
      const term = line.term === '' ? '' : '\n';
      if (line.content === '') {
        out += term;
      } else if (line.content.startsWith(':')) {
        const value = line.content.slice(1);
        const redacted = redactText(value, this.plan.detectors);
        if (redacted !== value) changed = true;
        out += `:${redacted}${term}`;
      } else if (parseField(line.content).name === 'data') {
        if (dataWritten) continue;
        dataWritten = true;
        const payload = newData ?? data.join('\n');
        out += payload
          .split('\n')
          .map((part) => `data: ${part}`)
          .join('\n');
        out += term;
      } else {
        out += line.content + term;
      }
    }
    return changed ? this.codec.encode(out) : bytes;
  }
}

// `data: payload` plus its LF and, for a complete event, the blank line.
const SIMPLE_EVENT = /^data: ?([^\r\n]*)\n(\n?)$/;

/**
 * The raw fast path for SSE, mirroring push's framing and processEvent's full path on bytes
 * (the codec is ASCII-transparent, and line breaks, ':' and "data" are ASCII).
 *
 * Lines end at CRLF, LF or CR. A line starting with ':' is a comment, which the full path
 * redacts as text: "don't know". A line is a data field when it is "data" or starts with
 * "data:"; its value is the rest after the colon less one leading space. Other fields pass
 * untouched. With no data line and no comment the full path returns the event's bytes; with
 * exactly one data line it does so when filterPayload(value) is null, which rawJsonEnd
 * guarantees when it reads the value as JSON up to a line break or the end (without
 * `lineBreaks` it never reads past a CR or LF, so what it read is the whole line). An empty data
 * value, several data lines (their join is left to the full path) or anything else unusual:
 * "don't know", i.e. -1.
 *
 * framing = false: `b[start, length)` is one event as push cut it (or the rest flushed by end);
 * returns its length when processEvent would return it unchanged, else -1.
 * framing = true: returns the end of the first event at `start` (past the line break of its
 * blank line), exactly where push would cut it, when that event is complete in `b` and
 * processEvent would return it unchanged; else -1. As in push, a CR as the last byte may be
 * half of a CRLF and is not decided.
 */
function rawEventEnd(b: Uint8Array, start: number, check: RawJsonCheck, framing: boolean): number {
  const n = b.length;
  let seenData = false;
  let i = start;
  for (;;) {
    if (i >= n) return framing ? -1 : n;
    const c = b[i];
    if (c === COLON) return -1;
    if (c === LF || c === CR) {
      // A blank line: the end of the event when framing, else skipped like the full path does.
      if (framing) {
        if (c === LF) return i + 1;
        if (i + 1 >= n) return -1;
        return b[i + 1] === LF ? i + 2 : i + 1;
      }
    } else if (
      c === 0x64 &&
      b[i + 1] === 0x61 &&
      b[i + 2] === 0x74 &&
      b[i + 3] === 0x61 &&
      (i + 4 === n || b[i + 4] === COLON || b[i + 4] === LF || b[i + 4] === CR)
    ) {
      if (seenData || i + 4 === n || b[i + 4] !== COLON) return -1;
      seenData = true;
      let v = i + 5;
      if (v < n && b[v] === SPACE) v++;
      i = rawJsonEnd(b, v, n, check, false);
      if (i === -1) return -1;
    } else {
      // Another field: on to its line break.
      while (i < n && b[i] !== LF && b[i] !== CR) i++;
    }
    // At the line break, or the end.
    if (i >= n) return framing ? -1 : n;
    const t = b[i];
    if (t === LF) i++;
    else if (t !== CR) return -1;
    else if (i + 1 < n) i = b[i + 1] === LF ? i + 2 : i + 1;
    else if (framing) return -1;
    else i++;
  }
}

function parseField(content: string): { name: string; value: string } {
  const colon = content.indexOf(':');
  if (colon === -1) return { name: content, value: '' };
  const value = content.slice(colon + 1);
  return { name: content.slice(0, colon), value: value.startsWith(' ') ? value.slice(1) : value };
}

class NdjsonFilter implements ResponseFilterCore {
  private readonly buf = new ByteBuffer();
  private atStreamStart = true;

  constructor(
    private readonly plan: ResponsePlan,
    private readonly codec: TextCodec,
    private readonly limits: StreamFilterLimits,
    private readonly raw: RawJsonCheck | null,
  ) {}

  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    // As in SseFilter.push: a partial line carried from an earlier chunk is completed in the
    // buffer (and copied out), the rest is cut from the chunk, unchanged runs as one view.
    // The carried bytes hold no LF (they were searched), so the search starts in the chunk.
    let b = chunk;
    let nl: number;
    if (this.buf.length > 0) {
      nl = chunk.indexOf(LF);
      if (nl === -1) {
        this.buf.append(chunk);
        this.checkLimit();
        return out;
      }
      this.buf.append(chunk.subarray(0, nl + 1));
      out.push(this.processLine(this.buf.view().slice(), true));
      this.buf.clear();
      b = chunk.subarray(nl + 1);
    }
    let start = 0;
    let runStart = 0;
    for (nl = b.indexOf(LF); nl !== -1; nl = b.indexOf(LF, start)) {
      const line = b.subarray(start, nl + 1);
      const filtered = this.processLine(line, true);
      if (filtered !== line) {
        if (start > runStart) out.push(b.subarray(runStart, start));
        out.push(filtered);
        runStart = nl + 1;
      }
      start = nl + 1;
    }
    if (start > runStart) out.push(runStart === 0 && start === b.length ? b : b.subarray(runStart, start));
    if (start < b.length) this.buf.append(b.subarray(start));
    this.checkLimit();
    return out;
  }

  private checkLimit(): void {
    if (this.buf.length > this.limits.maxLineBytes) {
      throw new ResponseFilterLimitError(`NDJSON line larger than ${this.limits.maxLineBytes} bytes`);
    }
  }

  end(): Uint8Array[] {
    if (this.buf.length === 0) return [];
    const rest = this.buf.view().slice();
    this.buf.clear();
    return [this.processLine(rest, false)];
  }

  private processLine(bytes: Uint8Array, terminated: boolean): Uint8Array {
    // The raw fast path reads the line's content as processLine does below: without its LF and
    // one CR before it. The first line goes the full way (BOM).
    if (this.raw !== null && !this.atStreamStart) {
      let end = terminated ? bytes.length - 1 : bytes.length;
      if (end > 0 && bytes[end - 1] === CR) end--;
      if (rawJsonUnchanged(bytes, 0, end, this.raw)) return bytes;
    }
    let text = this.codec.decode(terminated ? bytes.subarray(0, bytes.length - 1) : bytes);
    let bom = '';
    if (this.atStreamStart) {
      this.atStreamStart = false;
      if (text.startsWith(BOM)) {
        bom = BOM;
        text = text.slice(1);
      }
    }
    const cr = text.endsWith('\r');
    const content = cr ? text.slice(0, -1) : text;
    if (content.trim() === '') return bytes;
    const filtered = filterPayload(content, this.plan, true);
    if (filtered === null) return bytes;
    return this.codec.encode(`${bom}${filtered}${cr ? '\r' : ''}${terminated ? '\n' : ''}`);
  }
}

class TextFilter implements ResponseFilterCore {
  private readonly redactor: TextRedactor;
  private readonly decoder;

  constructor(
    plan: ResponsePlan,
    private readonly codec: TextCodec,
  ) {
    this.redactor = new TextRedactor(plan.detectors);
    this.decoder = codec.streamDecoder();
  }

  push(chunk: Uint8Array): Uint8Array[] {
    const out = this.redactor.push(this.decoder.decode(chunk));
    return out === '' ? [] : [this.codec.encode(out)];
  }

  end(): Uint8Array[] {
    const out = this.redactor.push(this.decoder.end()) + this.redactor.end();
    return out === '' ? [] : [this.codec.encode(out)];
  }
}

/** Holds a whole JSON body (bounded) and filters it at the end. */
class BufferedJsonFilter implements ResponseFilterCore {
  private readonly buf = new ByteBuffer();

  constructor(
    private readonly plan: ResponsePlan,
    private readonly codec: TextCodec,
    private readonly limits: StreamFilterLimits,
    private readonly raw: RawJsonCheck | null,
  ) {}

  push(chunk: Uint8Array): Uint8Array[] {
    this.buf.append(chunk);
    if (this.buf.length > this.limits.maxBufferedBytes) {
      throw new ResponseFilterLimitError(`JSON response larger than ${this.limits.maxBufferedBytes} bytes`);
    }
    return [];
  }

  end(): Uint8Array[] {
    const bytes = this.buf.view().slice();
    this.buf.clear();
    if (bytes.length === 0) return [];
    // A leading BOM is not JSON, so the raw check leaves such a body to the full path.
    if (this.raw !== null && rawJsonUnchanged(bytes, 0, bytes.length, this.raw)) return [bytes];
    let text = this.codec.decode(bytes);
    let bom = '';
    if (text.startsWith(BOM)) {
      bom = BOM;
      text = text.slice(1);
    }
    const filtered = filterPayload(text, this.plan, true);
    return [filtered === null ? bytes : this.codec.encode(bom + filtered)];
  }
}

/** Internal switches, not part of the package API. */
export interface FilterCoreOptions {
  /**
   * false: never take the raw fast path (raw-json.ts). Only for the differential tests and the
   * benchmark, which compare it with the full path; the output is the same either way.
   */
  rawFastPath?: boolean;
  /**
   * false: the event-stream filter reads every event whole, without frames (RawEventFrame).
   * Only for the differential tests and the benchmark; the output is the same either way.
   */
  eventFrames?: boolean;
}

/**
 * The synchronous filter for a response, or null when bytes must pass through untouched
 * (no plan, or a media type the filters leave alone).
 */
export function createFilterCore(
  contentType: string | null | undefined,
  plan: ResponsePlan | null,
  limits: Partial<StreamFilterLimits> = {},
  /** For bodies that are already text: the caller decoded them, whatever the charset said. */
  codecOverride?: TextCodec,
  options: FilterCoreOptions = {},
): ResponseFilterCore | null {
  if (!plan) return null;
  const media = classifyContentType(contentType);
  // Contact records are only ever read as JSON: anything else would pass or be redacted as text
  // with its fields in it (ADR 0045). The other plans are refused by responseFilterability.
  if (plan.contacts && (media.kind === 'binary' || media.kind === 'text')) {
    throw new ResponseUnfilterableError(
      'contact fields must be stripped, and only JSON, NDJSON and event-stream responses can be read',
    );
  }
  if (media.kind === 'binary') return null;
  const codec = codecOverride ?? codecFor(media.charset);
  const l = { ...DEFAULT_STREAM_LIMITS, ...limits };
  // Each core gets its own check: it holds a scratch stack.
  const raw = () =>
    options.rawFastPath !== false && codec.asciiTransparent ? rawJsonCheck(plan, codec.decode) : null;
  switch (media.kind) {
    case 'sse':
      return new SseFilter(plan, codec, l, raw(), options.eventFrames !== false);
    case 'ndjson':
      return new NdjsonFilter(plan, codec, l, raw());
    case 'json':
      return new BufferedJsonFilter(plan, codec, l, raw());
    case 'text':
      return plan.detectors.length > 0 ? new TextFilter(plan, codec) : null;
  }
}

/**
 * Two cores as one: what `first` emits is fed to `second` in the same call. The data plane
 * runs the response filter and the LLM delta redaction this way, in one stream stage: each
 * Node stream stage costs its state and listeners for as long as a response is open, and a
 * hop per chunk.
 */
export function chainFilterCores(first: ResponseFilterCore, second: ResponseFilterCore): ResponseFilterCore {
  const through = (parts: Uint8Array[]): Uint8Array[] => {
    if (parts.length === 0) return [];
    if (parts.length === 1) return second.push(parts[0]!);
    const out: Uint8Array[] = [];
    for (const part of parts) for (const o of second.push(part)) out.push(o);
    return out;
  };
  return {
    push: (chunk) => through(first.push(chunk)),
    // A fresh array: the one `second.push` returned is its own.
    end: () => [...through(first.end()), ...second.end()],
  };
}

/** Runs a core over a whole body: the buffered counterpart of streaming it. */
export function runFilterCore(core: ResponseFilterCore, body: Uint8Array): Uint8Array {
  return join([...core.push(body), ...core.end()]) ?? new Uint8Array(0);
}

/**
 * One buffer of a push's parts. A filter cuts a chunk into a part per rewritten line or event,
 * and tens of thousands of small buffers queued in a stream outlive young-generation GCs and
 * make each one slow (a 10 MiB NDJSON stream of rewritten lines: 130k parts, scavenges of up
 * to 240 ms). Relaying one buffer per chunk keeps them few.
 */
function join(parts: Uint8Array[]): Uint8Array | undefined {
  if (parts.length <= 1) return parts[0];
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

export function toWebTransform(core: ResponseFilterCore): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      const out = join(core.push(chunk));
      if (out) controller.enqueue(out);
    },
    flush(controller) {
      const out = join(core.end());
      if (out) controller.enqueue(out);
    },
  });
}

/**
 * How much the filter works before it lets the event loop run other work, and the slices it
 * works in. A socket that has buffered megabytes delivers them chunk after chunk without a
 * break, and filtering them all at once would stall every other request for as long. So the
 * filter yields after 256 KiB, and also after 10 ms: a chunk may be 128 KiB, and under field
 * rules one took 40 ms to filter on a 2-vCPU VM, so that two of them held every other request of
 * the process for over 100 ms (`bench/hostile-input.ts`). A budget in time holds whatever a line
 * costs. A chunk of one slice or less is relayed as one buffer, whatever the time (see join).
 */
const YIELD_EVERY_BYTES = 256 * 1024;
const TURN_BUDGET_MS = 10;
const SLICE_BYTES = 64 * 1024;
/** A pause this long between two chunks means the event loop went round: the budget restarts. */
const IDLE_MS = 1;

export function toNodeTransform(
  core: ResponseFilterCore,
  beforeChunk?: (chunk: Uint8Array) => void,
): Transform {
  let sinceYield = 0;
  let busySince = 0;
  let lastActive = -Infinity;
  let turn: NodeJS.Immediate | null = null;
  return new Transform({
    transform(chunk: Buffer | Uint8Array | string, _encoding, callback) {
      let bytes: Uint8Array;
      try {
        bytes = typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk;
        beforeChunk?.(bytes);
      } catch (err) {
        callback(err as Error);
        return;
      }
      const started = performance.now();
      if (started - lastActive > IDLE_MS) busySince = started;
      let offset = 0;
      // What the slices of one run give is relayed as one buffer (see join).
      const out: Uint8Array[] = [];
      const relay = () => {
        const joined = join(out.splice(0));
        if (joined) this.push(joined);
      };
      const step = (): void => {
        try {
          while (offset < bytes.length) {
            const end = Math.min(bytes.length, offset + SLICE_BYTES);
            const slice = offset === 0 && end === bytes.length ? bytes : bytes.subarray(offset, end);
            for (const part of core.push(slice)) out.push(part);
            offset = end;
            sinceYield += slice.length;
            lastActive = performance.now();
            if (sinceYield < YIELD_EVERY_BYTES && lastActive - busySince < TURN_BUDGET_MS) continue;
            sinceYield = 0;
            relay();
            // The rest, or the next chunk, waits for the next turn, when other work has had its go.
            turn = setImmediate(() => {
              turn = null;
              busySince = lastActive = performance.now();
              if (offset < bytes.length) step();
              else callback();
            });
            return;
          }
          relay();
          callback();
        } catch (err) {
          callback(err as Error);
        }
      };
      step();
    },
    destroy(err, callback) {
      if (turn) clearImmediate(turn);
      callback(err);
    },
    flush(callback) {
      try {
        const out = join(core.end());
        if (out) this.push(out);
        callback();
      } catch (err) {
        callback(err as Error);
      }
    },
  });
}
