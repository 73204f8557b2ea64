/**
 * No secret any scenario handled — passwords, cookies, JWTs, PATs, bootstrap secrets, agent
 * tokens, provider credentials, the master key — appears in any line any process printed.
 * An `afterAll` rather than a test: it runs after whichever tests ran (all, or those `-t`
 * picked, in any order) and only reads the logs and the shape's secret bag.
 */
import { afterAll, beforeEach, expect } from 'vitest';
import type { Scenario } from './setup.js';

export function secretsInLogsScenario(sc: Scenario): void {
  let ran = 0;
  beforeEach(() => {
    ran++;
  });

  afterAll(() => {
    // Nothing ran (the shape did not start, or -t matched none of its tests): nothing to judge.
    if (ran === 0) return;
    const env = sc.env();
    // The environment's own secrets, whether or not a test that handles them ran.
    sc.secrets.add('VLT_MASTER_KEY', env.masterKey);
    sc.secrets.add('issue-tracker API token', env.mockAccount.apiToken);
    sc.secrets.add('issue-tracker API token (second site)', env.mockDownAccount.apiToken);
    sc.secrets.add('injected Basic credentials', env.mock.expectedAuthorization.slice('Basic '.length));
    sc.secrets.add(
      'injected Basic credentials (second site)',
      env.mockDown.expectedAuthorization.slice('Basic '.length),
    );
    const lines = env.logs();
    expect(lines.length, 'the processes logged something to search').toBeGreaterThan(0);
    // Every test signs up a user of its own (a password, a session cookie, an API JWT at least):
    // no more than three per test that ran means a scenario stopped registering what it handles.
    // A whole run (12 tests) so asks for more than 36, where the ordered scenario asked for 15.
    expect(sc.secrets.size, `secrets registered by the ${ran} tests that ran`).toBeGreaterThan(3 * ran);
    const leaks = sc.secrets.scanLines(lines);
    expect(
      leaks,
      `never prints a secret in any process log: secrets found in logs (labels: ${[...new Set(leaks.map((l) => l.label))].join(', ')})`,
    ).toEqual([]);
  });
}
