/**
 * The response-filter pool's worker (response-pool.ts): decodes, filters and serialises one
 * large buffered answer off the event loop every tenant of the process shares. What comes
 * back is the envelope body's JSON text, or why it could not be filtered.
 */
import { hydratePolicy, type PolicyRuntime, type ResponseRoute } from '@vlt/policy-engine';
import { decodeAndFilter, filterFailureOf, type FilterFailure } from './response-decoding.js';

export interface FilterTask {
  body: Uint8Array;
  contentType: string | undefined;
  /** Identifies `compiled` (policy id and version): hydrated once per worker. */
  policyKey: string;
  compiled: unknown;
  route: ResponseRoute;
}

export type FilterTaskResult = { ok: true; json: string } | ({ ok: false } & FilterFailure);

/** Hydrated policies by key; a few hundred at most (oldest dropped first). */
const policies = new Map<string, PolicyRuntime>();
const MAX_POLICIES = 256;

function policyFor(task: FilterTask): PolicyRuntime {
  let policy = policies.get(task.policyKey);
  if (!policy) {
    policy = hydratePolicy(task.compiled);
    if (policies.size >= MAX_POLICIES) policies.delete(policies.keys().next().value!);
    policies.set(task.policyKey, policy);
  }
  return policy;
}

export default function filterInWorker(task: FilterTask): FilterTaskResult {
  let value: unknown;
  try {
    value = decodeAndFilter(task.body, task.contentType, policyFor(task), task.route);
  } catch (err) {
    return { ok: false, ...filterFailureOf(err) };
  }
  return { ok: true, json: JSON.stringify(value) ?? 'null' };
}
