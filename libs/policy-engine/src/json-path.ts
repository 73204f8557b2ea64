/**
 * Dotted paths into JSON values, shared by request body matchers and response field filters.
 *
 * Syntax: segments separated by `.`; `*` alone is a wildcard (any key or element); `\.`, `\*`
 * and `\\` escape. Arrays are transparent: a name segment applied to an array applies to every
 * element, so `messages.to` reaches the `to` of each message. A numeric segment on an array
 * picks that index (body matchers only; field filters treat numbers as object keys).
 */
import type { CompiledPath } from '@vlt/contracts';

export type PathSegment = string | null;

export function parseJsonPath(
  path: string,
): { ok: true; segments: CompiledPath } | { ok: false; reason: string } {
  const segments: PathSegment[] = [];
  let current = '';
  let escaped = false;
  let hasContent = false;
  let literalStar = false;
  const finish = (): string | null => {
    if (!hasContent) return 'empty path segment';
    segments.push(current === '*' && !literalStar ? null : current);
    current = '';
    hasContent = false;
    literalStar = false;
    return null;
  };
  for (const ch of path) {
    if (escaped) {
      if (ch !== '.' && ch !== '*' && ch !== '\\') return { ok: false, reason: `invalid escape "\\${ch}"` };
      if (ch === '*') literalStar = true;
      current += ch;
      hasContent = true;
      escaped = false;
    } else if (ch === '\\') {
      escaped = true;
    } else if (ch === '.') {
      const problem = finish();
      if (problem) return { ok: false, reason: problem };
    } else {
      current += ch;
      hasContent = true;
    }
  }
  if (escaped) return { ok: false, reason: 'path ends with "\\"' };
  const problem = finish();
  if (problem) return { ok: false, reason: problem };
  if (segments.length > 64) return { ok: false, reason: 'path has more than 64 segments' };
  return { ok: true, segments: segments as CompiledPath };
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const INDEX = /^(0|[1-9][0-9]{0,8})$/;

/**
 * Every value the path reaches (empty when it reaches nothing). `aliases[i]`, where given, is a
 * second name segment `i` also reaches (`protoJsonAliases`). Each node is visited at most once
 * per segment position, so the work is bounded by body size times path length.
 */
export function resolveJsonPath(
  root: unknown,
  segments: readonly PathSegment[],
  aliases: readonly PathSegment[] | null = null,
): unknown[] {
  const found: unknown[] = [];
  walkPath(root, segments, aliases, 0, found);
  return found;
}

function walkPath(
  node: unknown,
  segments: readonly PathSegment[],
  aliases: readonly PathSegment[] | null,
  i: number,
  found: unknown[],
): void {
  if (i === segments.length) {
    found.push(node);
    return;
  }
  const seg = segments[i]!;
  if (Array.isArray(node)) {
    if (seg === null) {
      for (const el of node) walkPath(el, segments, aliases, i + 1, found);
    } else if (INDEX.test(seg)) {
      const idx = Number(seg);
      if (idx < node.length) walkPath(node[idx], segments, aliases, i + 1, found);
    } else {
      for (const el of node) walkPath(el, segments, aliases, i, found);
    }
    return;
  }
  if (isPlainObject(node)) {
    if (seg === null) {
      for (const key of Object.keys(node)) walkPath(node[key], segments, aliases, i + 1, found);
      return;
    }
    if (Object.hasOwn(node, seg)) walkPath(node[seg], segments, aliases, i + 1, found);
    const alias = aliases?.[i];
    if (alias != null && Object.hasOwn(node, alias)) walkPath(node[alias], segments, aliases, i + 1, found);
  }
}

/**
 * The other spelling of each name segment as a proto3 JSON parser reads it, or null where there
 * is none. Google's APIs take a field by its JSON name (`generationConfig`) or its proto name
 * (`generation_config`) alike, so a rule written with one must also see the other.
 */
export function protoJsonAliases(segments: readonly PathSegment[]): PathSegment[] | null {
  const aliases = segments.map((seg): PathSegment => {
    if (seg === null || INDEX.test(seg)) return null;
    const other = seg.includes('_')
      ? seg.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())
      : seg.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    return other === seg ? null : other;
  });
  return aliases.some((a) => a !== null) ? aliases : null;
}
