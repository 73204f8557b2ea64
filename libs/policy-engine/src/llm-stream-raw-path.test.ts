/**
 * The LLM redaction stage's raw path (llm-stream-redaction.ts): a text delta recognised from its
 * text alone must give the agent exactly the events the parsing path gives, for any delta text,
 * any extra members, any escapes and any chunking; and shapes it must not trust go down the
 * parsing path.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLlmStreamRedaction, findBlankLine, type LlmStreamProtocol } from './llm-stream-redaction.js';
import { emailDetector, phoneDetector, ssnDetector, type Detector } from './pii-detectors.js';
import { throughChunks } from './test-fixtures.js';

const detectors: Detector[] = [emailDetector(), phoneDetector(), ssnDetector()];

function run(
  protocol: LlmStreamProtocol,
  sse: string,
  sizes: number[],
  rawPath: boolean,
  using: readonly Detector[] = detectors,
): Promise<string> {
  return throughChunks(createLlmStreamRedaction(protocol, using, { rawPath }), sse, sizes);
}

/** Every event as the agent's SSE parser sees it: the event name and the parsed data. */
function parsedEvents(sse: string): Array<{ event: string | null; data: unknown }> {
  return sse
    .split(/\r?\n\r?\n/)
    .filter((b) => b.trim() !== '')
    .map((block) => {
      const lines = block.split(/\r?\n/);
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? null;
      const data = lines
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
        .join('\n');
      let parsed: unknown = data;
      try {
        parsed = JSON.parse(data);
      } catch {
        // not JSON ([DONE], or an event passed as it came): compared as text
      }
      return { event, data: parsed };
    });
}

/** A JSON string literal for `s`, spelled with the escapes a provider may use. */
function literal(s: string, style: number): string {
  const plain = JSON.stringify(s);
  if (style % 3 === 0) return plain;
  if (style % 3 === 1) return plain.replace(/\//g, '\\/');
  // Every ASCII letter as \uXXXX: the same string, no byte of it in plain sight.
  return `"${[...plain.slice(1, -1)].map((ch) => (/[A-Za-z]/.test(ch) ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}` : ch)).join('')}"`;
}

const piece = fc.constantFrom(
  'alice',
  '@',
  'example.com',
  ' ',
  'bob@corp.example',
  '+1 415 555 0134',
  '078-05-1120',
  '"quoted"',
  'back\\slash',
  'line\nbreak',
  'tab\t',
  'ünïcødé ',
  '😀',
  '</script>',
  '.',
  '7',
);
const deltaText = fc.array(piece, { maxLength: 4 }).map((p) => p.join(''));

/** Top-level members around `choices`, some spelled unlike JSON.stringify would. */
const extraMember = fc.constantFrom(
  '"id":"chatcmpl-1"',
  '"object":"chat.completion.chunk"',
  '"created":1717495200',
  '"created":1.7e9',
  '"model":"gpt-\\u0034o"',
  '"system_fingerprint":null',
  '"service_tier":"default"',
  '"usage":null',
  '"obfuscation":"a\\/b"',
  '"flag":true',
  '"neg":-0.5',
);

function openAiEvent(
  members: string[],
  split: number,
  index: number,
  content: string,
  style: number,
): string {
  const before = members.slice(0, split);
  const after = members.slice(split);
  const role = style % 2 === 0 ? '"role":"assistant",' : '';
  const tail = style % 4 === 1 ? ',"refusal":null' : '';
  const choice = `{"index":${index},"delta":{${role}"content":${literal(content, style)}${tail}},${style % 5 === 0 ? '' : '"logprobs":null,'}"finish_reason":null}`;
  return `data: {${[...before, `"choices":[${choice}]`, ...after].join(',')}}\n\n`;
}

function anthropicEvent(index: number, text: string, style: number): string {
  const nl = style % 2 === 0 ? '\n' : '\r\n';
  return `event: content_block_delta${nl}data: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":${literal(text, style)}}}\n\n`;
}

const openAiStream = fc
  .record({
    members: fc.uniqueArray(extraMember, { maxLength: 5, selector: (m) => m.split(':')[0] }),
    split: fc.nat(5),
    deltas: fc.array(fc.tuple(fc.nat(1), deltaText, fc.nat(11)), { maxLength: 14 }),
  })
  .map(
    ({ members, split, deltas }) =>
      deltas.map(([i, d, style]) => openAiEvent(members, split, i, d, style)).join('') +
      `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n` +
      'data: [DONE]\n\n',
  );

