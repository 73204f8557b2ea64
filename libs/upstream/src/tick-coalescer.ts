/**
 * Joins the chunks of a provider's body that arrive within one turn of the event loop into
 * one. A streaming provider writes an SSE event at a time, so one socket read holds hundreds
 * of tiny chunks; without this every one of them paid for every later stage (decoding,
 * secret scrubbing, the response filter, the LLM redaction) and for a write system call to
 * the agent of its own. Nothing waits for more data: what arrived is passed on before the
 * event loop next polls for I/O, so the first byte leaves as soon as it did before.
 */
import { Transform } from 'node:stream';

export function createTickCoalescer(): Transform {
  let pending: Buffer[] = [];
  let scheduled = false;
  const take = (): Buffer => {
    const out = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    pending = [];
    return out;
  };
  const stage = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      pending.push(chunk);
      if (this.readableLength >= this.readableHighWaterMark) {
        // The reader is behind: pass the batch on now, so Transform holds this write's
        // callback until it reads (backpressure reaches the provider's socket as before).
        callback(null, take());
        return;
      }
      if (!scheduled) {
        scheduled = true;
        process.nextTick(() => {
          scheduled = false;
          if (pending.length > 0 && !stage.destroyed) stage.push(take());
        });
      }
      callback();
    },
    flush(callback) {
      callback(null, pending.length > 0 ? take() : undefined);
    },
  });
  return stage;
}
