import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createSecretScrubber } from './secret-scrubber.js';
import { createTickCoalescer } from './tick-coalescer.js';

function collect(stage: ReturnType<typeof createTickCoalescer>): Buffer[] {
  const out: Buffer[] = [];
  stage.on('data', (c: Buffer) => out.push(c));
  return out;
}

describe('tick coalescer', () => {
  it('passes the chunks of one event-loop turn on as one, bytes and order intact', async () => {
    const stage = createTickCoalescer();
    const out = collect(stage);
    for (const s of ['data: {"a":', '1}\n\n', 'data: [DONE]', '\n\n']) stage.write(Buffer.from(s));
    await nextTurn();
    expect(out.map(String)).toEqual(['data: {"a":1}\n\ndata: [DONE]\n\n']);
  });

  it('never waits for more: each turn’s chunks leave before the next turn', async () => {
    const stage = createTickCoalescer();
    const out = collect(stage);
    stage.write(Buffer.from('first'));
    await nextTurn();
    expect(out.map(String)).toEqual(['first']);
    stage.write(Buffer.from('second'));
    stage.end(Buffer.from(' and last'));
    await new Promise((r) => stage.once('end', r));
    expect(out.map(String)).toEqual(['first', 'second and last']);
  });

  it('holds writes back while nobody reads (bounded, backpressure reaches the writer)', async () => {
    const stage = createTickCoalescer();
    const chunk = Buffer.alloc(1024, 'x');
    let accepted = 0;
    // Nothing reads: the writer must be told to stop long before it wrote a megabyte.
    for (let turn = 0; turn < 64 && accepted < 1024; turn++) {
      let ok = true;
      for (let i = 0; i < 16 && ok; i++) {
        ok = stage.write(chunk);
        accepted++;
      }
      if (!ok) break;
      await nextTurn();
    }
    expect(accepted).toBeLessThan(256);
    // And reading drains it all, in order.
    const out = collect(stage);
    stage.end();
    await new Promise((r) => stage.once('end', r));
    expect(Buffer.concat(out).length).toBe(accepted * chunk.length);
  });
});

describe('tick coalescer with a step (the secret scrubber in the same stage)', () => {
  it('scrubs a secret split across turns and releases the held-back tail at the end', async () => {
    const scrubber = createSecretScrubber(['sk-live-0123456789abcdef'])!;
    const stage = createTickCoalescer(scrubber);
    const out = collect(stage);
    stage.write(Buffer.from('data: {"echo":"sk-live-01234'));
    await nextTurn();
    stage.write(Buffer.from('56789abcdef"}\n\ndata: [DONE]\n\nsk-live'));
    await nextTurn();
    stage.end();
    await new Promise((r) => stage.once('end', r));
    const text = Buffer.concat(out).toString();
    expect(text).not.toContain('sk-live-0123456789abcdef');
    expect(text).toContain('[REDACTED]');
    // A prefix of the secret that never completed is the provider's text, and comes out last.
    expect(text.endsWith('data: [DONE]\n\nsk-live')).toBe(true);
    // Nothing empty was passed on while the scrubber held bytes back.
    expect(out.every((c) => c.length > 0)).toBe(true);
  });
});

describe('tick coalescer takes turns with the rest of the process', () => {
  it('regression: a step slow on each batch lets the event loop go round, bytes intact (hostile input: a 10 MiB download that reflects the credential)', async () => {
    // The turn each batch was stepped in, counted by a ticker that runs once per turn.
    let turnNo = 0;
    let ticking = true;
    const tick = () => {
      turnNo++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const turns: number[] = [];
    const slow = {
      push(chunk: Buffer) {
        // Scrubbing a large batch: a few milliseconds each.
        const until = performance.now() + 6;
        while (performance.now() < until);
        turns.push(turnNo);
        return chunk;
      },
      end: () => Buffer.alloc(0),
    };
    const chunks = Array.from({ length: 20 }, (_, i) => Buffer.alloc(16 * 1024, 97 + i));
    const stage = createTickCoalescer(slow);
    const out = collect(stage);
    try {
      // A source that writes as soon as each write is taken, as a socket with data buffered does.
      for (const c of chunks) await new Promise((r) => stage.write(c, r));
      stage.end();
      await new Promise((r) => stage.once('end', r));
    } finally {
      ticking = false;
    }
    expect(Buffer.concat(out).equals(Buffer.concat(chunks))).toBe(true);
    expect(new Set(turns).size).toBeGreaterThan(1);
  });
});
