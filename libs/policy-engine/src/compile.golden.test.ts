/**
 * Golden files for compilePolicy: the snapshot the data plane consumes over NATS KV. A change to
 * what is compiled shows up here as a diff to review (a data plane on the old version must still
 * read it, or COMPILED_POLICY_FORMAT must change). Regenerate deliberately with
 * `UPDATE_GOLDEN=1 pnpm vitest run libs/policy-engine/src/compile.golden.test.ts`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { compilePolicy, hydratePolicy } from './compile.js';
import { policyDoc, type PolicyInput } from './test-fixtures.js';

const CASES: Record<string, { connection: { provider: string; service: string }; policy: PolicyInput }> = {
  'issue-tracker-typical': {
    connection: { provider: 'issue_tracker', service: 'issue_tracker' },
    policy: {
      allowedModels: ['B'],
      defaultMode: 'custom',
      stepUpApproval: 'risk_based',
      allowlists: [
        {
          baseUrl: 'https://Example.atlassian.net./',
          methods: ['GET', 'POST', 'GET'],
          pathPatterns: ['/rest/api/3/issue/*', '/rest/api/3/search'],
        },
      ],
      rateLimits: { maxRequestsPerHour: 120, maxPayloadSizeBytes: 65_536, maxResponseSizeBytes: 1_048_576 },
      timeWindows: [{ dayOfWeek: 1, startHour: 8, endHour: 18, timezone: 'Europe/Berlin' }],
      rules: {
        request: [
          { label: 'no deletes', match: { methods: ['DELETE'] }, action: 'deny' },
          {
            label: 'comments need a human',
            match: {
              methods: ['POST'],
              urlPattern: '^/rest/api/3/issue/[A-Z]+-[0-9]+/comment$',
              body: [{ path: 'body.type', op: 'eq', value: 'doc' }],
            },
            action: 'require_approval',
          },
        ],
        response: [
          {
            label: 'no personal data',
            match: { methods: ['GET'] },
            filter: {
              denyFields: ['fields.reporter.emailAddress', 'issues.*.fields.assignee'],
              redact: [
                { type: 'email' },
                { type: 'credit_card' },
                { type: 'custom', pattern: 'SECRET-[0-9]+', replacement: '[SECRET]' },
              ],
            },
          },
        ],
      },
    },
  },
  'contacts-step-up': {
    connection: { provider: 'suite_a', service: 'suite_a-contacts' },
    policy: {
      allowedModels: ['B'],
      defaultMode: 'read_only',
      allowlists: [
        { baseUrl: 'https://people.example.com', methods: ['GET'], pathPatterns: ['/v1/people/*'] },
      ],
      contactFields: { tier: 'balanced', fieldStepUpEnabled: true },
    },
  },
  'chat-constraints': {
    connection: { provider: 'chatbot_a', service: 'chatbot_a' },
    policy: {
      allowedModels: ['A', 'B'],
      allowlists: [{ baseUrl: 'https://api.example.org', methods: ['POST'], pathPatterns: ['/bot*'] }],
      providerConstraints: { provider: 'chatbot_a', allowedChatIds: ['123', '-100456'] },
    },
  },
};

const file = (name: string) => fileURLToPath(new URL(`./testdata/compiled/${name}.json`, import.meta.url));

describe('compilePolicy golden files', () => {
  for (const [name, c] of Object.entries(CASES)) {
    it(`compiles ${name} to exactly the pinned snapshot, which hydrates`, () => {
      const compiled = compilePolicy(policyDoc(c.policy), c.connection);
      const text = `${JSON.stringify(compiled, null, 2)}\n`;
      if (process.env.UPDATE_GOLDEN === '1') writeFileSync(file(name), text);
      expect(text).toBe(readFileSync(file(name), 'utf8'));
      expect(() => hydratePolicy(JSON.parse(text))).not.toThrow();
    });
  }
});
