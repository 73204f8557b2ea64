/**
 * The plugin's log, filtered by `debugLevel` and written to the host's logger. Callers pass
 * ids, statuses, methods and URL paths only — never headers, bodies, queries or credentials —
 * and every line is scrubbed once more on the way out.
 */
import type { DebugLevel } from './config.js';
import { scrub } from './secret.js';

export interface LogSink {
  debug?: (message: string) => void;
  info: (message: string) => void;
  warn: (message: string) => void;
  error: (message: string) => void;
}

export interface Log {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

const RANK: Record<DebugLevel, number> = { silent: 0, error: 1, warn: 2, info: 3, debug: 4 };

/** Where lines go when the host gives no logger: stderr, the only console channel allowed. */
const STDERR_SINK: LogSink = {
  info: (m) => console.error(m),
  warn: (m) => console.error(m),
  error: (m) => console.error(m),
};

export function createLog(level: DebugLevel, sink: LogSink = STDERR_SINK): Log {
  const line = (at: Exclude<DebugLevel, 'silent'>, write: ((m: string) => void) | undefined) => {
    return (message: string) => {
      if (RANK[at] <= RANK[level]) write?.(`[vlt-vault] ${scrub(message)}`);
    };
  };
  return {
    debug: line('debug', sink.debug ?? sink.info),
    info: line('info', sink.info),
    warn: line('warn', sink.warn),
    error: line('error', sink.error),
  };
}

/** A URL as logs may show it: origin and path, without a query (which can carry secrets). */
export function loggableUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid url)';
  }
}
