/**
 * The raw fast path (raw-json.ts and its use in stream-filters.ts) must be invisible: for every
 * input, the output with it equals the output of the full parse path byte for byte, and
 * streaming still equals buffering for every chunking.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import type { RedactionSpec } from '@vlt/contracts';
import { planResponse } from './compile.js';
import { ResponseFilterLimitError } from './errors.js';
import type { Detector } from './pii-detectors.js';
import { builtInClues } from './pii-detectors.js';
import type { RawJsonCheck } from './raw-json.js';
import { RAW_MAX_DEPTH, RawEventFrame, rawJsonCheck, rawJsonEnd, rawJsonUnchanged } from './raw-json.js';
import type { ResponsePlan } from './response-filter.js';
import { MAX_JSON_DEPTH, filterJsonValue } from './response-filter.js';
import type { ResponseFilterCore } from './stream-filters.js';
import { createFilterCore, runFilterCore } from './stream-filters.js';
import { runtime } from './test-fixtures.js';

const enc = new TextEncoder();
const utf8 = new TextDecoder();
const decode = (b: Uint8Array) => utf8.decode(b);
const ROUTE = { method: 'GET', path: '/v1/stream' };
const KINDS = ['email', 'phone', 'ssn', 'credit_card', 'ip_address'] as const;
type Kind = (typeof KINDS)[number];

/** A plan of built-in redactions, spread over one or two rules as given. */
function builtInPlan(rules: ReadonlyArray<readonly Kind[]>, customs: readonly string[] = []): ResponsePlan {
  const rt = runtime({
    rules: {
      response: rules.map((kinds, i) => ({
        label: `r${i}`,
        match: {},
        filter: {
          redact: [
            ...kinds.map((type) => ({ type }) as RedactionSpec),
            // Custom patterns go with the first rule, after its built-ins.
            ...(i === 0
              ? customs.map((pattern) => ({ type: 'custom' as const, pattern, replacement: '[C]' }))
              : []),
          ],
        },
      })),
    },
  });
  return planResponse(rt, ROUTE)!;
}

/**
 * Custom patterns the generated values can hit: a literal prefix, anchors (which see the
 * value's own ends, not the JSON around it), a word boundary, case folding, an integer's text,
 * one whose matches are all empty (they are skipped), and one matching a quote or colon
 * (which a custom pattern might, unlike the JSON around a value).
 */
const CUSTOM_PATTERNS = [
  'sk-[A-Za-z0-9]{4,}',
  '^tok',
  '[0-9]{3}$',
  '\\bchat\\b',
  '(?i)MODEL',
  '^17[0-9]*$',
  '\\b',
  '"|:',
] as const;

/**
 * The same plan with detectors that count property reads. The full path always reads them
 * (redactJsonValue asks every detector's name); the fast path never does (it reads the
 * built-in brand once, when the filter is made, and that is a symbol).
 */
function spied(plan: ResponsePlan): { plan: ResponsePlan; work: () => number } {
  let reads = 0;
  const detectors = plan.detectors.map((d) =>
    // Custom patterns are run by both paths; the built-ins are what the fast path must not need.
    builtInClues(d) === null
      ? d
      : (new Proxy(d, {
          get(target, prop, receiver) {
            if (typeof prop === 'string') reads++;
            return Reflect.get(target, prop, receiver) as unknown;
          },
        }) as Detector),
  );
  return { plan: { ...plan, detectors }, work: () => reads };
}

const planArb = fc
  .tuple(fc.subarray([...KINDS], { minLength: 1 }), fc.subarray([...KINDS]))
  .chain(([a, b]) =>
    fc
      .tuple(fc.shuffledSubarray(a, { minLength: a.length }), fc.constant(b))
      .map(([x, y]) => (y.length ? [x, y] : [x])),
  )
  .chain((rules) =>
    fc
      .subarray([...CUSTOM_PATTERNS], { maxLength: 2 })
      .chain((customs) => fc.constantFrom(builtInPlan(rules), builtInPlan(rules, customs))),
  );

// ----------------------------------------------------------------- random JSON texts

type Esc = 'none' | 'at' | 'digits' | 'all';
type Node =
  | { k: 'lit'; text: string }
  | { k: 'str'; s: string; esc: Esc }
  | { k: 'arr'; items: Node[] }
  | { k: 'obj'; members: Array<[{ k: 'str'; s: string; esc: Esc }, Node]> };

const piiPiece = fc.constantFrom(
  'jane.doe@example.com',
  'a@b.io',
  '+1 (415) 555-2671',
  '415-555-2671',
  '+49 30 1234567',
  '4111 1111 1111 1111',
  '4111111111111111',
  '078-05-1120',
  '10.0.0.1',
  '2001:db8::1',
  'fe80::1',
  'v1.2.3',
  'model-2024-05-13',
  'chatcmpl-9xKq3Rj2mZ',
  ' token37',
  'token',
  'sk-Ab12cd',
  'chat',
  'chat.completion.chunk',
  'Model',
  '1717495200',
  '12:30',
  'C:\\dir',
  '"quoted"',
  'line\nbreak',
  '\t',
  '\u0001',
  'ünï',
  '😀',
  '\uFEFF',
  '@',
  '+',
  ':',
  '.',
  '0',
  '123456',
  '1234567',
  '123456789',
  '1234567890',
  '',
);
const strArb = fc.oneof(
  piiPiece,
  fc.array(piiPiece, { maxLength: 4 }).map((p) => p.join('')),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.string({ unit: 'binary', maxLength: 6 }), // lone surrogates too
  fc.stringMatching(/^[a-z0-9@:+. -]{0,20}$/),
);
const strNode = fc.record({
  k: fc.constant('str' as const),
  s: strArb,
  esc: fc.constantFrom<Esc>('none', 'none', 'none', 'at', 'digits', 'all'),
});
// Number tokens as upstreams write them, including spellings JSON.stringify never produces.
const numberText = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => JSON.stringify(x)),
  fc.constantFrom(
    '0',
    '-0',
    '1.0',
    '99999999999',
    '99999999999.999',
    '100000000000',
    '999999999999',
    '1000000000000',
    '4111111111111111',
    '-4111111111111111',
    '4111111111111111.0',
    '4.111111111111111e15',
    '4.111111111111111E+15',
    '411111111111111100000e-5',
    '1e3',
    '1E-3',
    '1e-0',
    '12345678901.5e-2',
    '1e21',
    '1717495200',
    '17.0',
    '170e-1',
  ),
);
const jsonTree: fc.Arbitrary<Node> = fc.letrec<{ value: Node }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom('null', 'true', 'false').map((text) => ({ k: 'lit' as const, text })),
    numberText.map((text) => ({ k: 'lit' as const, text })),
    strNode,
    fc.array(tie('value'), { maxLength: 4 }).map((items) => ({ k: 'arr' as const, items })),
    fc
      .array(fc.tuple(strNode, tie('value')), { maxLength: 4 })
      .map((members) => ({ k: 'obj' as const, members })),
  ),
})).value;

