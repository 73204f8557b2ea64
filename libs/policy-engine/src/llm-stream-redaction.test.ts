import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  creditCardDetector,
  emailDetector,
  ipAddressDetector,
  phoneDetector,
  ssnDetector,
  type Detector,
} from './pii-detectors.js';
import { planResponse } from './compile.js';
import {
  createLlmStreamRedaction,
  createLlmStreamRedactionCore,
  holdBackFrom,
  MAX_HELD,
  type LlmStreamProtocol,
} from './llm-stream-redaction.js';
import { redactText } from './redaction.js';
import { chainFilterCores, createFilterCore, toNodeTransform } from './stream-filters.js';
import { runtime, throughChunks } from './test-fixtures.js';

const detectors: Detector[] = [
  emailDetector(),
  phoneDetector(),
  ssnDetector(),
  creditCardDetector(),
  ipAddressDetector(),
];

/** The SSE a provider sends for `deltas`, in its own protocol. */
function providerStream(protocol: LlmStreamProtocol, deltas: string[]): string {
  const ev = (data: unknown, event?: string) =>
    `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
  switch (protocol) {
    case 'openai':
      return (
        ev({
          id: 'c1',
          object: 'chat.completion.chunk',
          model: 'm',
          choices: [{ index: 0, delta: { role: 'assistant', content: '' } }],
        }) +
        deltas
          .map((d) =>
            ev({
              id: 'c1',
              object: 'chat.completion.chunk',
              model: 'm',
              choices: [{ index: 0, delta: { content: d }, finish_reason: null }],
            }),
          )
          .join('') +
        ev({
          id: 'c1',
          object: 'chat.completion.chunk',
          model: 'm',
          choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
        }) +
        'data: [DONE]\n\n'
      );
    case 'anthropic':
      return (
        ev({ type: 'message_start', message: { id: 'm1' } }, 'message_start') +
        ev(
          { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
          'content_block_start',
        ) +
        deltas
          .map((d) =>
            ev(
              { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: d } },
              'content_block_delta',
            ),
          )
          .join('') +
        ev({ type: 'content_block_stop', index: 0 }, 'content_block_stop') +
        ev({ type: 'message_stop' }, 'message_stop')
      );
    case 'gemini':
      return deltas
        .map((d, i) =>
          ev({
            candidates: [
              {
                index: 0,
                content: { role: 'model', parts: [{ text: d }] },
                ...(i === deltas.length - 1 && { finishReason: 'STOP' }),
              },
            ],
          }),
        )
        .join('');
  }
}

/** What the agent's SDK would accumulate as text from the SSE it receives. */
function sdkText(protocol: LlmStreamProtocol, sse: string): string {
  let text = '';
  for (const block of sse.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n');
    if (data === '' || data === '[DONE]') continue;
    const j = JSON.parse(data) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (protocol === 'openai') for (const c of j.choices ?? []) text += c.delta?.content ?? '';
    if (protocol === 'anthropic' && j.type === 'content_block_delta') text += j.delta.text;
    if (protocol === 'gemini')
      for (const c of j.candidates ?? []) for (const p of c.content?.parts ?? []) text += p.text ?? '';
  }
  return text;
}

/** Runs `sse` through the stage in chunks of the given sizes (bytes may split anywhere). */
function throughStage(protocol: LlmStreamProtocol, sse: string, sizes: number[]): Promise<string> {
  return throughChunks(createLlmStreamRedaction(protocol, detectors), sse, sizes);
}

/** Splits `text` into deltas at the given cut sizes (as a model's tokens would). */
function deltasOf(text: string, sizes: number[]): string[] {
  const out: string[] = [];
  let p = 0;
  for (let i = 0; p < text.length; i++) {
    const n = sizes[i % sizes.length]!;
    out.push(text.slice(p, p + n));
    p += n;
  }
  return out;
}

const PROTOCOLS: LlmStreamProtocol[] = ['openai', 'anthropic', 'gemini'];

const cutSizes = fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 6 });

/**
 * For any text `texts` gives, cut into any deltas and sent in any byte chunking, `through`
 * gives the SDK the whole text redacted.
 */
async function expectWholeTextRedacted(
  protocol: LlmStreamProtocol,
  texts: fc.Arbitrary<string>,
  through: (sse: string, sizes: number[]) => Promise<string>,
  using: readonly Detector[],
  numRuns: number,
): Promise<void> {
  await fc.assert(
    fc.asyncProperty(texts, cutSizes, cutSizes, async (t, cuts, chunks) => {
      const out = await through(
        providerStream(protocol, deltasOf(t, cuts)),
        chunks.map((c) => c * 5),
      );
      expect(sdkText(protocol, out)).toBe(redactText(t, using));
    }),
    { numRuns },
  );
}

describe('redaction across LLM text deltas', () => {
  it.each(PROTOCOLS)(
    '%s: an address split over two deltas is redacted; the text is otherwise intact',
    async (protocol) => {
      const sse = providerStream(protocol, ['Write to alice@exa', 'mple.com today.']);
      const out = await throughStage(protocol, sse, [7, 300]);
      expect(sdkText(protocol, out)).toBe('Write to [REDACTED_EMAIL] today.');
      expect(out).not.toContain('alice');
    },
  );

  it.each(PROTOCOLS)('%s: a phone number over four deltas is redacted', async (protocol) => {
    const sse = providerStream(protocol, ['Call +1 (41', '5) 555', '-26', '71 now']);
    const out = await throughStage(protocol, sse, [1000]);
    expect(sdkText(protocol, out)).toBe(redactText('Call +1 (415) 555-2671 now', detectors));
    expect(out).not.toContain('2671');
  });

  const piece = fc.constantFrom(
    'jane.doe@example.com',
    '+1 (415) 555-2671',
    '123-45-6789',
    '4111 1111 1111 1111',
    '10.0.0.1',
    'ünïcødé 😀',
    'lorem',
    'ipsum.',
    'a',
    '\n',
  );
  const text = fc.array(piece, { maxLength: 24 }).map((parts) => parts.join(' '));

  it.each(PROTOCOLS)(
    '%s: for any deltas and any byte chunking, the SDK text equals the whole text redacted',
    async (protocol) => {
      const through = (sse: string, sizes: number[]) => throughStage(protocol, sse, sizes);
      await expectWholeTextRedacted(protocol, text, through, detectors, 150);
    },
  );

  it('holds back at most MAX_HELD characters, and nothing after a finished word', () => {
    expect(holdBackFrom('hello alice')).toBe(6);
    expect(holdBackFrom('hello ')).toBe(6);
    expect(holdBackFrom('call 555 123 ')).toBe(4);
    // A run of digits glued to a word is held with the word (a custom pattern's `ACCT-1234`).
    expect(holdBackFrom('see ACCT-1234 ')).toBe(4);
    expect(holdBackFrom('see ACCT1234')).toBe(4);
    expect(holdBackFrom('x'.repeat(1000))).toBe(1000 - MAX_HELD);
  });

  it.each(PROTOCOLS)(
    '%s: regression: a phone number followed by a digit run glued to it through punctuation is held whole',
    async (protocol) => {
      // holdBackFrom once cut between `+1 (415) ` and `555-2671,x+1`: the glued word of the
      // trailing run reached back into the phone number, whose first half went out unredacted.
      const text = 'Call +1 (415) 555-2671,x+1 now';
      const out = await throughStage(protocol, providerStream(protocol, [...text]), [4096]);
      expect(sdkText(protocol, out)).toBe(redactText(text, detectors));
      expect(sdkText(protocol, out)).not.toContain('415');
      expect(holdBackFrom('Call +1 (415) 555-2671,x+1 ')).toBe(4);
    },
  );

  it('passes events it does not understand, and a stream without text, unchanged', async () => {
    const sse = 'event: ping\ndata: {"type":"ping"}\n\n: comment\n\ndata: not json\n\n';
    expect(await throughStage('anthropic', sse, [3])).toBe(sse);
  });
});

// The Responses API (`POST /v1/responses`): typed events, text deltas per output item and part.
type ResponsesDeltaType = 'response.output_text.delta' | 'response.reasoning_summary_text.delta';
interface ResponsesPart {
  type: ResponsesDeltaType;
  outputIndex: number;
  index: number;
  deltas: string[];
}

/** The events a provider streams for `parts`, their deltas interleaved round-robin. */
function responsesStream(parts: ResponsesPart[], { end = true } = {}): string {
  let seq = 0;
  const ev = (data: Record<string, unknown>) =>
    `event: ${String(data.type)}\ndata: ${JSON.stringify({ ...data, sequence_number: seq++ })}\n\n`;
  const indexField = (p: ResponsesPart) =>
    p.type === 'response.output_text.delta' ? 'content_index' : 'summary_index';
  let sse = ev({ type: 'response.created', response: { id: 'resp_1', status: 'in_progress', output: [] } });
  const longest = Math.max(0, ...parts.map((p) => p.deltas.length));
  for (let i = 0; i < longest; i++) {
    for (const p of parts) {
      if (i >= p.deltas.length) continue;
      sse += ev({
        type: p.type,
        item_id: `item_${p.outputIndex}`,
        output_index: p.outputIndex,
        [indexField(p)]: p.index,
        delta: p.deltas[i],
        ...(p.type === 'response.output_text.delta' && { logprobs: [] }),
      });
    }
  }
  if (!end) return sse;
  for (const p of parts) {
    sse += ev({
      type: p.type.replace(/\.delta$/, '.done'),
      item_id: `item_${p.outputIndex}`,
      output_index: p.outputIndex,
      [indexField(p)]: p.index,
      text: p.deltas.join(''),
    });
  }
  return sse + ev({ type: 'response.completed', response: { id: 'resp_1', status: 'completed' } });
}

/**
 * What an SDK accumulates from the deltas, per `<type>:<output>:<index>`, and what it had for
 * each slot when that slot's `.done` event arrived.
 */
function responsesText(sse: string): { text: Record<string, string>; atDone: Record<string, string> } {
  const text: Record<string, string> = {};
  const atDone: Record<string, string> = {};
  for (const block of sse.split('\n\n')) {
    const line = block.split('\n').find((l) => l.startsWith('data: '));
    if (!line) continue;
    const e = JSON.parse(line.slice(6)) as Record<string, unknown>;
    const type = String(e.type);
    const slot = `${type.replace(/\.(delta|done)$/, '')}:${String(e.output_index)}:${String(e.content_index ?? e.summary_index)}`;
    if (type.endsWith('.delta')) text[slot] = (text[slot] ?? '') + String(e.delta);
    if (type.endsWith('.done')) atDone[slot] = text[slot] ?? '';
  }
  return { text, atDone };
}

describe('redaction across Responses API text deltas (OpenAI protocol)', () => {
  const piece = fc.constantFrom(
    'jane.doe@example.com',
    '+1 (415) 555-2671',
    'lorem',
    'ipsum.',
    'a',
    'ünï 😀',
  );
  const text = fc.array(piece, { maxLength: 16 }).map((parts) => parts.join(' '));
  const sizes = fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 6 });

  it('for any deltas and chunking, each part reads as its whole text redacted, complete before its .done', async () => {
    await fc.assert(
      fc.asyncProperty(text, text, sizes, sizes, async (answer, summary, cuts, chunks) => {
        const sse = responsesStream([
          { type: 'response.output_text.delta', outputIndex: 1, index: 0, deltas: deltasOf(answer, cuts) },
          {
            type: 'response.reasoning_summary_text.delta',
            outputIndex: 0,
            index: 0,
            deltas: deltasOf(summary, cuts),
          },
        ]);
        const out = await throughStage(
          'openai',
          sse,
          chunks.map((c) => c * 7),
        );
        const { text: got, atDone } = responsesText(out);
        const expected = {
          'response.output_text:1:0': redactText(answer, detectors),
          'response.reasoning_summary_text:0:0': redactText(summary, detectors),
        };
        for (const [slot, value] of Object.entries(expected)) {
          expect(got[slot] ?? '').toBe(value);
          expect(atDone[slot]).toBe(value);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('an address split over three deltas never appears in any delta; other events keep their bytes', async () => {
    const sse = responsesStream([
      {
        type: 'response.output_text.delta',
        outputIndex: 0,
        index: 0,
        deltas: ['Write to ali', 'ce@exam', 'ple.com today.'],
      },
    ]);
    const out = await throughStage('openai', sse, [11]);
    const deltas = out.split('\n\n').filter((b) => b.includes('"response.output_text.delta"'));
    expect(deltas.join('')).not.toMatch(/ali|ce@|exam|ple\.com/);
    expect(responsesText(out).text['response.output_text:0:0']).toBe('Write to [REDACTED_EMAIL] today.');
    // Events other than deltas are the provider's bytes (the per-event filter before this stage
    // redacts the whole text in `.done`); the synthetic delta carries its slot's fields.
    const blocks = sse.split('\n\n').filter((b) => !b.includes('.delta"'));
    for (const b of blocks) expect(out).toContain(b);
    const synthetic = out.split('\n\n').find((b) => b.includes('"delta":"today."'));
    expect(synthetic).toMatch(/^event: response\.output_text\.delta\n/);
    expect(JSON.parse(synthetic!.split('data: ')[1]!)).toMatchObject({
      item_id: 'item_0',
      output_index: 0,
      content_index: 0,
      logprobs: [],
    });
  });

  it('a stream cut before .done still sends every held character, redacted', async () => {
    const sse = responsesStream(
      [
        {
          type: 'response.output_text.delta',
          outputIndex: 0,
          index: 0,
          deltas: ['mail bob@corp.exa', 'mple'],
        },
      ],
      { end: false },
    );
    const out = await throughStage('openai', sse, [4096]);
    expect(responsesText(out).text['response.output_text:0:0']).toBe('mail [REDACTED_EMAIL]');
    expect(out).not.toContain('bob@');
  });
});

// Tool calls: their JSON arguments stream in pieces too (chat `tool_calls`, Responses
// `function_call_arguments`, Anthropic `input_json_delta`).
type ToolProtocol = 'openai chat' | 'openai responses' | 'anthropic';

/** The SSE a provider sends for one tool call (index 1, after a text part) whose arguments arrive in `pieces`. */
function toolCallStream(protocol: ToolProtocol, pieces: string[]): string {
  const ev = (data: unknown, event?: string) =>
    `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
  switch (protocol) {
    case 'openai chat': {
      const chunk = (delta: unknown, finish: string | null = null) =>
        ev({
          id: 'c1',
          object: 'chat.completion.chunk',
          model: 'm',
          choices: [{ index: 0, delta, finish_reason: finish }],
        });
      return (
        chunk({ role: 'assistant', content: null }) +
        chunk({
          tool_calls: [
            { index: 1, id: 'call_1', type: 'function', function: { name: 'send', arguments: '' } },
          ],
        }) +
        pieces.map((p) => chunk({ tool_calls: [{ index: 1, function: { arguments: p } }] })).join('') +
        chunk({}, 'tool_calls') +
        'data: [DONE]\n\n'
      );
    }
    case 'openai responses':
      return (
        ev(
          {
            type: 'response.output_item.added',
            output_index: 1,
            item: { id: 'fc_1', type: 'function_call', arguments: '' },
          },
          'response.output_item.added',
        ) +
        pieces
          .map((p) =>
            ev(
              { type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 1, delta: p },
              'response.function_call_arguments.delta',
            ),
          )
          .join('') +
        ev(
          {
            type: 'response.function_call_arguments.done',
            item_id: 'fc_1',
            output_index: 1,
            arguments: pieces.join(''),
          },
          'response.function_call_arguments.done',
        ) +
        ev({ type: 'response.completed', response: { id: 'r1' } }, 'response.completed')
      );
    case 'anthropic':
      return (
        ev(
          {
            type: 'content_block_start',
            index: 1,
            content_block: { type: 'tool_use', id: 't1', name: 'send', input: {} },
          },
          'content_block_start',
        ) +
        pieces
          .map((p) =>
            ev(
              { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: p } },
              'content_block_delta',
            ),
          )
          .join('') +
        ev({ type: 'content_block_stop', index: 1 }, 'content_block_stop') +
        ev({ type: 'message_stop' }, 'message_stop')
      );
  }
}

