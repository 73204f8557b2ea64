/**
 * Response bodies shared by the streaming benchmarks (bench/policy-engine.ts measures the filter
 * alone, bench/streaming.ts the gateway end to end), so both measure the same bytes.
 */

/**
 * An LLM-style event stream: `count` small chat-completion chunks, one SSE event per element,
 * an e-mail address in every 50th and a phone number in every 70th (none with `pii: false`),
 * then `data: [DONE]`.
 */
export function llmEvents(count: number, { pii = true }: { pii?: boolean } = {}): Buffer[] {
  const chunks: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const content = !pii
      ? ` token${i % 97}`
      : i % 50 === 0
        ? ' reach me at jane.doe@example.com'
        : i % 70 === 0
          ? ' or +1 415 555 2671'
          : ` token${i % 97}`;
    const event = {
      id: 'chatcmpl-9xKq3Rj2mZ',
      object: 'chat.completion.chunk',
      created: 1717495200,
      model: 'model-2024-05-13',
      choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }],
    };
    chunks.push(Buffer.from(`data: ${JSON.stringify(event)}\n\n`));
  }
  chunks.push(Buffer.from('data: [DONE]\n\n'));
  return chunks;
}

/** The same bytes re-cut into chunks of `size`, as a fast upstream delivers them. */
export function rechunk(chunks: Uint8Array[], size: number): Buffer[] {
  const all = Buffer.concat(chunks);
  const out: Buffer[] = [];
  for (let i = 0; i < all.length; i += size) out.push(all.subarray(i, i + size));
  return out;
}

/** About `bytes` of plain text in 16 KiB chunks, an e-mail address and a phone number on every line. */
export function textChunks(bytes: number): Buffer[] {
  const line =
    'The quarterly numbers are attached; ping jane.doe@example.com or call 415-555-2671 with questions.\n';
  return rechunk([Buffer.from(line.repeat(Math.ceil(bytes / line.length)))], 16384);
}

export const byteCount = (chunks: Uint8Array[]): number => chunks.reduce((n, c) => n + c.length, 0);