const hex4 = (c: number, upper: boolean) => {
  const h = c.toString(16).padStart(4, '0');
  return `\\u${upper ? h.toUpperCase() : h}`;
};

/** A JSON string literal; `esc` spells some characters as \uXXXX escapes. */
function literal(s: string, esc: Esc): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i]!;
    if (
      (esc === 'at' && ch === '@') ||
      (esc === 'digits' && c >= 0x30 && c <= 0x39) ||
      (esc === 'all' && c < 0x7f && /[A-Za-z0-9@:+. -]/.test(ch))
    )
      out += hex4(c, i % 2 === 0);
    else if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) out += JSON.stringify(ch).slice(1, -1);
    else out += ch;
  }
  return `${out}"`;
}

/** Serialises a tree; `ws` is cycled through for the whitespace around every token. */
function serialize(node: Node, ws: readonly string[]): string {
  let n = 0;
  const w = () => ws[n++ % ws.length]!;
  const go = (x: Node): string => {
    switch (x.k) {
      case 'lit':
        return x.text;
      case 'str':
        return literal(x.s, x.esc);
      case 'arr':
        return `[${w()}${x.items.map((v) => go(v) + w()).join(`,${w()}`)}]`;
      case 'obj':
        return `{${w()}${x.members.map(([key, v]) => `${go(key)}${w()}:${w()}${go(v)}${w()}`).join(`,${w()}`)}}`;
    }
  };
  return w() + go(node) + w();
}

const oneLineWs = fc.constantFrom([''], [' '], ['', ' ', '\t', '  ']);
const anyWs = fc.constantFrom([''], [' '], ['', ' ', '\t', '  '], ['\n', ' ', '\r\n  ']);

/** Edits that turn JSON into near-JSON: the validator must never accept what JSON.parse rejects. */
const mutation = fc.tuple(
  fc.nat(),
  fc.constantFrom('delete', 'insert', 'replace', 'duplicate'),
  fc.constantFrom(...'{}[],:"\\ -+.0123456789eEtrufalsn@\u00e9\u0000\n'.split('')),
);
function mutate(text: string, [at, op, ch]: [number, string, string]): string {
  const i = text.length === 0 ? 0 : at % text.length;
  switch (op) {
    case 'delete':
      return text.slice(0, i) + text.slice(i + 1);
    case 'insert':
      return text.slice(0, i) + ch + text.slice(i);
    case 'replace':
      return text.slice(0, i) + ch + text.slice(i + 1);
    default:
      return text.slice(0, i) + text.slice(i, i + 3) + text.slice(i);
  }
}

const accepts = (text: string, check: RawJsonCheck) => {
  const b = enc.encode(text);
  return rawJsonUnchanged(b, 0, b.length, check);
};

// ------------------------------------------------------------------------ the scanner

