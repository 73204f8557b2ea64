/**
 * Joins the chunks of a provider's body that arrive within one turn of the event loop into
 * one. A streaming provider writes an SSE event at a time, so one socket read holds hundreds
 * of tiny chunks; without this every one of them paid for every later stage (decoding,
 * secret scrubbing, the response filter, the LLM redaction) and for a write system call to
 * the agent of its own. Nothing waits for more data: what arrived is passed on before the
 * event loop next polls for I/O, so the first byte leaves as soon as it did before.
 */
import { Transform } from 'node:stream';

/** A synchronous step run on each joined chunk inside the same stage (the secret scrubber). */
export interface ChunkStep {
  push(chunk: Buffer): Buffer;
  end(): Buffer;
}

export function createTickCoalescer(then?: ChunkStep): Transform {
  let pending: Buffer[] = [];
  let scheduled = false;
  const take = (): Buffer => {
    const joined = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    pending = [];
    return then ? then.push(joined) : joined;
  };
  // An empty result (the step held everything back) is not passed on: it would read as the end.
  const some = (b: Buffer): Buffer | undefined => (b.length > 0 ? b : undefined);
  const stage = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      pending.push(chunk);
      if (this.readableLength >= this.readableHighWaterMark) {
        // The reader is behind: pass the batch on now, so Transform holds this write's
        // callback until it reads (backpressure reaches the provider's socket as before).
        callback(null, some(take()));
        return;
      }
      if (!scheduled) {
        scheduled = true;
        process.nextTick(() => {
          scheduled = false;
          if (pending.length === 0 || stage.destroyed) return;
          const out = some(take());
          if (out) stage.push(out);
        });
      }
      callback();
    },
    flush(callback) {
      const head = pending.length > 0 ? take() : undefined;
      const rest = then?.end();
      const out = head && rest?.length ? Buffer.concat([head, rest]) : (head ?? rest);
      callback(null, out && some(out));
    },
  });
  return stage;
}