/** The arguments an SDK accumulates for the call, and what it had when the call closed. */
function toolArgs(protocol: ToolProtocol, sse: string): { args: string; atClose: string | null } {
  let args = '';
  let atClose: string | null = null;
  for (const block of sse.split('\n\n')) {
    const line = block.split('\n').find((l) => l.startsWith('data: '));
    if (!line || line === 'data: [DONE]') continue;
    const e = JSON.parse(line.slice(6)) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (protocol === 'openai chat') {
      for (const c of e.choices ?? []) {
        for (const t of c.delta?.tool_calls ?? []) if (t.index === 1) args += t.function?.arguments ?? '';
        if (c.finish_reason) atClose = args;
      }
    }
    if (protocol === 'openai responses') {
      if (e.type === 'response.function_call_arguments.delta') args += e.delta;
      if (e.type === 'response.function_call_arguments.done') atClose = args;
    }
    if (protocol === 'anthropic') {
      if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta')
        args += e.delta.partial_json;
      if (e.type === 'content_block_stop') atClose = args;
    }
  }
  return { args, atClose };
}

describe('redaction across tool-call argument deltas', () => {
  const value = fc.constantFrom(
    'jane.doe@example.com',
    '+1 (415) 555-2671',
    'lorem ipsum',
    'a "quoted" word',
    'ünï 😀',
    '',
  );
  const argsJson = fc
    .dictionary(fc.constantFrom('to', 'cc', 'body', 'note'), value)
    .map((o) => JSON.stringify(o));
  const sizes = fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 6 });
  const PROTOCOLS_WITH_TOOLS: ToolProtocol[] = ['openai chat', 'openai responses', 'anthropic'];

  it.each(PROTOCOLS_WITH_TOOLS)(
    '%s: for any arguments, pieces and chunking, the SDK reads them redacted, valid JSON, complete when the call closes',
    async (protocol) => {
      await fc.assert(
        fc.asyncProperty(argsJson, sizes, sizes, async (args, cuts, chunks) => {
          const stage = protocol === 'anthropic' ? 'anthropic' : 'openai';
          const out = await throughStage(
            stage,
            toolCallStream(protocol, deltasOf(args, cuts)),
            chunks.map((c) => c * 9),
          );
          const got = toolArgs(protocol, out);
          expect(got.args).toBe(redactText(args, detectors));
          expect(got.atClose).toBe(got.args);
          expect(() => JSON.parse(got.args) as unknown).not.toThrow();
        }),
        { numRuns: 100 },
      );
    },
  );

  it.each(PROTOCOLS_WITH_TOOLS)(
    '%s: an address split over three argument pieces never reaches the agent',
    async (protocol) => {
      const stage = protocol === 'anthropic' ? 'anthropic' : 'openai';
      const out = await throughStage(
        stage,
        toolCallStream(protocol, ['{"to":"ali', 'ce@exam', 'ple.com","subject":"Hi"}']),
        [13],
      );
      const deltas = out
        .split('\n\n')
        .filter((b) => !b.includes('function_call_arguments.done'))
        .join('\n\n');
      expect(deltas).not.toMatch(/ali|ce@|exam|ple\.com/);
      expect(JSON.parse(toolArgs(protocol, out).args)).toEqual({ to: '[REDACTED_EMAIL]', subject: 'Hi' });
    },
  );
});

