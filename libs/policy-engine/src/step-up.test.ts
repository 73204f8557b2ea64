import { readFileSync } from 'node:fs';
import type { DefaultMode, HttpMethod, StepUpApproval } from '@vlt/contracts';
import { describe, expect, it } from 'vitest';
import type { RuleAction } from './request-rules.js';
import { decideAccess, isWriteMethod } from './step-up.js';

const doc = readFileSync(new URL('../../../docs/step-up-decision-table.md', import.meta.url), 'utf8');

function tableRows(section: string): string[][] {
  const start = doc.indexOf(section);
  if (start === -1) throw new Error(`section ${section} missing from the decision table doc`);
  const rows: string[][] = [];
  let seenHeader = false;
  for (const line of doc.slice(start + section.length).split('\n')) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('|')) {
      if (seenHeader && rows.length) break;
      continue;
    }
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    if (!seenHeader) {
      seenHeader = true;
      continue;
    }
    if (cells.every((c) => /^-+$/.test(c))) continue;
    rows.push(cells);
  }
  return rows;
}

const RULES: Array<RuleAction | null> = [null, 'allow', 'deny', 'require_approval'];
const MODES: DefaultMode[] = ['read_only', 'read_write', 'custom'];
const STEP_UPS: StepUpApproval[] = ['always', 'risk_based', 'never'];
const METHODS: HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

describe('decideAccess against docs/step-up-decision-table.md', () => {
  const normative = tableRows('## Normative table');

  it('the normative table has its ten rows', () => {
    expect(normative).toHaveLength(10);
  });

  it('agrees with the normative table for all 144 combinations (and every method)', () => {
    let checked = 0;
    for (const method of METHODS)
      for (const rule of RULES)
        for (const defaultMode of MODES)
          for (const stepUpApproval of STEP_UPS)
            for (const requestFullFields of [false, true]) {
              const facts = {
                request: isWriteMethod(method) ? 'write' : 'read',
                rule: rule ?? 'none',
                defaultMode,
                stepUpApproval,
                requestFullFields: requestFullFields ? 'yes' : 'no',
              };
              const row = normative.find(
                ([, request, r, mode, step, full]) =>
                  (request === 'any' || request === facts.request) &&
                  (r === 'any' || r === facts.rule) &&
                  (mode === 'any' || mode === facts.defaultMode) &&
                  (step === 'any' || step === facts.stepUpApproval) &&
                  (full === 'any' || full === facts.requestFullFields),
              );
              expect(row, JSON.stringify(facts)).toBeDefined();
              const got = decideAccess({
                method,
                ruleAction: rule,
                defaultMode,
                stepUpApproval,
                requestFullFields,
              });
              expect({ kind: got.kind, code: got.code }, JSON.stringify(facts)).toEqual({
                kind: row![6],
                code: row![7],
              });
              checked++;
            }
    expect(checked).toBe(5 * 4 * 3 * 3 * 2);
  });

  it.each(MODES)('agrees with the per-mode write matrix for %s', (mode) => {
    const rows = tableRows(`### ${mode}`);
    expect(rows).toHaveLength(4);
    for (const [rule, ...cells] of rows) {
      STEP_UPS.forEach((stepUpApproval, i) => {
        const got = decideAccess({
          method: 'POST',
          ruleAction: rule === 'none' ? null : (rule as RuleAction),
          defaultMode: mode,
          stepUpApproval,
          requestFullFields: false,
        });
        expect(got.kind, `${mode} ${rule} ${stepUpApproval}`).toBe(cells[i]);
      });
    }
  });
});

describe('decideAccess essentials', () => {
  it('never lets a read_only policy write, whatever the rules say', () => {
    for (const rule of RULES)
      for (const stepUpApproval of STEP_UPS)
        for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
          expect(
            decideAccess({
              method,
              ruleAction: rule,
              defaultMode: 'read_only',
              stepUpApproval,
              requestFullFields: false,
            }).kind,
          ).toBe('deny');
        }
  });

  it('risk_based: a write needs approval unless a rule allows it', () => {
    const base = {
      method: 'POST' as const,
      defaultMode: 'read_write' as const,
      stepUpApproval: 'risk_based' as const,
      requestFullFields: false,
    };
    expect(decideAccess({ ...base, ruleAction: null }).kind).toBe('approval');
    expect(decideAccess({ ...base, ruleAction: 'allow' }).kind).toBe('allow');
  });
});
