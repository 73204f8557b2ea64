/**
 * Model B behaviour that needs more than one request to show: the shared per-pair rate
 * limit, and the step-up approval round trip (202 → approve → redeem exactly once).
 * Runs on the in-process gateway (real PostgreSQL when available, else embedded PGlite).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createIssueTrackerConnection,
  createPolicy,
  enrolAgent,
  execute,
  http,
  pollAudit,
  signUp,
  type Admin,
} from '../support/api-client.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';
import { startMockIssueTracker, type MockIssueTracker } from '../support/mock-issue-tracker.js';
import { createTestPki, type TestPki } from '../support/test-pki.js';

let pki: TestPki;
let mock: MockIssueTracker;
let gw: InProcessGateway;
let admin: Admin;
const creds = { email: 'bot@tracker.test', apiToken: `tok-${randomBytes(12).toString('hex')}` };

async function newBinding(settings: Parameters<typeof createPolicy>[3]) {
  const { agent, token } = await enrolAgent(admin, gw.baseUrl, `agent-${randomBytes(3).toString('hex')}`);
  const conn = await createIssueTrackerConnection(admin, { siteUrl: mock.baseUrl, ...creds });
  const { policy } = await createPolicy(admin, agent.id, conn.connection.id, settings);
  return { agentId: agent.id, token, connectionId: conn.connection.id, policyId: policy.id };
}

beforeAll(async () => {
  pki = await createTestPki();
  mock = await startMockIssueTracker({ ...creds, tls: { key: pki.key, cert: pki.cert } });
  gw = await startInProcessGateway({ VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32' }, { upstreamCa: [pki.caPem] });
  const { user } = await signUp(
    gw.baseUrl,
    `owner-${randomBytes(4).toString('hex')}@gw.test`,
    'correct horse battery',
  );
  admin = bearerAdmin(gw.baseUrl, (await apiJwt(gw.baseUrl, user.session)).token);
});
afterAll(async () => {
  await gw?.close();
  await mock?.close();
  await pki?.dispose();
});

describe('rate limits per agent+connection', () => {
  it('allows maxRequestsPerHour calls, then answers 429 with retryAfter and never reaches the provider', async () => {
    const b = await newBinding({ allowedModels: ['B'] });
    const limits = await http('PUT', `${gw.baseUrl}/v1/policies/${b.policyId}/rate-limits`, {
      headers: admin.headers,
      json: { rateLimits: { maxRequestsPerHour: 3 } },
    });
    expect(limits.status).toBe(200);
    const url = `${mock.baseUrl}/rest/api/3/myself`;
    // Denied calls never reach the provider, so they do not use up the limit.
    const denied = await execute(gw.baseUrl, b.token, {
      connectionId: b.connectionId,
      method: 'GET',
      url: `${mock.baseUrl}/admin`,
    });
    expect(denied.status).toBe(403);
    const before = mock.requests.length;
    for (let i = 0; i < 3; i++) {
      const r = await execute(gw.baseUrl, b.token, { connectionId: b.connectionId, method: 'GET', url });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    }
    const over = await execute(gw.baseUrl, b.token, { connectionId: b.connectionId, method: 'GET', url });
    expect(over.status).toBe(429);
    const body = over.body as unknown as { error: string; retryAfter: number; auditId: string };
    expect(body.retryAfter).toBeGreaterThan(0);
    expect(body.retryAfter).toBeLessThanOrEqual(3600);
    expect(over.headers['retry-after']).toBe(String(body.retryAfter));
    expect(mock.requests.length - before).toBe(3);
    const rows = await pollAudit(
      admin,
      { agentId: b.agentId, action: 'rate_limit_exceeded' },
      (e) => e.length >= 1,
      10_000,
    );
    expect(rows[0]!.auditId).toBe(body.auditId);
    expect(rows[0]!.decision).toBe('denied');
  });

  it('counts concurrent calls exactly: never more than the limit get through', async () => {
    const b = await newBinding({ allowedModels: ['B'] });
    await http('PUT', `${gw.baseUrl}/v1/policies/${b.policyId}/rate-limits`, {
      headers: admin.headers,
      json: { rateLimits: { maxRequestsPerHour: 5 } },
    });
    const before = mock.requests.length;
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        execute(gw.baseUrl, b.token, {
          connectionId: b.connectionId,
          method: 'GET',
          url: `${mock.baseUrl}/rest/api/3/project`,
        }),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(5);
    expect(results.filter((r) => r.status === 429)).toHaveLength(7);
    expect(mock.requests.length - before).toBe(5);
  });

  it('removing the limits (null) lets calls through again', async () => {
    const b = await newBinding({ allowedModels: ['B'] });
    const put = (rateLimits: unknown) =>
      http('PUT', `${gw.baseUrl}/v1/policies/${b.policyId}/rate-limits`, {
        headers: admin.headers,
        json: { rateLimits },
      });
    await put({ maxRequestsPerHour: 0 });
    const url = `${mock.baseUrl}/rest/api/3/myself`;
    expect(
      (await execute(gw.baseUrl, b.token, { connectionId: b.connectionId, method: 'GET', url })).status,
    ).toBe(429);
    expect((await put(null)).status).toBe(200);
    expect(
      (await execute(gw.baseUrl, b.token, { connectionId: b.connectionId, method: 'GET', url })).status,
    ).toBe(200);
  });
});

describe('step-up approval', () => {
  const issue = {
    fields: { project: { key: 'VLT' }, summary: 'from an agent', issuetype: { name: 'Task' } },
  };

  it('pauses a write with 202, runs it once after approval, and refuses a replay', async () => {
    const b = await newBinding({ allowedModels: ['B'], defaultMode: 'read_write', stepUpApproval: 'always' });
    const req = {
      connectionId: b.connectionId,
      method: 'POST',
      url: `${mock.baseUrl}/rest/api/3/issue`,
      body: issue,
    };
    const before = mock.requests.length;
    const paused = await execute(gw.baseUrl, b.token, req);
    expect(paused.status).toBe(202);
    const p = paused.body as unknown as {
      approvalRequired: boolean;
      approvalRequestId: string;
      expiresAt: string;
      auditId: string;
    };
    expect(p.approvalRequired).toBe(true);
    expect(new Date(p.expiresAt).getTime()).toBeGreaterThan(Date.now());
    expect(mock.requests.length).toBe(before);

    // The agent cannot approve its own request.
    const self = await http('POST', `${gw.baseUrl}/v1/approvals/${p.approvalRequestId}/approve`, {
      headers: { authorization: `Bearer ${b.token}` },
    });
    expect(self.status).toBe(403);
    // Re-submitting before approval does not run it.
    const early = await execute(gw.baseUrl, b.token, { ...req, approvalId: p.approvalRequestId } as never);
    expect(early.status).toBe(403);
    expect(mock.requests.length).toBe(before);

    const listed = await http<{
      approvals: { id: string; status: string; requestDetails: { method: string } }[];
    }>('GET', `${gw.baseUrl}/v1/approvals`, { headers: admin.headers });
    const mine = listed.body.approvals.find((a) => a.id === p.approvalRequestId);
    expect(mine).toMatchObject({ status: 'pending', requestDetails: { method: 'POST' } });

    const approved = await http('POST', `${gw.baseUrl}/v1/approvals/${p.approvalRequestId}/approve`, {
      headers: admin.headers,
    });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ approved: true, approvalRequestId: p.approvalRequestId });
    // A different request cannot ride on this approval.
    const other = await execute(gw.baseUrl, b.token, {
      ...req,
      body: { fields: { ...issue.fields, summary: 'something else' } },
      approvalId: p.approvalRequestId,
    } as never);
    expect(other.status).toBe(403);

    const run = await execute(gw.baseUrl, b.token, { ...req, approvalId: p.approvalRequestId } as never);
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    expect(mock.requests.length).toBe(before + 1);
    const replay = await execute(gw.baseUrl, b.token, { ...req, approvalId: p.approvalRequestId } as never);
    expect(replay.status).toBe(409);
    expect(mock.requests.length).toBe(before + 1);

    const again = await http('POST', `${gw.baseUrl}/v1/approvals/${p.approvalRequestId}/approve`, {
      headers: admin.headers,
    });
    expect(again.status).toBe(409);
    const got = await http<{ approval: { status: string } }>(
      'GET',
      `${gw.baseUrl}/v1/approvals/${p.approvalRequestId}`,
      {
        headers: admin.headers,
      },
    );
    expect(got.body.approval.status).toBe('consumed');
    const audit = await pollAudit(
      admin,
      { agentId: b.agentId },
      (e) =>
        ['approval_requested', 'approval_approved', 'execution_completed'].every((a) =>
          e.some((x) => x.action === a),
        ),
      10_000,
    );
    expect(audit.filter((e) => e.action === 'execution_completed')).toHaveLength(1);
  });

  it('a denied approval never runs', async () => {
    const b = await newBinding({ allowedModels: ['B'], defaultMode: 'read_write', stepUpApproval: 'always' });
    const req = {
      connectionId: b.connectionId,
      method: 'POST',
      url: `${mock.baseUrl}/rest/api/3/issue`,
      body: issue,
    };
    const paused = await execute(gw.baseUrl, b.token, req);
    const id = (paused.body as unknown as { approvalRequestId: string }).approvalRequestId;
    const denied = await http('POST', `${gw.baseUrl}/v1/approvals/${id}/deny`, { headers: admin.headers });
    expect(denied.status).toBe(200);
    expect(denied.body).toMatchObject({ denied: true, approvalRequestId: id });
    const before = mock.requests.length;
    const run = await execute(gw.baseUrl, b.token, { ...req, approvalId: id } as never);
    expect(run.status).toBe(403);
    expect(mock.requests.length).toBe(before);
    expect(
      (await http('POST', `${gw.baseUrl}/v1/approvals/${id}/approve`, { headers: admin.headers })).status,
    ).toBe(409);
  });

  it('answers 404 for an unknown approval id', async () => {
    const r = await http('POST', `${gw.baseUrl}/v1/approvals/00000000-0000-4000-8000-000000000000/approve`, {
      headers: admin.headers,
    });
    expect(r.status).toBe(404);
  });
});
