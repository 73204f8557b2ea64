/**
 * Every administrator-supplied pattern runs on RE2 semantics (re2js): matching time is linear
 * in the input, so no upstream body or request path can trigger catastrophic backtracking.
 * Patterns use RE2 syntax (no backreferences, no lookaround); inline flags such as `(?i)` work.
 */
import { RE2JS } from 're2js';

export type LinearRegex = RE2JS;

export function compileLinearRegex(source: string): LinearRegex {
  return RE2JS.compile(source);
}

/** Null when `source` compiles under RE2, else a readable reason. */
export function linearRegexProblem(source: string): string | null {
  try {
    RE2JS.compile(source);
    return null;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return `invalid RE2 pattern: ${message}`;
  }
}

/**
 * Redaction patterns must consume at least one character: an empty match replaces nothing
 * and would make "redact" silently do nothing. Checked on a few probes at write time; the
 * redactor also skips empty matches at run time.
 */
export function matchesEmptyString(regex: LinearRegex): boolean {
  return regex.testExact('');
}
