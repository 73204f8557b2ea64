import { describe, expect, it } from 'vitest';
import { PROVIDERS, SERVICES, defaultAllowlistFor } from './catalog.js';
import { PutAllowlistsBody, PutRulesBody, UpdatePolicyBody } from './http/policies.js';
import {
  AllowlistTemplatesResponse,
  GuardTemplatesResponse,
  RuleTemplatesResponse,
  TEMPLATE_PROVIDERS,
  allowlistTemplates,
  guardTemplates,
  isTemplateProvider,
  ruleTemplates,
  type TemplateProvider,
} from './templates.js';
import type { PolicyRules } from './policy.js';

/** The catalog default, a deployment behind a path prefix (with a trailing slash) and an IP. */
const apiUrlsOf = (p: TemplateProvider) => [
  PROVIDERS[p].defaults!.apiUrl,
  'https://gateway.example.test/proxy/v2/',
  'https://127.0.0.1:8443',
];

/** Parses as the route body and comes back unchanged: nothing stripped, nothing defaulted. */
function expectValidRules(rules: PolicyRules, what: string) {
  const parsed = PutRulesBody.safeParse({ rules });
  expect(parsed.success, `${what}: ${parsed.error?.message}`).toBe(true);
  expect(parsed.data!.rules, what).toEqual(rules);
  expect(JSON.parse(JSON.stringify(rules)), `${what} survives JSON`).toEqual(rules);
}

