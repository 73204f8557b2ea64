/**
 * Redaction across the text deltas of an LLM event stream (ADR 0043).
 *
 * The stream filters redact each SSE event on its own, but a model emits text a few characters
 * per event: an address arrives as `alice@exa` + `mple.com`, which no single event shows. This
 * stage follows each provider's text deltas (per choice, Responses API part (ADR 0075), content
 * block or candidate), holds back the tail of the text that could still become part of a match
 * — the last word, and a run of digits and separators before it (phone, card, SSN and IP shapes
 * span spaces, dashes and dots) with the word that run is glued to (`ACCT-1234`) — and emits
 * it, redacted, in a later event, or in one synthetic delta event before the text ends. The
 * agent's SDK accumulates the same text, shifted by at most MAX_HELD characters.
 *
 * Bounded and linear: an event larger than MAX_EVENT_BYTES, or anything that is not one of the
 * provider's JSON events, passes unchanged (the per-event filter after this stage still applies
 * to it); held text never exceeds MAX_HELD characters per slot.
 *
 * The data plane runs this stage before the per-event filter, on the provider's own text: a
 * delta that is a match on its own (`ce@example.com` after `ali`) would otherwise reach it as a
 * marker already, and the start of the match (`ali`) would go out as plain text.
 */
import type { Transform } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Detector } from './pii-detectors.js';
import { redactText } from './redaction.js';
import { toNodeTransform, type ResponseFilterCore } from './stream-filters.js';

export type LlmStreamProtocol = 'openai' | 'anthropic' | 'gemini';

/** Longest tail held back per slot; a match longer than this across events may be missed. */
export const MAX_HELD = 256;
const MAX_EVENT_BYTES = 1024 * 1024;

/** Where the next safe emission point is: before the tail that could still grow into a match. */
export function holdBackFrom(text: string): number {
  let i = text.length;
  while (i > 0 && !isSpace(text.charCodeAt(i - 1))) i--;
  // Until what is held starts after no digit run: a run may be glued to a word that itself
  // follows another run (`+1 (415) 555-2671","to":"+1 ` in a tool call's JSON), and cutting
  // between them would split the phone number. Each round moves `i` back, so this is linear.
  for (;;) {
    let j = i;
    let digits = false;
    while (j > 0 && isNumberish(text.charCodeAt(j - 1))) {
      if (isDigit(text.charCodeAt(j - 1))) digits = true;
      j--;
    }
    if (!digits) break;
    // ...and the word the run is glued to: `ACCT-1234` is one match to a custom pattern.
    if (!isSpace(text.charCodeAt(j))) while (j > 0 && !isSpace(text.charCodeAt(j - 1))) j--;
    if (j === i) break;
    i = j;
  }
  return Math.max(i, text.length - MAX_HELD);
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}
function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}
/** Characters inside the built-in numeric shapes: digits, spaces, `()+-.`. */
function isNumberish(c: number): boolean {
  return isDigit(c) || c === 0x20 || c === 0x28 || c === 0x29 || c === 0x2b || c === 0x2d || c === 0x2e;
}

/** Per-slot held text; `emit` returns what may go out now, `flush` the rest. */
class DeltaRedactor {
  private held = new Map<string, string>();
  constructor(private readonly detectors: readonly Detector[]) {}

  emit(slot: string, delta: string): string {
    const text = (this.held.get(slot) ?? '') + delta;
    const cut = holdBackFrom(text);
    this.held.set(slot, text.slice(cut));
    return cut === 0 ? '' : redactText(text.slice(0, cut), this.detectors);
  }

  flush(slot: string): string {
    const rest = this.held.get(slot) ?? '';
    this.held.delete(slot);
    return rest === '' ? '' : redactText(rest, this.detectors);
  }

  slots(): string[] {
    return [...this.held.keys()].filter((k) => this.held.get(k) !== '');
  }
}

interface SseEvent {
  /** Lines other than `data:` (event, id, retry, comments), verbatim. */
  other: string[];
  data: string | null;
}

