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

/**
 * Work (joining, and the step) after which the next chunk waits for the event loop to go round.
 * A provider that sends 10 MiB at once over loopback is read chunk after chunk in one go, and
 * scrubbing them held every other request of the process for 55-138 ms
 * (`bench/hostile-input.ts`, a download that reflects the credential).
 */
const TURN_BUDGET_MS = 10;
/** A pause this long between two batches means the event loop went round: the budget restarts. */
const IDLE_MS = 1;

export function createTickCoalescer(then?: ChunkStep): Transform {
  let pending: Buffer[] = [];
  let scheduled = false;
  let busySince = 0;
  let lastActive = -Infinity;
  let turn: NodeJS.Immediate | null = null;
  const take = (): Buffer => {
    const started = performance.now();
    if (started - lastActive > IDLE_MS) busySince = started;
    const joined = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    pending = [];
    const out = then ? then.push(joined) : joined;
    lastActive = performance.now();
    return out;
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
      if (lastActive - busySince < TURN_BUDGET_MS) return callback();
      // Worked its budget without a pause: the next chunk waits for the next turn, when other
      // work has had its go (the writer is held back meanwhile, down to the provider's socket).
      turn = setImmediate(() => {
        turn = null;
        busySince = lastActive = performance.now();
        callback();
      });
    },
    destroy(err, callback) {
      if (turn) clearImmediate(turn);
      callback(err);
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