describe.each(TEMPLATE_PROVIDERS.flatMap((p) => apiUrlsOf(p).map((u) => [p, u] as const)))(
  'templates of %s on %s',
  (provider, apiUrl) => {
    const base = apiUrl.replace(/\/+$/, '');

    it('every allowlist template is a valid PUT /v1/policies/:id/allowlists body on the API URL', () => {
      const templates = allowlistTemplates(provider, apiUrl);
      expect(templates.length).toBeGreaterThanOrEqual(3);
      expect(new Set(templates.map((t) => t.id)).size).toBe(templates.length);
      for (const t of templates) {
        const parsed = PutAllowlistsBody.safeParse({ allowlists: t.allowlists });
        expect(parsed.success, `${t.id}: ${parsed.error?.message}`).toBe(true);
        expect(parsed.data!.allowlists, t.id).toEqual(t.allowlists);
        expect(t.allowlists.length, t.id).toBeGreaterThan(0);
        for (const e of t.allowlists) expect(e.baseUrl, t.id).toBe(base);
        if (t.access === 'read') {
          expect(
            t.allowlists.flatMap((e) => e.methods).every((m) => m === 'GET'),
            t.id,
          ).toBe(true);
          expect(t.suggestedDefaultMode, t.id).toBe('read_only');
        } else {
          expect(t.suggestedDefaultMode, t.id).not.toBe('read_only');
        }
        for (const s of t.serviceIds) expect(SERVICES.find((x) => x.id === s)?.provider, t.id).toBe(provider);
      }
      expect(AllowlistTemplatesResponse.safeParse({ provider, apiUrl: base, templates }).success).toBe(true);
    });

    it("each service's read_write template is the catalog default; its read template the GET part", () => {
      const templates = allowlistTemplates(provider, apiUrl);
      for (const s of SERVICES.filter((x) => x.provider === provider)) {
        const full = defaultAllowlistFor(s, apiUrl);
        expect(templates.find((t) => t.id === `${s.id}.read_write`)?.allowlists).toEqual(full);
        const read = templates.find((t) => t.id === `${s.id}.read`)!;
        expect(read.allowlists.length).toBeGreaterThan(0);
        for (const e of read.allowlists) {
          expect(
            full.some((f) => f.methods.includes('GET') && f.pathPatterns.join() === e.pathPatterns.join()),
          ).toBe(true);
        }
      }
    });

    it('every rule template and every preset is a valid PUT /v1/policies/:id/rules body', () => {
      const { presets, rules } = ruleTemplates(provider, apiUrl);
      expect(new Set(rules.map((r) => r.id)).size).toBe(rules.length);
      for (const r of rules) {
        expectValidRules(r.rules, r.id);
        const count = r.rules.request.length + r.rules.response.length;
        expect(count, r.id).toBeGreaterThan(0);
        // One kind per template.
        expect(r.kind === 'request' ? r.rules.response : r.rules.request, r.id).toEqual([]);
      }
      expect(presets.map((p) => p.id)).toEqual(['minimal', 'standard', 'strict']);
      const byId = new Map(rules.map((r) => [r.id, r]));
      for (const p of presets) {
        expectValidRules(p.rules, p.id);
        expect(UpdatePolicyBody.safeParse(p.suggestedSettings).success, p.id).toBe(true);
        // Exactly the concatenation of the templates it names.
        for (const id of p.ruleIds) expect(byId.has(id), `${p.id} names ${id}`).toBe(true);
        expect(p.rules.request).toEqual(p.ruleIds.flatMap((id) => byId.get(id)!.rules.request));
        expect(p.rules.response).toEqual(p.ruleIds.flatMap((id) => byId.get(id)!.rules.response));
        // First match wins: every deny precedes everything else, and a rule with no condition
        // (a catch-all) comes last.
        const actions = p.rules.request.map((r) => r.action);
        const firstOther = actions.findIndex((a) => a !== 'deny');
        if (firstOther !== -1) expect(actions.slice(firstOther), p.id).not.toContain('deny');
        p.rules.request.forEach((r, i) => {
          const catchAll = r.match.urlPattern === undefined && r.match.body === undefined;
          if (catchAll && r.match.methods === undefined)
            expect(i, `${p.id}: ${r.label}`).toBe(actions.length - 1);
        });
      }
      // Presets grow: minimal ⊂ standard ⊂ strict.
      const [minimal, standard, strict] = presets.map((p) => p.rules.request);
      for (const r of minimal!) expect(standard).toContainEqual(r);
      for (const r of standard!) expect(strict).toContainEqual(r);
      expect(RuleTemplatesResponse.safeParse({ provider, presets, rules }).success).toBe(true);
    });

    it('every guard is a valid rules body of require_approval and deny request rules only', () => {
      const guards = guardTemplates(provider, apiUrl);
      const { rules } = ruleTemplates(provider, apiUrl);
      const byId = new Map(rules.map((r) => [r.id, r]));
      expect(guards.length).toBeGreaterThanOrEqual(5);
      expect(new Set(guards.map((g) => g.category)).size).toBe(guards.length);
      for (const g of guards) {
        expect(g.id).toBe(`${provider}.${g.category}`);
        expectValidRules(g.rules, g.id);
        expect(g.rules.response, g.id).toEqual([]);
        expect(g.rules.request.length, g.id).toBeGreaterThan(0);
        for (const r of g.rules.request) expect(['deny', 'require_approval'], g.id).toContain(r.action);
        expect(g.rules.request).toEqual(g.ruleIds.flatMap((id) => byId.get(id)!.rules.request));
        const actions = g.rules.request.map((r) => r.action);
        const firstApproval = actions.indexOf('require_approval');
        if (firstApproval !== -1) expect(actions.slice(firstApproval), g.id).not.toContain('deny');
      }
      expect(GuardTemplatesResponse.safeParse({ provider, guards }).success).toBe(true);
    });

    it('allow rules are anchored at the API URL path; deny and approval rules ignore case', () => {
      const { rules } = ruleTemplates(provider, apiUrl);
      const basePath = new URL(base).pathname.replace(/\/+$/, '');
      for (const r of rules.flatMap((t) => t.rules.request)) {
        const pattern = r.match.urlPattern;
        if (pattern === undefined) continue;
        expect(pattern.startsWith('(?i)'), r.label).toBe(true);
        if (r.action === 'allow') {
          expect(pattern.startsWith(`(?i)^${basePath.replace(/\./g, '\\.')}/`), r.label).toBe(true);
          expect(pattern.endsWith('$'), r.label).toBe(true);
        }
      }
    });
  },
);

describe('template providers', () => {
  it('are the four the interface names, each a catalog provider with an API URL', () => {
    expect([...TEMPLATE_PROVIDERS]).toEqual(['suite_a', 'suite_b', 'chatbot_a', 'chatbot_b']);
    for (const p of TEMPLATE_PROVIDERS) expect(PROVIDERS[p].defaults?.apiUrl).toMatch(/^https:\/\//);
  });

  it('isTemplateProvider knows only them', () => {
    for (const p of TEMPLATE_PROVIDERS) expect(isTemplateProvider(p)).toBe(true);
    for (const p of ['code_host', 'issues', 'llm_a', '', 'SUITE_A', '__proto__', 'constructor'])
      expect(isTemplateProvider(p)).toBe(false);
  });

  it('builds the same templates twice (no shared mutable state)', () => {
    const a = ruleTemplates('suite_a', 'https://www.googleapis.com');
    a.presets[0]!.rules.request.length = 0;
    a.rules[0]!.rules.request.push(a.rules[0]!.rules.request[0]!);
    const b = ruleTemplates('suite_a', 'https://www.googleapis.com');
    expect(b.presets[0]!.rules.request.length).toBeGreaterThan(0);
    expect(b.rules[0]!.rules.request).toHaveLength(1);
  });
});