const anthropicStream = fc
  .array(fc.tuple(fc.nat(1), deltaText, fc.nat(5)), { maxLength: 14 })
  .map(
    (deltas) =>
      `event: message_start\ndata: {"type":"message_start","message":{"id":"m1"}}\n\n` +
      deltas.map(([i, d, style]) => anthropicEvent(i, d, style)).join('') +
      `event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n` +
      `event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n` +
      `event: message_stop\ndata: {"type":"message_stop"}\n\n`,
  );

const chunking = fc.array(fc.integer({ min: 1, max: 97 }), { minLength: 1, maxLength: 6 });

describe('the raw path of LLM stream redaction', () => {
  it.each([
    ['OpenAI', 'openai', openAiStream],
    ['Anthropic (LF or CRLF line ends)', 'anthropic', anthropicStream],
  ] as const)(
    '%s deltas: the agent parses the same events as on the parsing path, for any text, members, escapes and chunking',
    async (_name, protocol, streams) => {
      await fc.assert(
        fc.asyncProperty(streams, chunking, async (sse, sizes) => {
          const raw = await run(protocol, sse, sizes, true);
          const parsed = await run(protocol, sse, sizes, false);
          expect(parsedEvents(raw)).toEqual(parsedEvents(parsed));
        }),
        { numRuns: 300 },
      );
    },
  );

  it('with a custom pattern as well', async () => {
    const ticket: Detector = {
      name: 'ticket',
      replacement: '[TICKET]',
      scan(text) {
        const re = /TCK-[0-9]{4}/g;
        return (from) => {
          re.lastIndex = from;
          const m = re.exec(text);
          return m ? { start: m.index, end: m.index + m[0].length } : null;
        };
      },
    };
    const custom = [...detectors, ticket];
    const sse =
      openAiEvent(['"id":"c"'], 1, 0, 'see TCK-', 0) +
      openAiEvent(['"id":"c"'], 1, 0, '1234 now', 0) +
      'data: [DONE]\n\n';
    for (const sizes of [[7], [4096]]) {
      const raw = await run('openai', sse, sizes, true, custom);
      expect(parsedEvents(raw)).toEqual(parsedEvents(await run('openai', sse, sizes, false, custom)));
      // Regression: the digits' run used to be held without the word it starts in (`TCK-`), so
      // the pattern never saw the whole ticket.
      expect(raw).toContain('[TICKET]');
      expect(raw).not.toContain('1234');
    }
  });

  it('is the path taken: an unchanged delta keeps its bytes, where the parsing path re-serialises it', async () => {
    const event =
      'data: {"created":1.50,"choices":[{"index":0,"delta":{"content":"Hello there "},"finish_reason":null}]}\n\n';
    expect(await run('openai', event, [4096], true)).toBe(event);
    expect(await run('openai', event, [4096], false)).toContain('"created":1.5,');
  });

  it('text still held at [DONE] goes out in a chunk with the stream id, model and created of its frame', async () => {
    // No finishing chunk: the held tail is sent in a synthetic chunk built from the frame.
    const member = [
      '"id":"chatcmpl-7"',
      '"object":"chat.completion.chunk"',
      '"created":1717495200',
      '"model":"m-1"',
    ];
    const sse =
      openAiEvent(member, 4, 0, 'mail to bob@corp.exa', 0) +
      openAiEvent(member, 4, 0, 'mple', 0) +
      'data: [DONE]\n\n';
    for (const sizes of [[4096], [9]]) {
      const raw = await run('openai', sse, sizes, true);
      expect(parsedEvents(raw)).toEqual(parsedEvents(await run('openai', sse, sizes, false)));
      const last = parsedEvents(raw).at(-2)!.data as Record<string, unknown>;
      expect(last).toMatchObject({
        id: 'chatcmpl-7',
        object: 'chat.completion.chunk',
        created: 1717495200,
        model: 'm-1',
      });
      expect(raw).not.toContain('bob@');
    }
  });

  it('redacts an address split across raw-path deltas, and across escapes', async () => {
    const sse =
      openAiEvent(['"id":"c"'], 1, 0, 'mail ali', 0) +
      openAiEvent(['"id":"c"'], 1, 0, 'ce@exam', 2) +
      openAiEvent(['"id":"c"'], 1, 0, 'ple.com today', 1) +
      'data: [DONE]\n\n';
    const out = await run('openai', sse, [13], true);
    const text = parsedEvents(out)
      .map(
        (e) =>
          (e.data as { choices?: Array<{ delta: { content?: string } }> }).choices?.[0]?.delta.content ?? '',
      )
      .join('');
    expect(text).toBe('mail [REDACTED_EMAIL] today');
    expect(out).not.toMatch(/alice|ali.*ce@|\\u0065\\u0078\\u0061/);
  });

  // Shapes that look like a delta but are not what the pattern proves: each must take the parsing
  // path, so the outcome is the parsing path's, whatever it is.
  const lookalikes: Array<[string, string]> = [
    [
      'a second choices key after the delta (JSON.parse keeps the last)',
      'data: {"choices":[{"index":0,"delta":{"content":"alice@example.com"},"finish_reason":null}],"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}',
    ],
    [
      'a second choices key before the delta',
      'data: {"choices":null,"choices":[{"index":0,"delta":{"content":"alice@example.com"},"finish_reason":null}]}',
    ],
    [
      'whitespace inside the JSON',
      'data: { "choices":[{"index":0,"delta":{"content":"alice@example.com"},"finish_reason":null}]}',
    ],
    [
      'an escaped key',
      'data: {"\\u0063hoices":[{"index":0,"delta":{"content":"alice@example.com"},"finish_reason":null}]}',
    ],
    [
      'two choices',
      'data: {"choices":[{"index":0,"delta":{"content":"alice@example.com"},"finish_reason":null},{"index":1,"delta":{"content":"bob@example.com"},"finish_reason":null}]}',
    ],
    [
      'a finished choice',
      'data: {"choices":[{"index":0,"delta":{"content":"alice@example.com"},"finish_reason":"stop"}]}',
    ],
    [
      'an invalid escape in the delta',
      'data: {"choices":[{"index":0,"delta":{"content":"alice@example.com \\x"},"finish_reason":null}]}',
    ],
    [
      'a raw control character in the delta',
      'data: {"choices":[{"index":0,"delta":{"content":"alice@example.com\u0001"},"finish_reason":null}]}',
    ],
    [
      'an object as an extra member',
      'data: {"meta":{"choices":1},"choices":[{"index":0,"delta":{"content":"alice@example.com "},"finish_reason":null}]}',
    ],
    [
      'an index with a leading zero',
      'data: {"choices":[{"index":01,"delta":{"content":"alice@example.com "},"finish_reason":null}]}',
    ],
  ];
  it.each(lookalikes)('%s: the outcome of the parsing path', async (_name, block) => {
    const sse = `${block}\n\ndata: [DONE]\n\n`;
    for (const sizes of [[4096], [5]]) {
      expect(await run('openai', sse, sizes, true)).toBe(await run('openai', sse, sizes, false));
    }
  });

  // The frame of a stream's delta events is remembered after the first match (RawFrame): a block
  // with that frame's prefix and suffix around anything but one string literal is not a delta.
  it.each([
    [
      'a second choices member spliced between the frame',
      `"x"},"finish_reason":null}],"choices":[{"index":0,"delta":{"content":"alice@example.com "`,
    ],
    ['two literals', `"alice@example.com ""bob@example.com "`],
    ['an unterminated literal', `"alice@example.com `],
    ['a number', `42`],
    ['nothing', ``],
  ])('%s after a delta of the same stream: the outcome of the parsing path', async (_name, middle) => {
    const prefix = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":';
    const suffix = '},"finish_reason":null}]}';
    const sse = `${prefix}"mail carol@corp.example "${suffix}\n\n${prefix}${middle}${suffix}\n\ndata: [DONE]\n\n`;
    for (const sizes of [[4096], [5]]) {
      expect(await run('openai', sse, sizes, true)).toBe(await run('openai', sse, sizes, false));
    }
  });

  it('an Anthropic delta with members in another order takes the parsing path', async () => {
    const sse =
      'event: content_block_delta\ndata: {"index":0,"type":"content_block_delta","delta":{"type":"text_delta","text":"bob@corp.example "}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"text":"carol@corp.example ","type":"text_delta"}}\n\n' +
      'event: message_stop\ndata: {"type":"message_stop"}\n\n';
    const raw = await run('anthropic', sse, [4096], true);
    expect(raw).toBe(await run('anthropic', sse, [4096], false));
    expect(raw).not.toMatch(/bob@|carol@/);
  });
});

describe('findBlankLine', () => {
  it('finds what /\\r?\\n\\r?\\n/ finds from any position', () => {
    const text = fc.array(fc.constantFrom('a', '\r', '\n'), { maxLength: 24 }).map((a) => a.join(''));
    fc.assert(
      fc.property(text, fc.nat(24), (t, from) => {
        const re = /\r?\n\r?\n/g;
        re.lastIndex = from;
        const m = from <= t.length ? re.exec(t) : null;
        expect(findBlankLine(t, from)).toEqual(m ? { start: m.index, end: m.index + m[0].length } : null);
      }),
      { numRuns: 2000 },
    );
  });
});
