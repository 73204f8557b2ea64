/**
 * What the end-to-end scenarios share: the environment of the shape under test, one bag of every
 * secret any scenario handled (the log check searches for all of them), and small builders for
 * the state a scenario needs — a workspace with its admin, enrolled agents, a connection to the
 * mock tracker, a policy. Each scenario builds its own state with them, so any test runs alone
 * and in any order.
 */
import { randomBytes } from 'node:crypto';
import {
  type Admin,
  type AllowlistEntry,
  type EnrolledAgent,
  type ExecuteRequest,
  type HttpResult,
  apiJwt,
  bearerAdmin,
  createIssueTrackerConnection,
  createAgent,
  createPolicy,
  bootstrapAgent,
  execute,
  expectStatus,
  http,
  putAllowlists,
  READ_WRITE_UNATTENDED,
  signAssertion,
  signUp,
} from '../../support/api-client.js';
import type { LogLine } from '../../support/processes.js';
import type { MockIssueTracker } from '../../support/mock-issue-tracker.js';
import { SecretBag } from '../../support/secrets.js';
import type { Tripwires } from '../../support/tripwire.js';

export interface ScenarioEnv {
  /** Where admins and agent authentication go. */
  controlPlane: string;
  /** Where `/v1/vault/*` goes: every replica (the all-in-one passes its one URL). */
  dataPlanes: string[];
  /** PUBLIC_BASE_URL: API JWT issuer and agent-assertion audience. */
  publicBaseUrl: string;
  mock: MockIssueTracker;
  /** A second live site with its own account. */
  mockDown: MockIssueTracker;
  mockAccount: { email: string; apiToken: string };
  mockDownAccount: { email: string; apiToken: string };
  /** A further site of the test CA, for a scenario that takes it down. */
  startSite(): Promise<{ site: MockIssueTracker; account: { email: string; apiToken: string } }>;
  tripwires: Tripwires;
  masterKey: string;
  /** Every line every process printed so far. */
  logs(): LogLine[];
}

export interface Scenario {
  env(): ScenarioEnv;
  /** Every secret any scenario of this shape handled. */
  secrets: SecretBag;
  /**
   * A fresh client address behind the trusted proxy: bootstrap (5/min), the agent token exchange
   * (30/min) and sign-up (30/10 min) are limited per address, and a shape makes more of them.
   */
  nextClientIp(): string;
}

export const random = (n = 12) => randomBytes(n).toString('hex');

export function createScenario(getEnv: () => ScenarioEnv): Scenario {
  let client = 0;
  return {
    env: getEnv,
    secrets: new SecretBag(),
    // 198.51.100.0/24 (TEST-NET-2) and on: never repeated within a shape.
    nextClientIp: () => {
      client++;
      return `198.51.${100 + Math.floor(client / 250)}.${(client % 250) + 1}`;
    },
  };
}

export interface Workspace {
  admin: Admin;
  user: { id: string; workspaceId: string; email: string; password: string };
  jwt: string;
}

/** A new account with its own workspace, and an admin client holding its API JWT. */
export async function newWorkspace(sc: Scenario, label = 'admin'): Promise<Workspace> {
  const cp = sc.env().controlPlane;
  const password = `pw-${random(10)}`;
  sc.secrets.add(`password (${label})`, password);
  const { user } = await signUp(cp, `${label}-${random(4)}@e2e.test`, password, 'E2E Admin', {
    'x-forwarded-for': sc.nextClientIp(),
  });
  user.session.cookieValues.forEach((v) => sc.secrets.add(`session cookie (${label})`, v));
  const jwt = (await apiJwt(cp, user.session)).token;
  sc.secrets.addJwt(`API JWT (${label})`, jwt);
  return { admin: bearerAdmin(cp, jwt), user, jwt };
}

/** An agent created, bootstrapped and logged in as a client of its own, its secrets in the bag. */
export async function enrol(
  sc: Scenario,
  admin: Admin,
  name: string,
): Promise<{ agent: EnrolledAgent; token: string }> {
  const created = await createAgent(admin, name);
  sc.secrets.add(`bootstrap secret (${name})`, created.bootstrapSecret, 'vltb_');
  // One address for both steps, so the tests' own token requests keep 127.0.0.1's quota.
  const client = { 'x-forwarded-for': sc.nextClientIp() };
  const agent = await bootstrapAgent(admin.base, created.bootstrapSecret, client);
  const r = expectStatus(
    await http<{ access_token: string }>('POST', `${admin.base}/v1/agents/token`, {
      headers: client,
      json: {
        grant_type: 'client_assertion',
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: await signAssertion(agent, { audience: sc.env().publicBaseUrl }),
      },
    }),
    200,
  );
  sc.secrets.add(`access token (${name})`, r.body.access_token, 'vltt_');
  return { agent, token: r.body.access_token };
}

