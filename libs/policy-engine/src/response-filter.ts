/**
 * Response rules on parsed JSON: provider inbound filters, then for every matching rule in
 * order its `allowFields` and `denyFields`, then one redaction pass with the detectors of all
 * matching rules (rule order, then entry order) over every string value and every integer.
 * Object keys are not redacted.
 *
 * Field paths use the json-path syntax; arrays are transparent and `*` matches any key.
 * `allowFields` keeps the listed paths and the containers on the way to them; a scalar where a
 * deeper field was expected is dropped (a body that is a bare scalar becomes null).
 *
 * Every transformation is copy-on-write and returns its input when nothing changed, which lets
 * stream filters emit unchanged events byte for byte.
 */
import type { CompiledPath, HttpMethod } from '@vlt/contracts';
import type { ContactFieldPlan } from './contact-fields.js';
import { ResponseFilterLimitError } from './errors.js';
import { isPlainObject } from './json-path.js';
import type { Detector } from './pii-detectors.js';
import type { InboundFilter } from './provider-constraints.js';
import { redactText } from './redaction.js';

export const MAX_JSON_DEPTH = 512;

export interface FieldTrie {
  terminal: boolean;
  children: Map<string, FieldTrie>;
  wildcard: FieldTrie | null;
}

function emptyNode(): FieldTrie {
  return { terminal: false, children: new Map(), wildcard: null };
}

export function buildFieldTrie(paths: readonly CompiledPath[]): FieldTrie {
  const root = emptyNode();
  for (const path of paths) {
    let node = root;
    for (const seg of path) {
      if (seg === null) {
        node.wildcard ??= emptyNode();
        node = node.wildcard;
      } else {
        let child = node.children.get(seg);
        if (!child) {
          child = emptyNode();
          node.children.set(seg, child);
        }
        node = child;
      }
    }
    node.terminal = true;
  }
  return root;
}