describe('raw JSON check', () => {
  it('accepts only JSON that the full path leaves unchanged (random and mutated texts)', () => {
    let accepted = 0;
    let acceptedMutants = 0;
    fc.assert(
      fc.property(planArb, jsonTree, anyWs, fc.array(mutation, { maxLength: 2 }), (plan, tree, ws, edits) => {
        const check = rawJsonCheck(plan, decode)!;
        const text = serialize(tree, ws);
        const mutant = edits.reduce(mutate, text);
        for (const t of [text, mutant]) {
          if (!accepts(t, check)) continue;
          if (t === text) accepted++;
          else acceptedMutants++;
          const parsed: unknown = JSON.parse(t); // throws (fails the test) if it is not JSON
          expect(filterJsonValue(parsed, plan)).toBe(parsed);
        }
      }),
      { numRuns: 4000 },
    );
    // Not vacuous: plenty of texts and mutants were decided by the fast path.
    expect(accepted).toBeGreaterThan(400);
    expect(acceptedMutants).toBeGreaterThan(100);
  });

  it('accepts ordinary clean JSON, so the fast path is not idle', () => {
    const check = rawJsonCheck(builtInPlan([[...KINDS]]), decode)!;
    const clean = fc.letrec<{ v: unknown }>((tie) => ({
      v: fc.oneof(
        { depthSize: 'small' },
        fc.stringMatching(/^[A-Za-z _,;!?-]{0,16}$/),
        fc.integer({ min: -99999, max: 99999 }),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('v'), { maxLength: 4 }),
        fc.dictionary(fc.stringMatching(/^[a-z_]{1,8}$/), tie('v'), { maxKeys: 4 }),
      ),
    })).v;
    fc.assert(
      fc.property(clean, fc.constantFrom(0, 1, 2), (v, indent) => {
        expect(accepts(JSON.stringify(v, null, indent), check)).toBe(true);
      }),
    );
  });

  const all = () => rawJsonCheck(builtInPlan([[...KINDS]]), decode)!;

  it.each([
    ['{"m":"a\\u0040b.io"}', 'an escaped "@"'],
    ['{"m":"no at sign \\u0041"}', 'any escape'],
    ['{"p":"C:\\\\dir"}', 'an escaped backslash'],
    ['{"q":"say \\"hi\\""}', 'an escaped quote'],
    ['{"jane@example.com":1}', 'a key with an "@" (keys are checked like values)'],
    ['{"4111111111111111":true}', 'a key with 16 digits'],
    ['{"m":"mail a@b.io"}', 'an "@"'],
    ['{"m":"10.0.0.1"}', 'a dotted quad'],
    ['{"m":"fe80::1"}', 'a colon'],
    ['{"m":"+1 555 2671"}', 'a "+" and 7 digits'],
    ['{"m":"415 555 2671"}', '10 digits'],
    ['{"n":4111111111111111}', 'an integer of 16 digits'],
    ['{"n":123456789012}', 'an integer of 12 digits'],
    ['{"n":4.111111111111111e15}', 'a positive exponent'],
    ['{"n":1e3}', 'an unsigned exponent'],
    ['{"n":1E+2}', 'a "+" exponent'],
    ['\uFEFF{"a":1}', 'a BOM'],
    ['{"a":1,}', 'a trailing comma'],
    ['[1,]', 'a trailing comma in an array'],
    ['[01]', 'a leading zero'],
    ['[1 2]', 'a missing comma'],
    ['{"a" 1}', 'a missing colon'],
    ['[}', 'mismatched brackets'],
    ['{"a":1}}', 'an extra bracket'],
    ['[tru]', 'a broken literal'],
    ['"open', 'an unterminated string'],
    ['"tab\there"', 'a raw control character'],
    ['[-]', 'a lone minus'],
    ['[1.]', 'a missing fraction'],
    ['[.5]', 'a missing integer part'],
    ['ünï', 'non-ASCII outside a string'],
    ['', 'nothing'],
    ['  ', 'only whitespace'],
    ['\f{}', 'whitespace JSON does not allow'],
    ['{"a":1,"a":2}', 'a repeated key (JSON.parse keeps only the last value)'],
    ['{"":null,"":0}', 'a repeated empty key (its hash is the FNV offset basis itself)'],
    ['{"x":{"k":"v","j":"w","k":"z"}}', 'a repeated key in a nested object'],
    ['{"ünï":"v"}', 'a non-ASCII key (distinct invalid UTF-8 runs decode to the same key)'],
  ])('takes the full path for %j (%s)', (text) => {
    expect(accepts(text, all())).toBe(false);
  });

  it.each([
    '{"id":"chatcmpl-9xKq3Rj2mZ","created":1717495200,"model":"model-2024-05-13","choices":[{"index":0,"delta":{"content":" token37"},"logprobs":null}]}',
    '{"u":"ünï 😀","n":-0.5,"e":1.5e-7,"f":99999999999,"g":-99999999999.25,"h":[],"i":{}}',
    ' \t\r\n[ true , false , null ]\r\n ',
    '"just a string"',
    '-0',
  ])('decides clean JSON without the full path: %s', (text) => {
    expect(accepts(text, all())).toBe(true);
  });

  it('derives the minimal triggers from the detectors actually in the plan', () => {
    const email = rawJsonCheck(builtInPlan([['email']]), decode)!;
    expect(accepts('{"m":"call 415 555 2671, 10.0.0.1, fe80::1"}', email)).toBe(true);
    expect(accepts('{"m":"a@b"}', email)).toBe(false);
    const phone = rawJsonCheck(builtInPlan([['phone']]), decode)!;
    expect(accepts('{"m":"123456 a@b.io 1.2.3 ::"}', phone)).toBe(true); // 9 digits, no "+"
    expect(accepts('{"m":"1234567890"}', phone)).toBe(false);
    expect(accepts('{"m":"+123456"}', phone)).toBe(true);
    expect(accepts('{"m":"+1234567"}', phone)).toBe(false);
    const ssn = rawJsonCheck(builtInPlan([['ssn']]), decode)!;
    expect(accepts('{"m":"12345678"}', ssn)).toBe(true);
    expect(accepts('{"m":"123-45-6789"}', ssn)).toBe(false);
    const card = rawJsonCheck(builtInPlan([['credit_card']]), decode)!;
    expect(accepts('{"m":"123456789012"}', card)).toBe(true);
    expect(accepts('{"m":"1234567890123"}', card)).toBe(false);
    const ip = rawJsonCheck(builtInPlan([['ip_address']]), decode)!;
    // Clues hold per literal: 3 digits with the dots, 13 digits without a dot or a colon.
    expect(accepts('{"m":"v1.2.3","n":"1234567890123"}', ip)).toBe(true);
    expect(accepts('{"m":"v1.2.3 4"}', ip)).toBe(false);
    expect(accepts('{"m":"1.2.3.4"}', ip)).toBe(false);
    expect(accepts('{"m":"a:b"}', ip)).toBe(false);
  });

  it('only serves plans whose sole response feature is redaction', () => {
    expect(rawJsonCheck(builtInPlan([['email'], ['phone']]), decode)).not.toBeNull();
    const planOf = (filter: object, providerConstraints: object | null = null, provider = 'code_host') =>
      planResponse(
        runtime({ providerConstraints, rules: { response: [{ label: 'r', match: {}, filter }] } } as never, {
          provider,
          service: provider,
        }),
        { method: 'GET', path: '/bot/getUpdates' },
      )!;
    expect(rawJsonCheck(planOf({ redact: [{ type: 'email' }], denyFields: ['x'] }), decode)).toBeNull();
    expect(rawJsonCheck(planOf({ redact: [{ type: 'email' }], allowFields: ['x'] }), decode)).toBeNull();
    // Custom patterns are served: the fast path runs them on each value it reads.
    const withCustom = rawJsonCheck(
      planOf({ redact: [{ type: 'email' }, { type: 'custom', pattern: 'sk-[a-z]+', replacement: '[K]' }] }),
      decode,
    );
    expect(withCustom).not.toBeNull();
    expect(accepts('{"k":"plain","n":12}', withCustom!)).toBe(true);
    expect(accepts('{"k":"my sk-abc key"}', withCustom!)).toBe(false);
    expect(accepts('{"sk-abc":"keys are never redacted"}', withCustom!)).toBe(true);
    const inbound = planOf(
      { redact: [{ type: 'email' }] },
      { provider: 'chatbot_a', allowedChatIds: ['1'] },
      'chatbot_a',
    );
    expect(inbound.inbound).not.toBeNull();
    expect(rawJsonCheck(inbound, decode)).toBeNull();
  });

  it('stays far below the depth at which the full path throws, and leaves deeper JSON to it', () => {
    expect(RAW_MAX_DEPTH).toBeLessThan(MAX_JSON_DEPTH);
    const nested = (d: number) => '['.repeat(d) + '1' + ']'.repeat(d);
    expect(accepts(nested(RAW_MAX_DEPTH), all())).toBe(true);
    expect(accepts(nested(RAW_MAX_DEPTH + 1), all())).toBe(false);
  });

  it('keeps finding repeated keys once its key scratch has grown, and leaves more than it holds to the full path', () => {
    const check = all();
    const members = (n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => `"k${(i + from).toString(36)}":1`).join(',');
    // Past the scratch's first size (64 keys), open objects nested and side by side.
    expect(accepts(`{${members(200)}}`, check)).toBe(true);
    expect(accepts(`{${members(50)},"in":{${members(50, 50)},"deep":{${members(40, 100)}}}}`, check)).toBe(
      true,
    );
    // A repeated key is still found after the scratch grew: JSON.parse would drop the first value.
    expect(accepts(`{${members(150)},"k0":2}`, check)).toBe(false);
    expect(accepts(`{${members(70)},"in":{${members(70)}},"k1":2}`, check)).toBe(false);
    // The same check again on a small text: the grown scratch is reused, nothing is left over.
    expect(accepts('{"k0":1,"in":{"k0":1}}', check)).toBe(true);
    // More open keys than the scratch may ever hold: the full path decides.
    expect(accepts(`{${members(4096)}}`, check)).toBe(true);
    expect(accepts(`{${members(4097)}}`, check)).toBe(false);
  });

  it('reads a single line without line breaks as whitespace', () => {
    const b = enc.encode('{"a": [1, 2]}  \n\n');
    expect(rawJsonEnd(b, 0, b.length, all(), false)).toBe(15);
    expect(rawJsonEnd(enc.encode('{"a":\n1}'), 0, 8, all(), false)).toBe(-1);
    expect(rawJsonEnd(enc.encode('{"a":\n1}'), 0, 8, all(), true)).toBe(8);
  });
});