/** A connection to the mock tracker (or `site`), its credentials in the bag. */
export async function connect(
  sc: Scenario,
  admin: Admin,
  target: { site: MockIssueTracker; account: { email: string; apiToken: string } } = {
    site: sc.env().mock,
    account: sc.env().mockAccount,
  },
  label?: string,
): Promise<string> {
  sc.secrets.add('issue-tracker API token', target.account.apiToken);
  sc.secrets.add('injected Basic credentials', target.site.expectedAuthorization.slice('Basic '.length));
  const created = await createIssueTrackerConnection(admin, {
    siteUrl: target.site.baseUrl,
    ...target.account,
    ...(label ? { label } : {}),
  });
  return created.connection.id;
}

/** The allowlist the brokering scenarios work under. */
export function trackerAllowlist(mock: MockIssueTracker): AllowlistEntry[] {
  return [
    {
      baseUrl: mock.baseUrl,
      methods: ['GET', 'POST', 'PUT', 'DELETE'],
      pathPatterns: ['/rest/api/3/myself', '/rest/api/3/search', '/rest/api/3/issue*'],
    },
  ];
}

/** A policy binding `agentId` to `connectionId` with `allowlist`; its id. */
export async function bind(
  admin: Admin,
  agentId: string,
  connectionId: string,
  allowlist: AllowlistEntry[],
  settings = READ_WRITE_UNATTENDED,
): Promise<string> {
  const { policy } = await createPolicy(admin, agentId, connectionId, settings);
  expectStatus(await putAllowlists(admin, policy.id, allowlist), 200);
  return policy.id;
}

/** One call an agent made, for the audit assertions. */
export interface LedgerEntry {
  label: string;
  connectionId: string;
  status: number;
  auditId?: string;
}

/** A workspace whose `main` agent may read and write issues on the mock tracker. */
export interface Broker {
  ws: Workspace;
  main: EnrolledAgent;
  token: string;
  connId: string;
  policyId: string;
  /** Every call made through `call`. */
  ledger: LedgerEntry[];
  call(label: string, dp: string, req: ExecuteRequest): Promise<HttpResult<ExecuteResponseBody>>;
}

type ExecuteResponseBody = Awaited<ReturnType<typeof execute>>['body'];

export async function newBroker(sc: Scenario, label: string): Promise<Broker> {
  const ws = await newWorkspace(sc, label);
  const { agent: main, token } = await enrol(sc, ws.admin, `${label}-main`);
  const connId = await connect(sc, ws.admin);
  const policyId = await bind(ws.admin, main.id, connId, trackerAllowlist(sc.env().mock));
  const ledger: LedgerEntry[] = [];
  return {
    ws,
    main,
    token,
    connId,
    policyId,
    ledger,
    async call(callLabel, dp, req) {
      const r = await execute(dp, token, req);
      ledger.push({
        label: callLabel,
        connectionId: req.connectionId!,
        status: r.status,
        auditId: r.body?.auditId,
      });
      return r;
    },
  };
}

/** The data-plane replica for the i-th call: calls alternate between replicas. */
export function replica(sc: Scenario, i: number): string {
  const dps = sc.env().dataPlanes;
  return dps[i % dps.length]!;
}

/**
 * Only called after a check that must hold at once has failed: finds out whether the expected
 * answer comes later (a propagation delay) or never, so the failure report says which.
 */
export async function staleness(
  probe: () => Promise<HttpResult>,
  want: number,
  maxMs = 3_000,
): Promise<string> {
  const t0 = Date.now();
  for (let n = 1; Date.now() - t0 < maxMs; n++) {
    await new Promise((r) => setTimeout(r, 20));
    const r = await probe();
    if (r.status === want)
      return `diagnosis: answered ${want} only ${Date.now() - t0} ms later (attempt ${n + 1}): stale cache`;
  }
  return `diagnosis: still not ${want} after ${maxMs} ms`;
}
