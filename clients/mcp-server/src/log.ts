/**
 * One JSON line per event, to a sink the caller picks (stderr in main: in stdio mode stdout
 * carries the protocol, and a stray line there would corrupt it). Callers log names, ids,
 * statuses and codes, never request arguments; every line is scrubbed of vault credentials
 * anyway.
 */
import { scrubText } from './errors.js';

export type LogLevel = 'silent' | 'error' | 'warn' | 'info' | 'debug';

export type LogFields = Record<string, string | number | boolean | null | undefined>;

export interface Logger {
  error(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
}

const RANK: Record<LogLevel, number> = { silent: 0, error: 1, warn: 2, info: 3, debug: 4 };

export function createLogger(write: (line: string) => void, level: LogLevel): Logger {
  const at =
    (l: Exclude<LogLevel, 'silent'>) =>
    (msg: string, fields: LogFields = {}): void => {
      if (RANK[l] > RANK[level]) return;
      const line = JSON.stringify({
        time: new Date().toISOString(),
        level: l,
        name: 'vlt-mcp',
        msg,
        ...fields,
      });
      write(scrubText(line));
    };
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

export const silentLogger: Logger = createLogger(() => undefined, 'silent');