describe('the stage before the per-event filter, as the data plane chains them', () => {
  const plan = planResponse(
    runtime({
      rules: {
        response: [
          {
            label: 'pii',
            match: {},
            filter: {
              redact: [
                { type: 'email' },
                { type: 'phone' },
                { type: 'ssn' },
                { type: 'credit_card' },
                { type: 'ip_address' },
              ],
            },
          },
        ],
      },
    }),
    { method: 'POST', path: '/v1/chat/completions' },
  );
  /** `sse` through the delta stage and then the response filter, in one core (respond.ts). */
  const throughChain = (protocol: LlmStreamProtocol, sse: string, sizes: number[]) =>
    throughChunks(
      toNodeTransform(
        chainFilterCores(
          createLlmStreamRedactionCore(protocol, plan!.detectors),
          createFilterCore('text/event-stream', plan)!,
        ),
      ),
      sse,
      sizes,
    );

  // Regression: with the filter first, `ce@example.com` reached the stage as a marker already,
  // and the stage let `ali` go: the agent read `Mail ali[REDACTED_EMAIL] now.`
  it.each(PROTOCOLS)(
    '%s: a delta that is an address on its own does not let the start of the address out',
    async (protocol) => {
      const out = await throughChain(
        protocol,
        providerStream(protocol, ['Mail ali', 'ce@example.com', ' now.']),
        [1000],
      );
      expect(sdkText(protocol, out)).toBe('Mail [REDACTED_EMAIL] now.');
      expect(out).not.toContain('ali');
    },
  );

  const piece = fc.constantFrom(
    'jane.doe@example.com',
    'x.y@a.io',
    '+1 (415) 555-2671',
    '123-45-6789',
    '4111 1111 1111 1111',
    '10.0.0.1',
    'a',
  );
  // Words between the pieces: where two numeric shapes touch, the detectors' overlaps resolve
  // differently over the whole text and over a delta, and the filter may redact more than the
  // whole text's redaction (never less). Cut anywhere, as here, an address's tail is often an
  // address of its own, the case the regression above pins down.
  const text = fc.array(piece, { maxLength: 12 }).map((parts) => parts.join(' lorem '));

  it.each(PROTOCOLS)(
    '%s: for any deltas and any byte chunking, the SDK text equals the whole text redacted',
    async (protocol) => {
      const through = (sse: string, sizes: number[]) => throughChain(protocol, sse, sizes);
      await expectWholeTextRedacted(protocol, text, through, plan!.detectors, 100);
    },
  );
});