function parseEvent(block: string): SseEvent {
  // The common shape, one `data:` line and nothing else, without splitting.
  if (block.startsWith('data: ') && block.indexOf('\n') === -1 && block.indexOf('\r') === -1) {
    return { other: [], data: block.slice(6) };
  }
  const other: string[] = [];
  const data: string[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
    else other.push(line);
  }
  return { other, data: data.length ? data.join('\n') : null };
}

function serialise(e: SseEvent, data: unknown): string {
  if (e.other.length === 0) return `data: ${JSON.stringify(data)}\n\n`;
  const lines = [...e.other.filter((l) => l !== ''), `data: ${JSON.stringify(data)}`];
  return `${lines.join('\n')}\n\n`;
}

/**
 * The leftmost blank line (`/\r?\n\r?\n/`) at or after `from`, the end of an SSE event. Found with
 * indexOf, which costs an eighth of that regex per event.
 */
export function findBlankLine(text: string, from: number): { start: number; end: number } | null {
  for (let i = text.indexOf('\n', from); i !== -1; i = text.indexOf('\n', i + 1)) {
    const next = text.charCodeAt(i + 1);
    let end = -1;
    if (next === 0x0a) end = i + 2;
    else if (next === 0x0d && text.charCodeAt(i + 2) === 0x0a) end = i + 3;
    if (end !== -1) return { start: i > from && text.charCodeAt(i - 1) === 0x0d ? i - 1 : i, end };
  }
  return null;
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One protocol's view of an event: rewrites its deltas in place; returns events to send before it. */
interface Protocol {
  /**
   * The event's output when it is the protocol's common text delta, read from its text alone;
   * undefined sends it down the parsing path. See "The raw path" below.
   */
  rewriteRaw?(block: string, r: DeltaRedactor): string | undefined;
  rewrite(event: SseEvent, data: Json, r: DeltaRedactor): { before: string[]; changed: boolean };
  /** Synthetic events carrying held text at the end of the stream. */
  finish(r: DeltaRedactor): string[];
}

/*
 * The raw path (ADR 0064). Nearly every event of a stream is one text delta, and parsing and
 * re-serialising each one cost more than a bare proxy spends on the whole event. An event whose
 * text matches one of the patterns below is rewritten in place instead: the patterns accept
 * only valid JSON (RFC 8259 strings and numbers, no whitespace) of exactly the shape the parsing
 * path rewrites, with the delta's key at a fixed place and no other member that could stand for
 * it (a key that repeats `choices` is refused: JSON.parse would keep the last one). The delta's
 * string literal is decoded, given to the same `DeltaRedactor.emit` call the parsing path
 * makes, and replaced by the JSON of the result when that differs. What the agent parses is
 * then the parsing path's event; only an unchanged event keeps its original bytes. Both
 * patterns are anchored and linear: inside a string or number every choice is decided by the
 * next character, and a member loop ends on the fixed 9-character look-ahead for `"choices"`,
 * so a failed match gives back at most one short step per member. A test runs both paths on
 * the same streams and compares the parsed events.
 */
const JSON_STRING = String.raw`"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"`;
const JSON_NUMBER = String.raw`-?(?:0|[1-9]\d{0,30})(?:\.\d{1,30})?(?:[eE][+-]?\d{1,5})?`;
const JSON_SCALAR = `(?:${JSON_STRING}|${JSON_NUMBER}|null|true|false)`;
/** A top-level member with a scalar value, never named `choices`. */
const SCALAR_MEMBER = `"(?!choices")[A-Za-z_]{1,64}":${JSON_SCALAR}`;
const INDEX = String.raw`(0|[1-9]\d{0,8})`;

/*
 * Group 1 is everything before the delta's literal (the patterns are anchored, so its length is
 * the literal's offset), group 2 the choice or block index, group 3 the literal. A prefix group
 * rather than the `d` flag: building match indices cost a tenth of this stage's CPU.
 */
const OPENAI_DELTA = new RegExp(
  String.raw`^(data: \{(?:${SCALAR_MEMBER},)*"choices":\[\{"index":${INDEX},"delta":\{(?:"role":"assistant",)?"content":)(${JSON_STRING})(?:,"refusal":null)?\},(?:"logprobs":null,)?"finish_reason":null\}\](?:,${SCALAR_MEMBER})*\}$`,
);
const ANTHROPIC_DELTA = new RegExp(
  String.raw`^(event: content_block_delta\r?\ndata: \{"type":"content_block_delta","index":${INDEX},"delta":\{"type":"text_delta","text":)(${JSON_STRING})\}\}$`,
);

/** The block with the delta literal at [from, to) rewritten by `emit`; the event's output. */
function rewriteLiteral(block: string, from: number, to: number, emit: (text: string) => string): string {
  const literal = block.slice(from, to);
  const text = literal.includes('\\') ? (JSON.parse(literal) as string) : literal.slice(1, -1);
  const out = emit(text);
  if (out === text) return `${block}\n\n`;
  return `${block.slice(0, from)}${JSON.stringify(out)}${block.slice(to)}\n\n`;
}

/** One JSON string literal, matched where `lastIndex` points. */
const STICKY_LITERAL = new RegExp(JSON_STRING, 'y');

/**
 * The delta events of one stream differ only in their literal: the text before it (id, model,
 * index) and after it repeat. A pattern above is prefix · literal · suffix, three parts matched
 * independently, so once it has matched a block, another block made of the same prefix, one
 * JSON string literal and the same suffix is in the pattern's language too, with the same
 * groups. Checking that costs two comparisons and the literal's scan instead of the whole
 * pattern, which was a quarter of this stage's CPU.
 */
class RawFrame {
  private prefix = '';
  private suffix = '';
  private slot = '';

  constructor(
    private readonly pattern: RegExp,
    private readonly slotPrefix: string,
  ) {}

  /** The delta literal's [from, to) and slot, when the block is a delta event of the pattern. */
  locate(block: string): { from: number; to: number; slot: string } | undefined {
    const from = this.prefix.length;
    const to = block.length - this.suffix.length;
    // substring and ===, not startsWith: V8's startsWith compares a long prefix several times slower.
    if (
      from > 0 &&
      to > from &&
      block.substring(0, from) === this.prefix &&
      block.substring(to) === this.suffix
    ) {
      STICKY_LITERAL.lastIndex = from;
      if (STICKY_LITERAL.test(block) && STICKY_LITERAL.lastIndex === to) {
        return { from, to, slot: this.slot };
      }
    }
    const m = this.pattern.exec(block);
    if (!m) return undefined;
    const start = m[1]!.length;
    const end = start + m[3]!.length;
    this.prefix = detached(block.slice(0, start));
    this.suffix = detached(block.slice(end));
    this.slot = `${this.slotPrefix}${m[2]!}`;
    return { from: start, to: end, slot: this.slot };
  }

  /** An event of the frame (with an empty delta), once one has matched. */
  sample(): string {
    return `${this.prefix}""${this.suffix}`;
  }
}

/**
 * A copy of `s` that does not keep the string it was cut from alive: V8 makes a slice a view
 * of its parent, here the whole decoded chunk, for as long as a stream's stage holds it.
 */
function detached(s: string): string {
  return JSON.parse(JSON.stringify(s)) as string;
}

/**
 * The Responses API's text deltas (`POST /v1/responses`, stream: true): each kind of delta
 * event, the event that closes its text, and the index that tells its parts apart within an
 * output item.
 */
const RESPONSES_DELTAS: Record<string, { done: string; index: 'content_index' | 'summary_index' | null }> = {
  'response.output_text.delta': { done: 'response.output_text.done', index: 'content_index' },
  // A function call's JSON arguments: one part per output item.
  'response.function_call_arguments.delta': { done: 'response.function_call_arguments.done', index: null },
  'response.refusal.delta': { done: 'response.refusal.done', index: 'content_index' },
  'response.reasoning_text.delta': { done: 'response.reasoning_text.done', index: 'content_index' },
  'response.reasoning_summary_text.delta': {
    done: 'response.reasoning_summary_text.done',
    index: 'summary_index',
  },
};
const RESPONSES_DONE = new Map(Object.entries(RESPONSES_DELTAS).map(([delta, d]) => [d.done, delta]));
const RESPONSES_KINDS = Object.keys(RESPONSES_DELTAS);
/** Events after which no more text of the response follows. */
const RESPONSES_END = new Set(['response.completed', 'response.incomplete', 'response.failed', 'error']);

/** What a synthetic Responses delta needs to look like the slot's own. */
interface ResponsesSlot {
  type: string;
  itemId: unknown;
  outputIndex: number;
  index: number;
}

const isIndex = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * The Responses API's half of the OpenAI protocol. Its deltas are held and redacted like chat
 * deltas (slots `r<kind>:<output>:<index>`); a slot's held rest goes out in one synthetic delta
 * of the same kind just before the event that closes its text (its `.done`, or the end of the
 * response). The `.done` events and the final response carry the whole text in one string,
 * which the per-event filter after this stage redacts.
 */
function openAiResponses() {
  const slots = new Map<string, ResponsesSlot>();
  const synthetic = (slot: string, text: string, sequence: unknown): string => {
    const m = slots.get(slot)!;
    const indexField = RESPONSES_DELTAS[m.type]!.index;
    const data = {
      type: m.type,
      // The number of the event it precedes: the SDKs accumulate by type and only read it to
      // resume a stream after a given event.
      ...(typeof sequence === 'number' && { sequence_number: sequence }),
      item_id: m.itemId,
      output_index: m.outputIndex,
      ...(indexField && { [indexField]: m.index }),
      delta: text,
      ...(m.type === 'response.output_text.delta' && { logprobs: [] }),
    };
    return `event: ${m.type}\ndata: ${JSON.stringify(data)}\n\n`;
  };
  const flush = (slot: string, r: DeltaRedactor, sequence: unknown): string[] => {
    const rest = r.flush(slot);
    const out = rest === '' ? [] : [synthetic(slot, rest, sequence)];
    slots.delete(slot);
    return out;
  };
  const finish = (r: DeltaRedactor, sequence?: unknown): string[] =>
    [...slots.keys()].flatMap((slot) => flush(slot, r, sequence));
  return {
    /** The event's rewrite (the caller has checked it is a Responses event). */
    rewrite(data: Json & { type: string }, r: DeltaRedactor): { before: string[]; changed: boolean } {
      const type = data.type;
      const kind = RESPONSES_DELTAS[type];
      if (kind) {
        const outputIndex = data.output_index;
        const index = kind.index === null ? 0 : data[kind.index];
        if (typeof data.delta !== 'string' || !isIndex(outputIndex) || !isIndex(index)) {
          return { before: [], changed: false };
        }
        const slot = `r${RESPONSES_KINDS.indexOf(type)}:${outputIndex}:${index}`;
        if (!slots.has(slot)) slots.set(slot, { type, itemId: data.item_id, outputIndex, index });
        data.delta = r.emit(slot, data.delta);
        return { before: [], changed: true };
      }
      const deltaType = RESPONSES_DONE.get(type);
      if (deltaType) {
        const outputIndex = data.output_index;
        const indexField = RESPONSES_DELTAS[deltaType]!.index;
        const index = indexField === null ? 0 : data[indexField];
        const slot = `r${RESPONSES_KINDS.indexOf(deltaType)}:${String(outputIndex)}:${String(index)}`;
        return { before: slots.has(slot) ? flush(slot, r, data.sequence_number) : [], changed: false };
      }
      if (RESPONSES_END.has(type)) return { before: finish(r, data.sequence_number), changed: false };
      return { before: [], changed: false };
    },
    finish,
  };
}

/** A Responses API event (its type names it), not a chat chunk. */
const isResponsesEvent = (data: Json): data is Json & { type: string } =>
  typeof data.type === 'string' && (data.type.startsWith('response.') || data.type === 'error');
/** Slots of the Responses API's parts (`r…`), not of chat choices (`c…`). */
const isResponsesSlot = (slot: string) => slot.startsWith('r');

/**
 * A chat choice's tool calls: each call's JSON arguments (`function.arguments`, streamed in
 * pieces) is held and redacted as text in slot `<choice>/<call index>`. True when any changed.
 */
function rewriteToolCalls(choiceSlot: string, calls: unknown[], r: DeltaRedactor): boolean {
  let changed = false;
  for (const call of calls) {
    if (!isObj(call) || !isIndex(call.index) || !isObj(call.function)) continue;
    if (typeof call.function.arguments !== 'string') continue;
    call.function.arguments = r.emit(`${choiceSlot}/${call.index}`, call.function.arguments);
    changed = true;
  }
  return changed;
}

/** The held rest of a choice's tool calls, as tool-call deltas an SDK appends to each call. */
function flushToolCalls(choiceSlot: string, r: DeltaRedactor): Json[] {
  return r
    .slots()
    .filter((slot) => slot.startsWith(`${choiceSlot}/`))
    .map((slot) => ({
      index: Number(slot.slice(choiceSlot.length + 1)),
      function: { arguments: r.flush(slot) },
    }));
}

function openAi(): Protocol {
  // Made for the first Responses event only: most streams are chat chunks, and each open
  // stream keeps its stage's state for as long as it runs (bench/llm-proxy.ts memory).
  let responses: ReturnType<typeof openAiResponses> | null = null;
  let template: Json = {};
  /**
   * Whether the latest chunk took the raw path: its id, object, created and model are then
   * those of the frame's text (every event of a frame has the same), read only if needed.
   */
  let templateInFrame = false;
  const currentTemplate = (): Json => {
    if (templateInFrame) {
      const data = JSON.parse(frame.sample().slice('data: '.length)) as Json;
      template = { id: data.id, object: data.object, created: data.created, model: data.model };
      templateInFrame = false;
    }
    return template;
  };
  const frame = new RawFrame(OPENAI_DELTA, 'c');
  return {
    rewriteRaw(block, r) {
      const at = frame.locate(block);
      if (!at) return undefined;
      templateInFrame = true;
      return rewriteLiteral(block, at.from, at.to, (text) => r.emit(at.slot, text));
    },
    rewrite(_e, data, r) {
      if (isResponsesEvent(data)) return (responses ??= openAiResponses()).rewrite(data, r);
      const choices = data.choices;
      if (!Array.isArray(choices)) return { before: [], changed: false };
      template = { id: data.id, object: data.object, created: data.created, model: data.model };
      templateInFrame = false;
      let changed = false;
      for (const ch of choices) {
        if (!isObj(ch)) continue;
        const slot = `c${String(ch.index ?? 0)}`;
        const delta = isObj(ch.delta) ? ch.delta : null;
        const content = delta && typeof delta.content === 'string' ? delta.content : null;
        const finished = ch.finish_reason !== null && ch.finish_reason !== undefined;
        if (delta && Array.isArray(delta.tool_calls) && rewriteToolCalls(slot, delta.tool_calls, r)) {
          changed = true;
        }
        if (content === null && !finished) continue;
        let out = content === null ? '' : r.emit(slot, content);
        if (finished) out += r.flush(slot);
        if (delta && (content !== null || out !== '')) {
          delta.content = out;
          changed = true;
        } else if (!delta && out !== '') {
          ch.delta = { content: out };
          changed = true;
        }
        if (finished) {
          const rest = flushToolCalls(slot, r);
          if (rest.length > 0) {
            const d = isObj(ch.delta) ? ch.delta : (ch.delta = {});
            d.tool_calls = [...(Array.isArray(d.tool_calls) ? d.tool_calls : []), ...rest];
            changed = true;
          }
        }
      }
      return { before: [], changed };
    },
    finish(r) {
      const choices = new Set(
        r
          .slots()
          .filter((slot) => !isResponsesSlot(slot))
          .map((slot) => slot.split('/')[0]!),
      );
      const chunks = [...choices].map((slot) => {
        const index = Number(slot.slice(1));
        const toolCalls = flushToolCalls(slot, r);
        const delta = {
          content: r.flush(slot),
          ...(toolCalls.length > 0 && { tool_calls: toolCalls }),
        };
        const chunk = { ...currentTemplate(), choices: [{ index, delta, finish_reason: null }] };
        return `data: ${JSON.stringify(chunk)}\n\n`;
      });
      return [...(responses?.finish(r) ?? []), ...chunks];
    },
  };
}

function anthropic(): Protocol {
  // Slot `b<index>` holds a text block's text, `j<index>` a tool_use block's JSON input.
  const synthetic = (slot: string, text: string) => {
    const index = Number(slot.slice(1));
    const delta =
      slot[0] === 'j' ? { type: 'input_json_delta', partial_json: text } : { type: 'text_delta', text };
    return `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index, delta })}\n\n`;
  };
  const frame = new RawFrame(ANTHROPIC_DELTA, 'b');
  return {
    rewriteRaw(block, r) {
      const at = frame.locate(block);
      if (!at) return undefined;
      return rewriteLiteral(block, at.from, at.to, (text) => r.emit(at.slot, text));
    },
    rewrite(_e, data, r) {
      const index = typeof data.index === 'number' ? data.index : 0;
      const slot = `b${index}`;
      if (data.type === 'content_block_delta' && isObj(data.delta) && data.delta.type === 'text_delta') {
        const text = typeof data.delta.text === 'string' ? data.delta.text : '';
        data.delta.text = r.emit(slot, text);
        return { before: [], changed: true };
      }
      if (
        data.type === 'content_block_delta' &&
        isObj(data.delta) &&
        data.delta.type === 'input_json_delta' &&
        typeof data.delta.partial_json === 'string'
      ) {
        data.delta.partial_json = r.emit(`j${index}`, data.delta.partial_json);
        return { before: [], changed: true };
      }
      if (data.type === 'content_block_stop') {
        const before = [slot, `j${index}`].flatMap((s) => {
          const rest = r.flush(s);
          return rest === '' ? [] : [synthetic(s, rest)];
        });
        return { before, changed: false };
      }
      if (data.type === 'message_delta' || data.type === 'message_stop') {
        const before = r.slots().map((s) => synthetic(s, r.flush(s)));
        return { before, changed: false };
      }
      return { before: [], changed: false };
    },
    finish(r) {
      return r.slots().map((s) => synthetic(s, r.flush(s)));
    },
  };
}

function gemini(): Protocol {
  return {
    rewrite(_e, data, r) {
      const candidates = data.candidates;
      if (!Array.isArray(candidates)) return { before: [], changed: false };
      let changed = false;
      for (const [pos, cand] of candidates.entries()) {
        if (!isObj(cand)) continue;
        const slot = `g${String(cand.index ?? pos)}`;
        const content = isObj(cand.content) ? cand.content : null;
        const parts = content && Array.isArray(content.parts) ? content.parts : [];
        let last: Json | null = null;
        for (const part of parts) {
          if (isObj(part) && typeof part.text === 'string' && part.thought !== true) {
            part.text = r.emit(slot, part.text);
            last = part;
            changed = true;
          }
        }
        if (cand.finishReason !== undefined && cand.finishReason !== null) {
          const rest = r.flush(slot);
          if (rest !== '') {
            if (last) last.text = `${String(last.text)}${rest}`;
            else if (content) content.parts = [...parts, { text: rest }];
            else cand.content = { role: 'model', parts: [{ text: rest }] };
            changed = true;
          }
        }
      }
      return { before: [], changed };
    },
    finish(r) {
      return r.slots().map((slot) => {
        const index = Number(slot.slice(1));
        const data = {
          candidates: [{ index, content: { role: 'model', parts: [{ text: r.flush(slot) }] } }],
        };
        return `data: ${JSON.stringify(data)}\n\n`;
      });
    },
  };
}

const PROTOCOLS: Record<LlmStreamProtocol, () => Protocol> = { openai: openAi, anthropic, gemini };

/**
 * The stage for one stream. Input and output are SSE bytes (UTF-8); events are cut at blank
 * lines, so a chunk may end anywhere. A filter core, so the data plane runs it in the same
 * stream stage as the response filter before it (one stage per response, not one per step).
 */
export function createLlmStreamRedactionCore(
  protocol: LlmStreamProtocol,
  detectors: readonly Detector[],
  /** `rawPath: false` parses every event (the tests compare both paths). */
  options: { rawPath?: boolean } = {},
): ResponseFilterCore {
  const r = new DeltaRedactor(detectors);
  const p = PROTOCOLS[protocol]();
  const rewriteRaw = options.rawPath === false ? undefined : p.rewriteRaw;
  // StringDecoder, not TextDecoder: a streaming TextDecoder call costs more than the rest of
  // the work on a one-event chunk. Both replace invalid bytes with U+FFFD, and what is scanned
  // is what is sent.
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let searchFrom = 0;
  // Inside an event that outgrew MAX_EVENT_BYTES: passed on as it arrives, unread, until it
  // ends. Nothing before this stage bounds an event, so it must not wait for the blank line.
  let oversized = false;

  const handle = (block: string): string => {
    if (block.length > MAX_EVENT_BYTES) return `${block}\n\n`;
    const raw = rewriteRaw?.(block, r);
    if (raw !== undefined) return raw;
    const event = parseEvent(block);
    if (event.data === null) return `${block}\n\n`;
    if (event.data.trim() === '[DONE]') return `${p.finish(r).join('')}${block}\n\n`;
    let data: unknown;
    try {
      data = JSON.parse(event.data);
    } catch {
      return `${block}\n\n`;
    }
    if (!isObj(data)) return `${block}\n\n`;
    const { before, changed } = p.rewrite(event, data, r);
    return before.join('') + (changed ? serialise(event, data) : `${block}\n\n`);
  };
  const bytes = (text: string): Uint8Array[] => (text === '' ? [] : [Buffer.from(text, 'utf8')]);

  return {
    push(chunk) {
      pending += decoder.write(chunk);
      let out = '';
      // Events are cut at each blank line; `start` walks the text and it is sliced once.
      let start = 0;
      for (;;) {
        const blank = findBlankLine(pending, Math.max(start, searchFrom - 3));
        if (!blank) break;
        out += oversized ? pending.slice(start, blank.end) : handle(pending.slice(start, blank.start));
        oversized = false;
        start = blank.end;
      }
      if (start > 0) pending = pending.slice(start);
      if (oversized || pending.length > MAX_EVENT_BYTES) {
        // The last characters stay: a blank line may begin in them.
        out += pending.slice(0, -3);
        pending = pending.slice(-3);
        oversized = true;
      }
      searchFrom = pending.length;
      return bytes(out);
    },
    end() {
      pending += decoder.end();
      // An event cut off by the end is ended, as handle() ends one, so that no synthetic event
      // from finish() joins it.
      let out = oversized ? `${pending}\n\n` : pending.trim() === '' ? '' : handle(pending);
      pending = '';
      out += p.finish(r).join('');
      return bytes(out);
    },
  };
}

/** The stage as a Node stream of its own (tests and benchmarks drive it alone). */
export function createLlmStreamRedaction(
  protocol: LlmStreamProtocol,
  detectors: readonly Detector[],
  options: { rawPath?: boolean } = {},
): Transform {
  return toNodeTransform(createLlmStreamRedactionCore(protocol, detectors, options));
}
