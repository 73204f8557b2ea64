import { describe, expect, it } from 'vitest';
import {
  REVIEW_BODY_BYTES,
  REVIEW_CONTEXT_CHARS,
  REVIEW_PREVIEW_CHARS,
  REVIEW_STRING_CHARS,
  reviewedBody,
  reviewedContext,
} from './review-copy.js';

const json = (value: unknown, text = JSON.stringify(value)) => ({
  inspected: { kind: 'json' as const, value },
  size: Buffer.byteLength(text),
});

describe('what an approval keeps of a body (ADR 0099)', () => {
  it('keeps a body up to 256 KiB whole, as the agent sent it: an object, or the JSON text of a model call', () => {
    const value = { fields: { summary: 'x'.repeat(REVIEW_BODY_BYTES - 100) } };
    expect(reviewedBody(value, json(value))).toEqual({ body: value });
    const text = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi "there"' }] });
    expect(reviewedBody(text, json(JSON.parse(text), text))).toEqual({ body: text });
    expect(reviewedBody(undefined, { inspected: { kind: 'none' }, size: 0 })).toEqual({ body: null });
  });

  it('keeps bytes by their size and digest, never as numbers', () => {
    const bytes = new Uint8Array([1, 2, 3]);
    expect(reviewedBody(bytes, { inspected: { kind: 'opaque' }, size: 3 })).toEqual({
      body: { bytes: 3, sha256: '039058c6f2c0cb492c533b0a4d14ef77cc0f78abccced5287d84a1a2011cfb81' },
    });
  });

  it('keeps a larger body as a preview, never as body: its size, its structure, its strings cut and counted', () => {
    const image = `data:image/png;base64,${'A'.repeat(3_000_000)}`;
    const text = JSON.stringify({
      model: 'gpt-4o',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image_url', image_url: { url: image } },
          ],
        },
      ],
    });
    const kept = reviewedBody(text, json(JSON.parse(text), text));
    expect(kept).not.toHaveProperty('body');
    expect(kept).toEqual({
      bodyPreview: {
        bytes: text.length,
        shown: {
          model: 'gpt-4o',
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'What is in this picture?' },
                {
                  type: 'image_url',
                  image_url: {
                    url: `${image.slice(0, REVIEW_STRING_CHARS)}… [${image.length - REVIEW_STRING_CHARS} more characters]`,
                  },
                },
              ],
            },
          ],
        },
      },
    });
  });

  it('a preview is bounded however many members the body has, and counts what it left out', () => {
    const value = { items: Array.from({ length: 100_000 }, (_, i) => ({ id: i, note: 'n'.repeat(40) })) };
    const kept = reviewedBody(value, json(value)) as { bodyPreview: { bytes: number; shown: unknown } };
    const written = JSON.stringify(kept.bodyPreview.shown);
    expect(written.length).toBeLessThanOrEqual(REVIEW_PREVIEW_CHARS + 2 * REVIEW_STRING_CHARS);
    const items = (kept.bodyPreview.shown as { items: unknown[] }).items;
    const more = items.at(-1) as string;
    expect(more).toBe(`… [${100_000 - (items.length - 1)} more items]`);
    expect(items[0]).toEqual({ id: 0, note: 'n'.repeat(40) });

    const empties = Array.from({ length: 100_000 }, () => []);
    const hollow = (reviewedBody(empties, json(empties)) as { bodyPreview: { shown: unknown[] } }).bodyPreview
      .shown;
    expect(JSON.stringify(hollow).length).toBeLessThanOrEqual(REVIEW_PREVIEW_CHARS + 2 * REVIEW_STRING_CHARS);
    expect(hollow.at(-1)).toBe(`… [${100_000 - (hollow.length - 1)} more items]`);

    const wide = Object.fromEntries(Array.from({ length: 25_000 }, (_, i) => [`key${i}`, 'v'.repeat(20)]));
    const shown = (reviewedBody(wide, json(wide)) as { bodyPreview: { shown: Record<string, unknown> } })
      .bodyPreview.shown;
    const kept2 = Object.keys(shown).length - 1;
    expect(shown['…']).toBe(`${25_000 - kept2} more members`);
    expect(JSON.stringify(shown).length).toBeLessThanOrEqual(REVIEW_PREVIEW_CHARS + 2 * REVIEW_STRING_CHARS);
  });

  it('counts a string body as it is written in the approval: escapes included', () => {
    // 100 KiB sent, but each control character is written as six characters in the approval.
    const text = '\u0001'.repeat(100 * 1024);
    const kept = reviewedBody(text, { inspected: { kind: 'opaque' }, size: text.length });
    expect(kept).toEqual({
      bodyPreview: {
        bytes: text.length,
        shown: `${text.slice(0, 16 * 1024)}… [${text.length - 16 * 1024} more characters]`,
      },
    });
  });

  it('never splits a surrogate pair where it cuts a string', () => {
    const text = `${'x'.repeat(REVIEW_STRING_CHARS - 1)}😀${'y'.repeat(REVIEW_BODY_BYTES)}`;
    const shown = (reviewedBody({ t: text }, json({ t: text })) as { bodyPreview: { shown: { t: string } } })
      .bodyPreview.shown.t;
    expect(shown.startsWith(`${'x'.repeat(REVIEW_STRING_CHARS - 1)}… [`)).toBe(true);
    // Cut before the pair, not between its halves: no lone surrogate is left.
    expect(shown).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
  });

  it('keeps a key named __proto__ as a key, not as the prototype of the copy', () => {
    const value = JSON.parse(
      `{"__proto__": {"polluted": true}, "big": "${'z'.repeat(REVIEW_BODY_BYTES)}"}`,
    ) as object;
    const shown = (reviewedBody(value, json(value)) as { bodyPreview: { shown: Record<string, unknown> } })
      .bodyPreview.shown;
    expect(Object.getPrototypeOf(shown)).toBe(Object.prototype);
    expect(Object.keys(shown)).toEqual(['__proto__', 'big']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('what an approval keeps of the agent context', () => {
  it('keeps a small context as it is, and a large one as a preview', () => {
    const small = { task: 'file the weekly report', ticket: 'OPS-1' };
    expect(reviewedContext(small)).toBe(small);
    const large = { task: 'summarise', transcript: 't'.repeat(5 * 1024 * 1024) };
    const kept = reviewedContext(large);
    expect(kept.task).toBe('summarise');
    expect(kept.transcript).toBe(
      `${'t'.repeat(REVIEW_STRING_CHARS)}… [${5 * 1024 * 1024 - REVIEW_STRING_CHARS} more characters]`,
    );
    expect(JSON.stringify(kept).length).toBeLessThanOrEqual(REVIEW_CONTEXT_CHARS + 2 * REVIEW_STRING_CHARS);
  });
});
