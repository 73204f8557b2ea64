/**
 * ADR 0042, "exactly one refresh per expiry, across any number of replicas": two control-plane
 * processes on one PostgreSQL database, two data-plane processes, one NATS, and the mock
 * providers in the test process. Twenty concurrent Model A calls spread over both data planes
 * (whose credential requests the two control planes share) must cause one refresh at the
 * provider, three expiries in a row; `invalid_grant` seen by one replica is 409 on every pod.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceSpec } from '@vlt/contracts';
import { createPolicy, execute, http, pollAudit, vendToken, type Admin } from '../support/api-client.js';
import {
  agentToken,
  enrolledAgent,
  freshDatabase,
  newUser,
  type TestUser,
} from '../support/identity-harness.js';
import {
  ALL_MOCKED,
  connectOAuth,
  listConnectionRows,
  providerEnv,
  startMockProviders,
  type MockProviders,
} from '../support/mock-providers.js';
import { ProcessGroup, freePort, type ServiceProcess } from '../support/processes.js';
import { realServices } from '../support/services.js';

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();
const reason = unavailable ? realServices.missing() : '';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(unavailable)(unavailable ? `split refresh (skipped: ${reason})` : 'split refresh', () => {
  const group = new ProcessGroup();
  let db: { url: string; drop(): Promise<void> } | undefined;
  let mock: MockProviders;
  let cps: ServiceProcess[] = [];
  let dps: ServiceProcess[] = [];
  let publicBaseUrl: string;
  let owner: TestUser;

  beforeAll(async () => {
    mock = await startMockProviders();
    db = await freshDatabase('conn_split');
    const cpPort = await freePort();
    publicBaseUrl = `http://127.0.0.1:${cpPort}`;
    const common = {
      HOST: '127.0.0.1',
      NATS_URL: realServices.natsUrl(),
      VLT_NATS_PREFIX: `${realServices.busPrefix()}cn${randomBytes(2).toString('hex')}`,
      PUBLIC_BASE_URL: publicBaseUrl,
      VLT_TRUST_PROXY: '127.0.0.1/32',
      VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32',
      NODE_EXTRA_CA_CERTS: mock.pki.caPath,
      LOG_LEVEL: 'info',
      ...providerEnv(mock, ALL_MOCKED),
    };
    const cpEnv = { ...common, DATABASE_URL: db.url, VLT_MASTER_KEY: randomBytes(32).toString('base64') };
    const [cp1, dp1, dp2] = await Promise.all([
      group.start('control-plane', { label: 'control-plane-1', port: cpPort, env: cpEnv }),
      group.start('data-plane', { label: 'data-plane-1', env: common }),
      group.start('data-plane', { label: 'data-plane-2', env: common }),
    ]);
    const [cp2] = await Promise.all([
      group.start('control-plane', { label: 'control-plane-2', env: cpEnv }),
      group.start('audit', { env: { ...common, DATABASE_URL: db.url } }),
    ]);
    cps = [cp1!, cp2!];
    dps = [dp1!, dp2!];
    owner = await newUser(cp1!.baseUrl, 'split-conn-owner');
  }, 180_000);

  afterAll(async () => {
    await group.stopAll();
    await db?.drop();
    await mock?.close();
  }, 60_000);

  async function sql(text: string, values: unknown[] = []) {
    const c = new pg.Client({ connectionString: db!.url });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query(text, values)).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  }

  async function agentWithConnection(service: string, expiresIn: number, label: string) {
    const agent = await enrolledAgent(owner.admin);
    const token = await agentToken(cps[0]!.baseUrl, agent, publicBaseUrl);
    mock.accessTokenExpiresIn = expiresIn;
    try {
      const fx = { admin: owner.admin as Admin, mock };
      const { connection } = await connectOAuth(fx, {
        service,
        scopes: [...serviceSpec(service)!.defaultScopes],
        agentId: agent.id,
        allowedModels: ['A', 'B'],
        label,
      });
      return { agent, token, connection };
    } finally {
      mock.accessTokenExpiresIn = 3600;
    }
  }

  it('20 concurrent Model A calls over two data planes and two control planes: one refresh per expiry (3 rounds)', async () => {
    const { agent: first, token, connection } = await agentWithConnection('suite_a-mail', 1, 'split-race');
    // Ten agents, two calls each, over both data planes: a data plane shares concurrent misses
    // per agent only, so up to twenty credential requests reach the two control planes.
    const tokens = [token];
    for (let i = 0; i < 9; i++) {
      const a = await enrolledAgent(owner.admin);
      await createPolicy(owner.admin, a.id, connection.id, { allowedModels: ['A'] });
      tokens.push(await agentToken(cps[i % 2]!.baseUrl, a, publicBaseUrl));
    }
    void first;
    const version = async () =>
      Number(
        (await sql('SELECT credentials_version AS v FROM connections WHERE id = $1', [connection.id]))[0]!.v,
      );
    Object.assign(mock, { refreshExpiresIn: 35, refreshDelayMs: 300 });
    try {
      for (let round = 1; round <= 3; round++) {
        const v0 = await version();
        const mark = mock.refreshCount;
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            vendToken(dps[i % 2]!.baseUrl, tokens[Math.floor(i / 2)]!, { connectionId: connection.id }),
          ),
        );
        expect(
          results.map((r) => r.status),
          `round ${round}: ${results.find((r) => r.status !== 200)?.text}`,
        ).toEqual(Array(20).fill(200));
        expect(mock.refreshCount - mark, `round ${round}`).toBe(1);
        const fresh = mock.lastIssued()!;
        expect(fresh.grant).toBe('refresh_token');
        expect(new Set(results.map((r) => r.body.accessToken)), `round ${round}`).toEqual(
          new Set([fresh.accessToken]),
        );
        expect(await version(), `round ${round}: credentials_version`).toBe(v0 + 1);
        if (round < 3) await sleep(Math.max(0, fresh.expiresAt - 30_000 - Date.now()) + 700);
      }
    } finally {
      Object.assign(mock, { refreshExpiresIn: 3600, refreshDelayMs: 0 });
    }
    const [row] = await sql('SELECT refresh_lease_until FROM connections WHERE id = $1', [connection.id]);
    expect(row!.refresh_lease_until, 'the lease is released after the refresh').toBeNull();
  }, 90_000);

  it('invalid_grant seen through one pod: needs_reauth on both control planes, 409 on both data planes', async () => {
    const { agent, token, connection } = await agentWithConnection('suite_b-mail', 1, 'split-invalid');
    const calls = mock.apiRequests.length;
    const mark = mock.refreshCount;
    mock.refreshOutcome = 'invalid_grant';
    try {
      const first = await vendToken(dps[0]!.baseUrl, token, { connectionId: connection.id });
      expect(first.status, first.text).toBe(409);
      expect(first.body.code).toBe('CONNECTION_NEEDS_REAUTH');
    } finally {
      mock.refreshOutcome = 'ok';
    }
    for (const cp of cps) {
      const rows = await listConnectionRows({ ...owner.admin, base: cp.baseUrl });
      expect(rows.find((c) => c.id === connection.id)?.status, cp.label).toBe('needs_reauth');
    }
    for (const dp of dps) {
      const a = await vendToken(dp.baseUrl, token, { connectionId: connection.id });
      expect(a.status, `${dp.label}: ${a.text}`).toBe(409);
      const b = await execute(dp.baseUrl, token, {
        connectionId: connection.id,
        method: 'GET',
        url: `${mock.url}/v1.0/me/messages/x`,
      });
      expect(b.status, `${dp.label}: ${b.text}`).toBe(409);
    }
    expect(mock.refreshCount - mark).toBe(1);
    expect(mock.apiRequests.length).toBe(calls);
    const audit = await pollAudit(
      { ...owner.admin, base: cps[1]!.baseUrl },
      { connectionId: connection.id, action: 'connection_needs_reauth' },
      (e) => e.length > 0,
    );
    expect(audit).toHaveLength(1);
    void agent;
  });

  it('revoke through one control plane: at once, every data plane answers 409 and the provider sees nothing', async () => {
    const { token, connection } = await agentWithConnection('suite_a-drive', 3600, 'split-revoke');
    const call = (dp: ServiceProcess) =>
      execute(dp.baseUrl, token, {
        connectionId: connection.id,
        method: 'GET',
        url: `${mock.url}/drive/v3/files`,
      });
    // Warm both pods: the credentials are cached there, so only the pushed descriptor can stop them.
    for (const dp of dps) expect((await call(dp)).status, dp.label).toBe(200);
    const calls = mock.apiRequests.length;
    const revoked = await http('POST', `${cps[1]!.baseUrl}/v1/connections/${connection.id}/revoke`, {
      headers: owner.admin.headers,
    });
    expect(revoked.status, revoked.text).toBe(200);
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => call(dps[i % 2]!)));
    expect(
      results.map((r) => [r.status, (r.body as { code?: string }).code]),
      results.map((r) => r.text).join('\n'),
    ).toEqual(Array(6).fill([409, 'CONNECTION_REVOKED']));
    expect(mock.apiRequests.length, 'provider calls after the revoke').toBe(calls);
  });

  it('no process printed a refresh token', () => {
    const lines = group
      .allLines()
      .map((l) => l.text)
      .join('\n');
    for (const t of mock.refreshTokens()) expect(lines.includes(t), t).toBe(false);
  });
});
