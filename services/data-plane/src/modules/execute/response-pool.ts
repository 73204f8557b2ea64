/**
 * Worker threads for large buffered answers. Parsing, filtering and serialising a multi-megabyte
 * JSON body takes 100-250 ms of uninterruptible work (V8 parses 100,000 distinct keys in about
 * 100 ms), and on the request thread that is a stall for every tenant of the process, health
 * checks included. Off-thread, the event loop only copies bytes in and JSON text out (ADR 0056).
 */
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import type { ResponseRoute } from '@vlt/policy-engine';
import type { FilterTask, FilterTaskResult } from './response-worker.js';

export interface ResponseFilterPool {
  /** The envelope body's JSON text, or why the body could not be filtered. */
  filter(task: FilterTask): Promise<FilterTaskResult>;
  close(): Promise<void>;
}

export type { FilterTask, FilterTaskResult };
export type { ResponseRoute };

/**
 * Under `tsx` (development, tests) the worker is TypeScript and needs the same loader. The
 * process's own flags are not passed on: some (--cpu-prof, --trace-gc) are refused in workers.
 */
function workerFile(): { filename: string; execArgv: string[] } {
  const typescript = import.meta.url.endsWith('.ts');
  const filename = new URL(`./response-worker.${typescript ? 'ts' : 'js'}`, import.meta.url).href;
  return { filename, execArgv: typescript ? ['--import', 'tsx'] : [] };
}

export function createResponseFilterPool(opts: { threads?: number } = {}): ResponseFilterPool {
  // One core stays with the event loop; at least one worker, at most four.
  const threads = opts.threads ?? Math.max(1, Math.min(4, availableParallelism() - 1));
  const pool = new Piscina<FilterTask, FilterTaskResult>({
    ...workerFile(),
    minThreads: 1,
    maxThreads: threads,
    // Idle workers go after a minute; the first is kept so a burst never waits for a start.
    idleTimeout: 60_000,
  });
  return {
    filter(task) {
      // The body moves to the worker without a copy when it owns its whole buffer.
      const own = task.body.byteOffset === 0 && task.body.byteLength === task.body.buffer.byteLength;
      const body = own ? task.body : new Uint8Array(task.body);
      return pool.run({ ...task, body }, { transferList: [body.buffer as ArrayBuffer] });
    },
    close: () => pool.destroy(),
  };
}
