import { describe, expect, it } from 'vitest';
import { hasUnstorableText, storableJson, storableText } from './storable.js';

describe('storable text', () => {
  it('replaces NUL and lone surrogates, keeps valid pairs', () => {
    expect(storableText('a\u0000b')).toBe('a\ufffdb');
    expect(storableText('x\ud800y\udc00z')).toBe('x\ufffdy\ufffdz');
    expect(storableText('emoji 😀 ok')).toBe('emoji 😀 ok');
    expect(hasUnstorableText('ok')).toBe(false);
    expect(hasUnstorableText('\ud83d')).toBe(true);
  });

  it('copies JSON with storable keys and values, bounded in depth', () => {
    const v = { 'x-\u0000': ['\ud800', { deep: 1 }], __proto__key: 'p', n: Number.NaN };
    expect(storableJson(v)).toEqual({ 'x-\ufffd': ['\ufffd', { deep: 1 }], __proto__key: 'p', n: null });
    let deep: unknown = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    expect(JSON.stringify(storableJson(deep))).toContain('[too deep]');
  });
});
