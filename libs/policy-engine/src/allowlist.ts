/**
 * Default-deny allowlist matching on canonical targets.
 *
 * An entry matches when scheme (always https), host and port are equal, the method is listed
 * and the canonical path matches one of its patterns: exactly, or, for a pattern ending in `*`,
 * by prefix ("any suffix": `/users*` also matches `/users-admin`; write `/users/*` to stay
 * below a segment). A path in `baseUrl` is prepended to every pattern of the entry. There are
 * no host wildcards: every host is listed explicitly.
 */
import type { AllowlistEntry, CompiledAllowlistEntry, HttpMethod } from '@vlt/contracts';
import { canonicalizePathOrThrow, canonicalizeTarget } from './url-canonicalizer.js';

/** Compiles one stored entry; throws Error with a readable reason when it cannot be used. */
export function compileAllowlistEntry(entry: AllowlistEntry, index: number): CompiledAllowlistEntry {
  const base = canonicalizeTarget(entry.baseUrl);
  if (!base.ok) throw new Error(`baseUrl: ${base.reason}`);
  if (base.search !== '') throw new Error('baseUrl: must not contain a query');
  const basePath = base.path === '/' ? '' : base.path.replace(/\/$/, '');
  const patterns = entry.pathPatterns.map((raw) => {
    const prefix = raw.endsWith('*');
    const body = basePath + (prefix ? raw.slice(0, -1) : raw);
    const value = canonicalizePathOrThrow(body === '' ? '/' : body);
    // Patterns are canonicalised by the URL rules, but a pattern whose meaning would change
    // (dot segments, doubled slashes) is refused instead of silently widened or narrowed.
    if (value.split('/').length !== (body === '' ? '/' : body).split('/').length) {
      throw new Error(`path pattern "${raw}" must not contain dot segments or repeated slashes`);
    }
    return { value, prefix };
  });
  return { index, host: base.host, port: base.port, methods: [...new Set(entry.methods)], patterns };
}

export function pathMatchesPattern(path: string, pattern: { value: string; prefix: boolean }): boolean {
  return pattern.prefix ? path.startsWith(pattern.value) : path === pattern.value;
}

export interface AllowlistTarget {
  host: string;
  port: number;
  path: string;
  /** `path` without a trailing slash: `/me/` is admitted by a `/me` pattern (servers read them alike). */
  matchPath: string;
}

/** The first entry that admits the request, or null (default deny). */
export function matchAllowlist(
  entries: readonly CompiledAllowlistEntry[],
  method: HttpMethod,
  target: AllowlistTarget,
): CompiledAllowlistEntry | null {
  for (const entry of entries) {
    if (entry.host !== target.host || entry.port !== target.port) continue;
    if (!entry.methods.includes(method)) continue;
    for (const p of entry.patterns) {
      if (pathMatchesPattern(target.path, p) || pathMatchesPattern(target.matchPath, p)) return entry;
    }
  }
  return null;
}