// ----------------------------------------------------------------- the stream filters

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function core(contentType: string, plan: ResponsePlan, rawFastPath = true): ResponseFilterCore {
  const c = createFilterCore(contentType, plan, {}, undefined, { rawFastPath });
  if (!c) throw new Error('expected a filter');
  return c;
}

function streamed(c: ResponseFilterCore, bytes: Uint8Array, splits: number[]): Uint8Array {
  const out: Uint8Array[] = [];
  let last = 0;
  for (const s of [...new Set(splits)].sort((a, b) => a - b)) {
    if (s <= last || s >= bytes.length) continue;
    out.push(...c.push(bytes.subarray(last, s)));
    last = s;
  }
  out.push(...c.push(bytes.subarray(last)), ...c.end());
  return concat(out);
}

const show = (b: Uint8Array) => Buffer.from(b).toString('latin1');

/** Fast path == full path (buffered), and streamed (fast path) == that for random chunkings. */
function expectSameAsFullPath(contentType: string, plan: ResponsePlan, bytes: Uint8Array): void {
  const full = show(runFilterCore(core(contentType, plan, false), bytes));
  expect(show(runFilterCore(core(contentType, plan), bytes))).toBe(full);
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: bytes.length }), { maxLength: 12 }), (splits) => {
      expect(show(streamed(core(contentType, plan), bytes, splits))).toBe(full);
    }),
    { numRuns: 8 },
  );
}

const eventArb = fc.record({
  tree: jsonTree,
  ws: anyWs,
  kind: fc.constantFrom('json', 'json', 'json', 'text'),
  event: fc.option(fc.constantFrom('message', 'content_block_delta'), { nil: undefined }),
  id: fc.option(fc.constantFrom('7', 'a:b'), { nil: undefined }),
  comment: fc.option(fc.constantFrom(' ping', ' from 10.0.0.1'), { nil: undefined }),
  space: fc.boolean(),
  nl: fc.constantFrom('\n', '\r\n', '\r'),
});
type SseEvent = typeof eventArb extends fc.Arbitrary<infer T> ? T : never;

function sseText(events: SseEvent[], bom: boolean): string {
  return (
    (bom ? '\uFEFF' : '') +
    events
      .map((e) => {
        const data = e.kind === 'json' ? serialize(e.tree, e.ws) : 'plain a@b.io 10.0.0.1';
        const lines: string[] = [];
        if (e.comment !== undefined) lines.push(`:${e.comment}`);
        if (e.event !== undefined) lines.push(`event: ${e.event}`);
        for (const part of data.split(/\r\n|\r|\n/)) lines.push(`data:${e.space ? ' ' : ''}${part}`);
        if (e.id !== undefined) lines.push(`id: ${e.id}`);
        return lines.map((l) => l + e.nl).join('') + e.nl;
      })
      .join('')
  );
}

