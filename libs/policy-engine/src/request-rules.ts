/**
 * Request rules: the first rule whose `match` holds decides (`allow`, `deny`,
 * `require_approval`); no match leaves the decision to the access mode and step-up.
 *
 * A rule matches when all its parts hold: `methods` lists the method (absent or empty: any),
 * `urlPattern` (RE2, unanchored; use ^ and $) matches the canonical path without the query,
 * and every `body` matcher holds. Body matchers see the parsed JSON, so escaping or reordering
 * cannot dodge them; a request without a JSON body never matches a rule that has body matchers
 * (the rule is skipped and evaluation goes on with the next one).
 *
 * Quantifiers are chosen so that ambiguity always errs on the restrictive side. A path can
 * reach several values (arrays are transparent, `*` is a wildcard), and for eq/neq/in/not_in/
 * matches an array value is also looked into. Then:
 * - in an `allow` rule a matcher holds only if the path reaches at least one value and the
 *   condition holds for every value ("allow if every recipient is internal");
 * - in a `deny` or `require_approval` rule it holds if the condition holds for any value, and a
 *   negative condition (`neq`, `not_in`) also holds when the path reaches nothing.
 * - `exists` (value true or omitted) holds when the path reaches a value; `exists: false` when
 *   it reaches none.
 */
import type { BodyMatcherOp, CompiledPath, HttpMethod } from '@vlt/contracts';
import { resolveJsonPath } from './json-path.js';
import { jsonEquals } from './json-util.js';
import type { InspectedBody } from './provider-constraints.js';
import type { LinearRegex } from './regex.js';

export type RuleAction = 'allow' | 'deny' | 'require_approval';

export interface RuntimeBodyMatcher {
  path: CompiledPath;
  /** The other spelling of each segment, for providers that read proto JSON (`protoJsonAliases`). */
  aliases: readonly (string | null)[] | null;
  op: BodyMatcherOp;
  value: unknown;
  regex: LinearRegex | null;
}

export interface RuntimeRequestRule {
  index: number;
  label: string;
  action: RuleAction;
  methods: ReadonlySet<HttpMethod> | null;
  urlPattern: LinearRegex | null;
  body: readonly RuntimeBodyMatcher[] | null;
}

function predicate(m: RuntimeBodyMatcher, v: unknown): boolean {
  switch (m.op) {
    case 'eq':
      return jsonEquals(v, m.value);
    case 'neq':
      return !jsonEquals(v, m.value);
    case 'in':
      return (m.value as unknown[]).some((x) => jsonEquals(v, x));
    case 'not_in':
      return !(m.value as unknown[]).some((x) => jsonEquals(v, x));
    case 'contains':
      if (typeof v === 'string') return typeof m.value === 'string' && v.includes(m.value);
      if (Array.isArray(v)) return v.some((x) => jsonEquals(x, m.value));
      return false;
    case 'matches':
      if (typeof v === 'string') return m.regex!.test(v);
      if (typeof v === 'number' || typeof v === 'boolean') return m.regex!.test(String(v));
      return false;
    case 'exists':
      return true;
  }
}

function expandsArrays(m: RuntimeBodyMatcher): boolean {
  if (m.op === 'contains' || m.op === 'exists') return false;
  if ((m.op === 'eq' || m.op === 'neq') && Array.isArray(m.value)) return false;
  return true;
}

export function bodyMatcherHolds(m: RuntimeBodyMatcher, root: unknown, action: RuleAction): boolean {
  let values = resolveJsonPath(root, m.path, m.aliases);
  if (m.op === 'exists') return (m.value === false) === (values.length === 0);
  if (expandsArrays(m)) values = values.flatMap((v) => (Array.isArray(v) ? v : [v]));
  if (action === 'allow') return values.length > 0 && values.every((v) => predicate(m, v));
  if (values.length === 0) return m.op === 'neq' || m.op === 'not_in';
  return values.some((v) => predicate(m, v));
}

export interface RuleRequest {
  method: HttpMethod;
  path: string;
  body: InspectedBody;
}

export function ruleMatches(rule: RuntimeRequestRule, req: RuleRequest): boolean {
  if (rule.methods !== null && !rule.methods.has(req.method)) return false;
  if (rule.urlPattern !== null && !rule.urlPattern.test(req.path)) return false;
  if (rule.body !== null) {
    if (req.body.kind !== 'json') return false;
    const root = req.body.value;
    for (const m of rule.body) if (!bodyMatcherHolds(m, root, rule.action)) return false;
  }
  return true;
}

/** The first matching rule, or null. */
export function evaluateRequestRules(
  rules: readonly RuntimeRequestRule[],
  req: RuleRequest,
): RuntimeRequestRule | null {
  for (const rule of rules) if (ruleMatches(rule, req)) return rule;
  return null;
}
