/**
 * The end-to-end slice, written once and run against both shapes (split processes over NATS and
 * PostgreSQL, and the all-in-one process). Each scenario under `scenarios/` builds the state it
 * needs, so every test runs alone and in any order; the log check runs after all of them (an
 * `afterAll`) and searches for the secrets of every test that ran.
 */
import { startMockIssueTracker } from '../support/mock-issue-tracker.js';
import type { E2eFixtures } from '../support/e2e-fixtures.js';
import type { LogLine } from '../support/processes.js';
import { agentsScenario } from './scenarios/agents.js';
import { auditScenario } from './scenarios/audit.js';
import { brokeringScenario } from './scenarios/brokering.js';
import { connectionsScenario } from './scenarios/connections.js';
import { denialsScenario } from './scenarios/denials.js';
import { discoveryScenario } from './scenarios/discovery.js';
import { identityScenario } from './scenarios/identity.js';
import { policiesScenario } from './scenarios/policies.js';
import { secretsInLogsScenario } from './scenarios/secrets-in-logs.js';
import { createScenario, random, type ScenarioEnv } from './scenarios/setup.js';

export type { ScenarioEnv } from './scenarios/setup.js';

/** The scenario's environment from the shared fixtures and where each process listens. */
export function scenarioEnv(
  f: E2eFixtures,
  where: { controlPlane: string; dataPlanes: string[]; publicBaseUrl: string },
  logs: () => LogLine[],
): ScenarioEnv {
  return {
    ...where,
    mock: f.mock,
    mockDown: f.mockDown,
    mockAccount: f.mockAccount,
    mockDownAccount: f.mockDownAccount,
    async startSite() {
      const account = { email: `bot-${random(3)}@tracker.test`, apiToken: `itk_${random(18)}` };
      const site = await startMockIssueTracker({ ...account, tls: { key: f.pki.key, cert: f.pki.cert } });
      return { site, account };
    },
    tripwires: f.tripwires,
    masterKey: f.masterKey,
    logs,
  };
}

export function gatewayScenario(getEnv: () => ScenarioEnv): void {
  const sc = createScenario(getEnv);
  identityScenario(sc);
  agentsScenario(sc);
  connectionsScenario(sc);
  policiesScenario(sc);
  brokeringScenario(sc);
  denialsScenario(sc);
  discoveryScenario(sc);
  auditScenario(sc);
  secretsInLogsScenario(sc);
}