function tooDeep(): never {
  throw new ResponseFilterLimitError(`response JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
}

const NO_NODES: readonly FieldTrie[] = [];

/** The trie nodes `key` leads to. Allocates nothing for the common miss of a single node. */
function nextNodes(nodes: readonly FieldTrie[], key: string): readonly FieldTrie[] {
  if (nodes.length === 1) {
    const n = nodes[0]!;
    const c = n.children.get(key);
    if (c) return n.wildcard ? [c, n.wildcard] : [c];
    return n.wildcard ? [n.wildcard] : NO_NODES;
  }
  const out: FieldTrie[] = [];
  for (const n of nodes) {
    const c = n.children.get(key);
    if (c) out.push(c);
    if (n.wildcard) out.push(n.wildcard);
  }
  return out;
}

const DROP = Symbol('drop');

/** Defines an own property even for the key "__proto__", which plain assignment would not. */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
}

function allowWalk(value: unknown, nodes: readonly FieldTrie[], depth: number): unknown {
  if (depth > MAX_JSON_DEPTH) tooDeep();
  if (nodes.some((n) => n.terminal)) return value;
  if (Array.isArray(value)) {
    let changed = false;
    const out: unknown[] = [];
    for (const el of value) {
      const r = allowWalk(el, nodes, depth + 1);
      if (r === DROP) changed = true;
      else {
        if (r !== el) changed = true;
        out.push(r);
      }
    }
    return changed ? out : value;
  }
  if (isPlainObject(value)) {
    let changed = false;
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      const next = nextNodes(nodes, key);
      if (next.length === 0) {
        changed = true;
        continue;
      }
      const r = allowWalk(v, next, depth + 1);
      if (r === DROP) {
        changed = true;
        continue;
      }
      if (r !== v) changed = true;
      setOwn(out, key, r);
    }
    return changed ? out : value;
  }
  return DROP;
}

export function applyAllowFields(value: unknown, trie: FieldTrie): unknown {
  const r = allowWalk(value, [trie], 0);
  return r === DROP ? null : r;
}

/** `arr` with `fn` applied to each element: a copy when one changed, else `arr` itself. */
function mapChanged(arr: unknown[], fn: (el: unknown) => unknown): unknown[] {
  let out: unknown[] | null = null;
  for (let i = 0; i < arr.length; i++) {
    const r = fn(arr[i]);
    if (r !== arr[i]) {
      out ??= arr.slice();
      out[i] = r;
    }
  }
  return out ?? arr;
}

function denyWalk(value: unknown, nodes: readonly FieldTrie[], depth: number): unknown {
  if (depth > MAX_JSON_DEPTH) tooDeep();
  if (Array.isArray(value)) {
    return mapChanged(value, (el) => denyWalk(el, nodes, depth + 1));
  }
  if (isPlainObject(value)) {
    let out: Record<string, unknown> | null = null;
    for (const key of Object.keys(value)) {
      const next = nextNodes(nodes, key);
      if (next.length === 0) continue;
      const v = value[key];
      if (next.some((n) => n.terminal)) {
        out ??= { ...value };
        delete out[key];
        continue;
      }
      const r = denyWalk(v, next, depth + 1);
      if (r !== v) {
        out ??= { ...value };
        setOwn(out, key, r);
      }
    }
    return out ?? value;
  }
  return value;
}

export function applyDenyFields(value: unknown, trie: FieldTrie): unknown {
  return denyWalk(value, [trie], 0);
}

function redactWalk(
  value: unknown,
  detectors: readonly Detector[],
  depth: number,
  onlyBuiltIns: boolean,
): unknown {
  if (depth > MAX_JSON_DEPTH) tooDeep();
  if (typeof value === 'string') return redactText(value, detectors);
  if (typeof value === 'number') {
    // A card number sent as a JSON number must not escape redaction. Of the built-in types
    // only a card (13+ digits) can match a bare integer, so smaller ones are skipped.
    if (!Number.isInteger(value) || (onlyBuiltIns && Math.abs(value) < 1e12)) return value;
    const s = String(value);
    const r = redactText(s, detectors);
    return r === s ? value : r;
  }
  if (Array.isArray(value)) {
    return mapChanged(value, (el) => redactWalk(el, detectors, depth + 1, onlyBuiltIns));
  }
  if (isPlainObject(value)) {
    let out: Record<string, unknown> | null = null;
    for (const key of Object.keys(value)) {
      const v = value[key];
      const r = redactWalk(v, detectors, depth + 1, onlyBuiltIns);
      if (r !== v) {
        out ??= { ...value };
        setOwn(out, key, r);
      }
    }
    return out ?? value;
  }
  return value;
}

export function redactJsonValue(value: unknown, detectors: readonly Detector[]): unknown {
  if (detectors.length === 0) return value;
  return redactWalk(
    value,
    detectors,
    0,
    detectors.every((d) => d.name !== 'custom'),
  );
}

/** A compiled response rule as the runtime holds it. */
export interface RuntimeResponseRule {
  index: number;
  label: string;
  methods: ReadonlySet<HttpMethod> | null;
  urlPattern: { test(input: string): boolean } | null;
  allowFields: FieldTrie | null;
  denyFields: FieldTrie | null;
  detectors: readonly Detector[];
}

/** What applies to one response: null from `planResponse` means "pass through untouched". */
export interface ResponsePlan {
  rules: readonly RuntimeResponseRule[];
  inbound: InboundFilter | null;
  /** Contacts services: person fields stripped on every response (ADR 0045); else null. */
  contacts: ContactFieldPlan | null;
  detectors: readonly Detector[];
}

export interface ResponseRoute {
  method: string;
  path: string;
  /**
   * The request was a redeemed contact field step-up (`decision.fullFields` of the pipeline).
   * Only then, and only where the policy and the route allow it again, are PII fields kept.
   */
  fullFields?: boolean;
}

export function selectResponseRules(
  rules: readonly RuntimeResponseRule[],
  route: ResponseRoute,
): RuntimeResponseRule[] {
  const method = route.method.toUpperCase() as HttpMethod;
  return rules.filter(
    (r) =>
      (r.methods === null || r.methods.has(method)) &&
      (r.urlPattern === null || r.urlPattern.test(route.path)),
  );
}

export function buildResponsePlan(
  rules: readonly RuntimeResponseRule[],
  inbound: InboundFilter | null,
  contacts: ContactFieldPlan | null = null,
): ResponsePlan | null {
  const active = rules.filter((r) => r.allowFields || r.denyFields || r.detectors.length > 0);
  if (active.length === 0 && !inbound && !contacts) return null;
  return { rules: active, inbound, contacts, detectors: active.flatMap((r) => r.detectors) };
}

/**
 * Whether the plan transforms JSON structure (provider inbound filters, contact fields, field
 * rules): such a plan cannot be honoured on anything but JSON, NDJSON and SSE, and never takes
 * the raw fast path.
 */
export function planNeedsStructure(plan: ResponsePlan): boolean {
  return (
    plan.inbound !== null ||
    plan.contacts !== null ||
    plan.rules.some((r) => r.allowFields !== null || r.denyFields !== null)
  );
}

/**
 * Applies a plan to a parsed JSON value. The stream filters' raw fast path (raw-json.ts) proves
 * from bytes that this returns its input: a new step here, or a change to what redactWalk
 * touches (strings, integers of 1e12 and more, never keys), must be reflected in rawJsonCheck.
 */
export function filterJsonValue(value: unknown, plan: ResponsePlan): unknown {
  let out = plan.inbound ? plan.inbound(value) : value;
  if (plan.contacts) out = plan.contacts.strip(out);
  for (const rule of plan.rules) {
    if (rule.allowFields) out = applyAllowFields(out, rule.allowFields);
    if (rule.denyFields) out = applyDenyFields(out, rule.denyFields);
  }
  return redactJsonValue(out, plan.detectors);
}