describe('raw fast path in the stream filters (differential against the full path)', () => {
  const charset = fc.constantFrom('', '; charset=utf-8', '; charset=iso-8859-1');

  it('SSE: same bytes as the full path for random events, plans and chunkings', () => {
    fc.assert(
      fc.property(
        planArb,
        fc.array(eventArb, { maxLength: 6 }),
        fc.boolean(),
        charset,
        (plan, events, bom, cs) => {
          expectSameAsFullPath(`text/event-stream${cs}`, plan, enc.encode(sseText(events, bom)));
        },
      ),
      { numRuns: 400 },
    );
  });

  it('SSE: one event per chunk, as LLM streams send them, including events the fast path decides', () => {
    let decided = 0;
    fc.assert(
      fc.property(
        planArb,
        fc.array(fc.tuple(jsonTree, oneLineWs), { minLength: 2, maxLength: 8 }),
        (plan, trees) => {
          const chunks = trees.map(([t, ws]) => enc.encode(`data: ${serialize(t, ws)}\n\n`));
          const s = spied(plan);
          const fast = core('text/event-stream', s.plan);
          const full = core('text/event-stream', plan, false);
          for (const [i, chunk] of chunks.entries()) {
            const before = s.work();
            const got = concat(fast.push(chunk));
            expect(show(got)).toBe(show(concat(full.push(chunk))));
            if (i > 0 && s.work() === before) {
              decided++;
              expect(show(got)).toBe(show(chunk)); // the fast path only ever passes bytes through
            }
          }
          expect(show(concat(fast.end()))).toBe(show(concat(full.end())));
        },
      ),
      { numRuns: 400 },
    );
    expect(decided).toBeGreaterThan(100);
  });

  it('NDJSON: same bytes as the full path for random lines, plans and chunkings', () => {
    fc.assert(
      fc.property(
        planArb,
        fc.array(
          fc.oneof(
            fc.tuple(jsonTree, oneLineWs).map(([t, ws]) => serialize(t, ws)),
            fc.constantFrom('', '  ', 'not json a@b.io', '{"broken":'),
          ),
          { maxLength: 8 },
        ),
        fc.constantFrom('\n', '\r\n'),
        fc.boolean(),
        fc.boolean(),
        charset,
        (plan, lines, nl, trailing, bom, cs) => {
          const text = (bom ? '\uFEFF' : '') + lines.join(nl) + (trailing ? nl : '');
          expectSameAsFullPath(`application/x-ndjson${cs}`, plan, enc.encode(text));
        },
      ),
      { numRuns: 400 },
    );
  });

  it('JSON bodies: same bytes as the full path', () => {
    fc.assert(
      fc.property(planArb, jsonTree, anyWs, fc.boolean(), (plan, tree, ws, bom) => {
        const bytes = enc.encode((bom ? '\uFEFF' : '') + serialize(tree, ws));
        const full = show(runFilterCore(core('application/json', plan, false), bytes));
        expect(show(runFilterCore(core('application/json', plan), bytes))).toBe(full);
      }),
      { numRuns: 500 },
    );
  });
});