describe('an event that never ends', () => {
  // Regression: the stage kept every byte of an event until its blank line. It now runs first,
  // with no filter before it to bound an event.
  it('is passed on as it arrives, holding at most MAX_EVENT_BYTES; the next event is read again', () => {
    const core = createLlmStreamRedactionCore('openai', detectors);
    const chunk = Buffer.from(`data: {"x":"${'a'.repeat(64 * 1024)}`);
    let sent = 0;
    let out = '';
    for (let i = 0; i < 48; i++) {
      for (const part of core.push(chunk)) {
        sent += part.length;
        out += Buffer.from(part).toString('utf8');
      }
      // What it holds back is what was written less what it sent.
      expect((i + 1) * chunk.length - sent).toBeLessThanOrEqual(1024 * 1024 + chunk.length);
    }
    const next = providerStream('openai', ['Write to alice@exa', 'mple.com today.']);
    for (const part of [...core.push(Buffer.from(`"}\n\n${next}`)), ...core.end()]) {
      out += Buffer.from(part).toString('utf8');
    }
    expect(out.startsWith(`data: {"x":"${'a'.repeat(64 * 1024)}`)).toBe(true);
    const [big, ...rest] = out.split('\n\n');
    expect(big!.length).toBe(48 * chunk.length + 2);
    expect(sdkText('openai', rest.join('\n\n'))).toBe('Write to [REDACTED_EMAIL] today.');
  });
});
