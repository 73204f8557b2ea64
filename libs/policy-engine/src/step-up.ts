/**
 * Access mode and step-up approval (steps 6-7 after the rule lookup). The full decision table
 * is in docs/step-up-decision-table.md; in short:
 *
 * - a `deny` rule denies;
 * - `read_only` denies every write (POST, PUT, PATCH, DELETE), whatever the rules say;
 * - `custom` denies writes that no rule allows or sends to approval;
 * - a `require_approval` rule needs approval in every mode (also with `never`: `never` only
 *   turns off the implicit step-up, not an explicit rule);
 * - `requestFullFields` (PII field step-up) always needs approval (the pipeline refuses it first
 *   where no approval could grant it: `fieldStepUpRefusal`, ADR 0045);
 * - otherwise writes follow `stepUpApproval`: `always` needs approval even when a rule allows,
 *   `risk_based` needs approval unless a rule allows, `never` needs none;
 * - reads proceed.
 */
import type { DefaultMode, HttpMethod, StepUpApproval } from '@vlt/contracts';
import type { RuleAction } from './request-rules.js';

export const WRITE_METHODS: ReadonlySet<HttpMethod> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export function isWriteMethod(method: HttpMethod): boolean {
  return WRITE_METHODS.has(method);
}

export type AccessDecision =
  | { kind: 'deny'; code: 'rule_denied' | 'read_only' | 'write_not_allowed'; reason: string }
  | {
      kind: 'approval';
      code:
        'rule_requires_approval' | 'full_fields' | 'step_up_always' | 'step_up_risk_based' | 'agent_request';
      reason: string;
    }
  | { kind: 'allow'; code: 'read' | 'rule_allowed_write' | 'step_up_never'; reason: string };

export interface AccessInput {
  method: HttpMethod;
  ruleAction: RuleAction | null;
  defaultMode: DefaultMode;
  stepUpApproval: StepUpApproval;
  requestFullFields: boolean;
}

export function decideAccess(input: AccessInput): AccessDecision {
  const write = isWriteMethod(input.method);
  const rule = input.ruleAction;
  if (rule === 'deny') return { kind: 'deny', code: 'rule_denied', reason: 'denied by a request rule' };
  if (write && input.defaultMode === 'read_only') {
    return { kind: 'deny', code: 'read_only', reason: 'the policy is read-only' };
  }
  if (write && input.defaultMode === 'custom' && rule === null) {
    return { kind: 'deny', code: 'write_not_allowed', reason: 'no rule allows this write' };
  }
  if (rule === 'require_approval') {
    return { kind: 'approval', code: 'rule_requires_approval', reason: 'a request rule requires approval' };
  }
  if (input.requestFullFields) {
    return { kind: 'approval', code: 'full_fields', reason: 'full contact fields need approval' };
  }
  if (!write) return { kind: 'allow', code: 'read', reason: 'read access' };
  switch (input.stepUpApproval) {
    case 'always':
      return { kind: 'approval', code: 'step_up_always', reason: 'every write needs approval' };
    case 'risk_based':
      return rule === 'allow'
        ? { kind: 'allow', code: 'rule_allowed_write', reason: 'write allowed by a request rule' }
        : {
            kind: 'approval',
            code: 'step_up_risk_based',
            reason: 'writes need approval unless a rule allows them',
          };
    case 'never':
      return { kind: 'allow', code: 'step_up_never', reason: 'step-up approval is off' };
  }
}