describe('raw fast path, targeted cases', () => {
  const plan = builtInPlan([[...KINDS]]);
  const first = 'data: {"first":true}\n\n';
  const sse = (text: string) => enc.encode(first + text);

  /** Filters `text` after a first event; reports the output and whether the full path ran for it. */
  function run(contentType: string, text: string, splits: number[] = []) {
    const s = spied(plan);
    const c = core(contentType, s.plan);
    const head = contentType.includes('event-stream') ? first : '{"first":true}\n';
    c.push(enc.encode(head));
    const before = s.work();
    const out = streamed(c, enc.encode(text), splits);
    expectSameAsFullPath(contentType, plan, enc.encode(head + text));
    return { out: Buffer.from(out).toString('utf8'), fullPath: s.work() > before };
  }

  it('emits clean events as their own bytes without decoding or parsing them', () => {
    const text =
      'data: {"id":"chatcmpl-9xKq3Rj2mZ","created":1717495200,"model":"model-2024-05-13","choices":[{"index":0,"delta":{"content":" token37"}}]}\n\n' +
      'event: content_block_delta\r\ndata:{"type":"content_block_delta","delta":{"text":"Hello"}}\r\n\r\n' +
      'id: 5\rdata: [1, 2.5, "ünï 😀", null]\r\r' +
      'event: ping\n\n';
    expect(run('text/event-stream', text)).toEqual({ out: text, fullPath: false });
  });

  it('escapes always take the full path: "\\u0040" is an "@"', () => {
    expect(run('text/event-stream', 'data: {"m":"a\\u0040b.io"}\n\n')).toEqual({
      out: 'data: {"m":"[REDACTED_EMAIL]"}\n\n',
      fullPath: true,
    });
    // An escaped backslash before "u0040" is not an "@": unchanged, but decided by the full path.
    expect(run('text/event-stream', 'data: {"m":"a\\\\u0040b.io"}\n\n')).toEqual({
      out: 'data: {"m":"a\\\\u0040b.io"}\n\n',
      fullPath: true,
    });
    expect(run('text/event-stream', 'data: {"p":"C:\\\\dir\\\\10.0.0.1"}\n\n')).toEqual({
      out: 'data: {"p":"C:\\\\dir\\\\[REDACTED_IP]"}\n\n',
      fullPath: true,
    });
    expect(run('application/x-ndjson', '{"m":"\\u0034111 1111 1111 1111"}\n')).toEqual({
      out: '{"m":"[REDACTED_CREDIT_CARD]"}\n',
      fullPath: true,
    });
  });

  it('keys with triggers take the full path, which leaves keys alone', () => {
    const text = 'data: {"jane@example.com":"x","4111 1111 1111 1111":1,"10.0.0.1":null}\n\n';
    expect(run('text/event-stream', text)).toEqual({ out: text, fullPath: true });
  });

  it('numbers that redaction may change take the full path', () => {
    expect(run('text/event-stream', 'data: {"n":4111111111111111}\n\n').out).toBe(
      'data: {"n":"[REDACTED_CREDIT_CARD]"}\n\n',
    );
    expect(run('text/event-stream', 'data: {"n":4.111111111111111e15}\n\n').out).toBe(
      'data: {"n":"[REDACTED_CREDIT_CARD]"}\n\n',
    );
    expect(run('text/event-stream', 'data: {"n":123456789012}\n\n')).toEqual({
      out: 'data: {"n":123456789012}\n\n',
      fullPath: true,
    });
    expect(run('text/event-stream', 'data: {"n":12345678901,"x":1.5e-7}\n\n').fullPath).toBe(false);
  });

  it('decides an event split across chunks, at every split point, like the whole event', () => {
    const clean = 'data: {"text":"ünï 😀 hello","n":42}\r\n\r\n';
    const pii = 'data: {"text":"ünï 😀 jane.doe@example.com"}\r\n\r\n';
    const cleanBytes = enc.encode(clean);
    for (let i = 0; i <= cleanBytes.length; i++) {
      expect(run('text/event-stream', clean, [i])).toEqual({ out: clean, fullPath: false });
      expect(run('text/event-stream', clean + pii, [i, i + 2, cleanBytes.length + i]).out).toBe(
        `${clean}data: {"text":"ünï 😀 [REDACTED_EMAIL]"}\n\n`,
      );
    }
  });

  it('leaves comments, several data lines and the first event (BOM) to the full path', () => {
    expect(run('text/event-stream', ': from 10.0.0.1\ndata: {"a":1}\n\n')).toEqual({
      out: ': from [REDACTED_IP]\ndata: {"a":1}\n\n',
      fullPath: true,
    });
    expect(run('text/event-stream', 'data: {"a":\ndata: "x@y.io"}\n\n')).toEqual({
      out: 'data: {"a":"[REDACTED_EMAIL]"}\n\n',
      fullPath: true,
    });
    expect(run('text/event-stream', 'data: {"a":\ndata: 1}\n\n').fullPath).toBe(true);
    const bom = enc.encode('\uFEFFdata: {"m":"a@b.io"}\n\n');
    expect(Buffer.from(runFilterCore(core('text/event-stream', plan), bom)).toString('utf8')).toBe(
      '\uFEFFdata: {"m":"[REDACTED_EMAIL]"}\n\n',
    );
    expectSameAsFullPath('text/event-stream', plan, bom);
  });

  it('NDJSON and JSON bodies: clean ones pass as bytes, the rest as before', () => {
    expect(run('application/x-ndjson', '{"a":"b"}\r\n{"c": [1, 2]}\n\n  \n{"d":null}')).toEqual({
      out: '{"a":"b"}\r\n{"c": [1, 2]}\n\n  \n{"d":null}',
      fullPath: false,
    });
    expect(run('application/x-ndjson', '{"a":"b"}\n{"m":"a@b.io"}\n').out).toBe(
      '{"a":"b"}\n{"m":"[REDACTED_EMAIL]"}\n',
    );
    const s = spied(plan);
    const pretty = JSON.stringify({ a: ['b', { c: 'd' }], n: 1 }, null, 2);
    expect(Buffer.from(runFilterCore(core('application/json', s.plan), enc.encode(pretty))).toString()).toBe(
      pretty,
    );
    expect(s.work()).toBe(0);
  });

  it('still fails closed on JSON nested deeper than the full path allows', () => {
    const deep = `data: ${'['.repeat(MAX_JSON_DEPTH + 2)}${']'.repeat(MAX_JSON_DEPTH + 2)}\n\n`;
    expect(() => runFilterCore(core('text/event-stream', plan), sse(deep))).toThrow(ResponseFilterLimitError);
    const body = enc.encode(`${'['.repeat(MAX_JSON_DEPTH + 2)}1${']'.repeat(MAX_JSON_DEPTH + 2)}`);
    expect(() => runFilterCore(core('application/json', plan), body)).toThrow(ResponseFilterLimitError);
  });

  it('custom patterns: values and integers are checked as the full path sees them', () => {
    const planWith = (pattern: string) => builtInPlan([['email']], [pattern]);
    const cases: Array<[string, string, boolean]> = [
      // [pattern, event payload, unchanged]
      ['^tok', '{"a":"token"}', false], // the anchor sees the value's start, not the quote
      ['^tok', '{"a":"a token"}', true],
      ['n$', '{"a":"token","b":1}', false],
      ['"', '{"a":"x"}', true], // the quotes around a value are not part of it
      [':', '{"a":"x"}', true],
      ['^17$', '{"n":17.0}', false], // 17.0 is the integer 17, redacted as "17"
      ['^17$', '{"n":170e-1}', false],
      ['^17$', '{"n":17.5}', true], // not an integer: never redacted
      ['^0$', '{"n":-0}', false], // String(-0) is "0"
      ['\\b', '{"a":"abc"}', true], // only empty matches: nothing to replace
      ['(?i)MODEL', '{"model":"gpt"}', true], // keys are never redacted
      ['(?i)MODEL', '{"a":"Model-1"}', false],
      // Longer than one redaction window: left to the full path, which scans it in rounds.
      ['^tok', `{"a":"${'x'.repeat(9000)}"}`, true],
      ['^tok', `{"a":"tok${'x'.repeat(9000)}"}`, false],
    ];
    for (const [pattern, payload, unchanged] of cases) {
      const text = `data: ${payload}\n\n`;
      const fast = Buffer.from(runFilterCore(core('text/event-stream', planWith(pattern)), sse(text)));
      const full = Buffer.from(runFilterCore(core('text/event-stream', planWith(pattern), false), sse(text)));
      expect(fast.toString(), `${pattern} on ${payload}`).toBe(full.toString());
      expect(fast.toString().endsWith(text), `${pattern} on ${payload}`).toBe(unchanged);
    }
  });

  it('is off for plans with field rules', () => {
    const withDeny = planResponse(
      runtime({ rules: { response: [{ label: 'r', match: {}, filter: { denyFields: ['secret'] } }] } }),
      ROUTE,
    )!;
    const input = 'data: {"first":1}\n\ndata: {"secret":"s","ok":1}\n\n';
    expect(
      Buffer.from(runFilterCore(core('text/event-stream', withDeny), enc.encode(input))).toString(),
    ).toBe('data: {"first":1}\n\ndata: {"ok":1}\n\n');
  });
});

describe('event frames: events that repeat one template with a few values changed', () => {
  const openAi = (lit: string) =>
    `data: {"id":"chatcmpl-9xKq","object":"chat.completion.chunk","created":1717495200,"model":"m-1",` +
    `"choices":[{"index":0,"delta":{"content":${lit}},"logprobs":null,"finish_reason":null}],"system_fingerprint":"fp_44"}`;
  const anthropic = (lit: string) =>
    `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${lit}}}`;
  // A hole at a key: a frame there would pass `{"x":1,"x":2}`, whose first value the full path drops.
  const atKey = (lit: string) => `data: {"x":1,${lit}:2}`;
  // A hole followed by a number that may change, and by one redaction may rewrite.
  const withNumber = (lit: string, n: number) => `data: {"t":${lit},"n":${n}}`;
  // OpenAI's Responses API: a sequence number before the delta, both changing every event.
  const responses = (lit: string, _n: number, seq: number) =>
    `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":${seq},` +
    `"item_id":"msg_1","output_index":0,"content_index":0,"delta":${lit}}`;
  const TEMPLATES: ReadonlyArray<(lit: string, n: number, seq: number) => string> = [
    openAi,
    anthropic,
    atKey,
    withNumber,
    responses,
  ];

  /** Literals as providers spell them (JSON.stringify) and as they may (escapes for plain characters). */
  const literal = fc.oneof(
    // Mostly text deltas, then anything a delta may hold, then a few chosen ones.
    {
      arbitrary: fc
        .string({ unit: fc.constantFrom(...'ab Zé😀'), maxLength: 8 })
        .map((t) => JSON.stringify(t)),
      weight: 4,
    },
    {
      arbitrary: fc
        .string({ unit: fc.constantFrom(...'ab Z@.:+-0123456789é😀"\\\n\t\u0000x'.split('')), maxLength: 14 })
        .map((t) => JSON.stringify(t)),
      weight: 2,
    },
    fc.constantFrom(
      '" jane.doe@example.com"',
      '"a\\u0040b.io"',
      '"+1 415 555 2671"',
      '"x"',
      '"ünï"',
      '"\\/"',
      '""',
    ),
  );
  const streamArb = fc.record({
    events: fc.array(
      fc.record({
        template: fc.nat({ max: 9 }),
        lit: literal,
        n: fc.constantFrom(7, 8, -0.5, 4111111111111111),
      }),
      { minLength: 2, maxLength: 24 },
    ),
    main: fc.nat({ max: TEMPLATES.length - 1 }),
    // Up to where redaction may rewrite a number (12 digits and more take the full path).
    seqBase: fc.constantFrom(0, 95, 99_999_999_990),
    nl: fc.constantFrom('\n', '\r\n', '\r'),
  });

  function eventsText(x: typeof streamArb extends fc.Arbitrary<infer T> ? T : never): string[] {
    // Mostly the stream's own template, sometimes another one, as a stream's first and last events are.
    return x.events.map((e, seq) => {
      const t = e.template < 8 ? x.main : e.template - 8;
      const data = TEMPLATES[t]!(e.lit, e.n, x.seqBase + seq);
      return data.split('\n').join(x.nl) + x.nl + x.nl;
    });
  }

  function frameCore(plan: ResponsePlan, eventFrames: boolean, rawFastPath = true): ResponseFilterCore {
    const c = createFilterCore('text/event-stream', plan, {}, undefined, { rawFastPath, eventFrames });
    if (!c) throw new Error('expected a filter');
    return c;
  }

  function framedHits<T>(fn: () => T): { result: T; hits: number } {
    const spy = vi.spyOn(RawEventFrame.prototype, 'end');
    try {
      const result = fn();
      return { result, hits: spy.mock.results.filter((r) => r.value !== -1).length };
    } finally {
      spy.mockRestore();
    }
  }

  it('give the same bytes as reading every event whole, and as the full path, for any chunking', () => {
    let hits = 0;
    fc.assert(
      fc.property(
        planArb,
        streamArb,
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.boolean(),
        (plan, x, splits, perEvent) => {
          const events = eventsText(x).map((e) => enc.encode(e));
          const bytes = concat(events);
          const full = show(runFilterCore(frameCore(plan, false, false), bytes));
          expect(show(runFilterCore(frameCore(plan, false), bytes))).toBe(full);
          const run = framedHits(() => {
            const c = frameCore(plan, true);
            if (!perEvent)
              return show(
                streamed(
                  c,
                  bytes,
                  splits.map((s) => s % (bytes.length + 1)),
                ),
              );
            const out = events.flatMap((e) => c.push(e));
            return show(concat([...out, ...c.end()]));
          });
          hits += run.hits;
          expect(run.result).toBe(full);
        },
      ),
      { numRuns: 600 },
    );
    expect(hits).toBeGreaterThan(200); // the frames did decide events, not only fall through
  });

  it('do not let an address through: an event of the frame whose delta holds one is redacted', () => {
    const plan = builtInPlan([['email']]);
    const clean = [' Hello', ' there', ' friend'].map((t) => `${openAi(JSON.stringify(t))}\n\n`);
    const pii = `${openAi('" mail jane.doe@example.com"')}\n\n`;
    const escaped = `${openAi('" a\\u0040b.io"')}\n\n`;
    const { result, hits } = framedHits(() => {
      const c = frameCore(plan, true);
      return [...clean, pii, escaped, clean[0]!].map((e) => show(concat(c.push(enc.encode(e)))));
    });
    expect(result.slice(0, 3)).toEqual(clean);
    expect(result[3]).toContain('"content":" mail [REDACTED_EMAIL]"');
    expect(result[4]).toContain('"content":" [REDACTED_EMAIL]"'); // a@b.io
    expect(result.join('')).not.toContain('jane.doe');
    expect(result[5]).toBe(clean[0]);
    // The last event: the first goes the full way, and the frame is cut from the second and third.
    expect(hits).toBe(1);
  });

  it('are never cut at a key: a repeated key still goes to the full path', () => {
    const plan = builtInPlan([['email']]);
    const events = ['"a"', '"b"', '"c"', '"x"'].map((k) => `${atKey(k)}\n\n`);
    const { result, hits } = framedHits(() => {
      const c = frameCore(plan, true);
      return events.map((e) => show(concat(c.push(enc.encode(e)))));
    });
    expect(result.slice(0, 3)).toEqual(events.slice(0, 3));
    expect(result[3]).toBe('data: {"x":2}\n\n'); // JSON.parse keeps the last "x"; so does the filter
    expect(hits).toBe(0);
  });

  describe('RawEventFrame', () => {
    const plan = builtInPlan([[...KINDS]]);
    const newCheck = () => rawJsonCheck(plan, decode)!;
    /** Feeds `text` (one `data:` event) to the frame as SseFilter does: the JSON read, then learn. */
    function learn(frame: RawEventFrame, check: RawJsonCheck, text: string): void {
      const b = enc.encode(text);
      expect(rawJsonEnd(b, 'data: '.length, b.length, check, false)).toBe(text.trimEnd().length);
      frame.learn(b, 0, b.length, check);
    }
    const ev = (lit: string, nl = '\n') => `data: {"id":"c1","delta":{"text":${lit}},"n":1}${nl}${nl}`;

    it('decides an event of the template from its literal, and nothing else', () => {
      const check = newCheck();
      const frame = new RawEventFrame();
      learn(frame, check, ev('"Hel"'));
      expect(frame.end(enc.encode(ev('"lo"')), 0, check)).toBe(-1); // one event: nothing to compare with yet
      learn(frame, check, ev('"lo"'));
      const next = ev('" world, ünï 😀"');
      expect(frame.end(enc.encode(next), 0, check)).toBe(enc.encode(next).length);
      // Within a longer buffer, at an offset: the event's own end.
      const two = enc.encode(`xx${next}${next}`);
      expect(frame.end(two, 2, check)).toBe(2 + enc.encode(next).length);
      for (const other of [
        ev('" jane.doe@example.com"'), // a literal the check refuses
        ev('"a\\u0040b.io"'), // an escape
        ev('"x","y":"z"'), // more than one literal in the hole
        ev('"x'), // unterminated
        ev('"lo"').replace('"c1"', '"c2"'), // another prefix
        ev('"lo"').replace('"n":1', '"n":2'), // another suffix
        ev('"lo"', '\r\n'), // another suffix: CRLF
      ]) {
        expect(frame.end(enc.encode(other), 0, check), other).toBe(-1);
      }
    });

    it('leaves numbers open too: a sequence number and a delta in one frame', () => {
      const check = newCheck();
      const frame = new RawEventFrame();
      const seqEv = (seq: string, lit: string) =>
        `data: {"type":"response.output_text.delta","sequence_number":${seq},"delta":${lit}}\n\n`;
      learn(frame, check, seqEv('4', '"Hel"'));
      learn(frame, check, seqEv('5', '"lo"'));
      for (const next of [seqEv('6', '" world"'), seqEv('10', '"x"'), seqEv('-1.25', '""')]) {
        expect(frame.end(enc.encode(next), 0, check), next).toBe(enc.encode(next).length);
      }
      for (const other of [
        seqEv('123456789012', '"x"'), // twelve digits: redaction may rewrite it
        seqEv('1e5', '"x"'), // a positive exponent, likewise
        seqEv('true', '"x"'), // not a number
        seqEv('"6"', '"x"'), // a string where the frame has a number
        seqEv('6', '7'), // a number where it has a string
        seqEv('6', '" jane.doe@example.com"'),
      ]) {
        expect(frame.end(enc.encode(other), 0, check), other).toBe(-1);
      }
    });

    it('learns nothing from events that end in a carriage return', () => {
      const check = newCheck();
      const frame = new RawEventFrame();
      learn(frame, check, ev('"a"', '\r'));
      learn(frame, check, ev('"b"', '\r'));
      expect(frame.end(enc.encode(ev('"c"', '\r')), 0, check)).toBe(-1);
    });

    it('stops learning on a stream that no frame fits', () => {
      const check = newCheck();
      const frame = new RawEventFrame();
      // Events that differ in a key: no value to cut at.
      for (let n = 0; n < 8; n++) learn(frame, check, `data: {"t":"x","k${n}":1}\n\n`);
      learn(frame, check, ev('"a"'));
      learn(frame, check, ev('"b"'));
      expect(frame.end(enc.encode(ev('"c"')), 0, check)).toBe(-1);
      // Unlike a fresh frame, which learns from the same two events.
      const fresh = new RawEventFrame();
      learn(fresh, check, ev('"a"'));
      learn(fresh, check, ev('"b"'));
      expect(fresh.end(enc.encode(ev('"c"')), 0, check)).toBe(enc.encode(ev('"c"')).length);
    });
  });
});
