/**
 * `POST /v1/vault/permission-requests`: an agent asks a human before acting. The request goes
 * through the Model B pipeline and is filed for approval even where the policy would allow it
 * outright; it never reaches the provider until the agent runs it with the approval id, once.
 * Denials stay denials, the rate limit counts it, and the approval binds the exact request.
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

async function newBinding(settings: Parameters<typeof createPolicy>[3] = { allowedModels: ['B'] }) {
  const { agent, token } = await enrolAgent(admin, gw.baseUrl, `agent-${randomBytes(3).toString('hex')}`);
  const conn = await createIssueTrackerConnection(admin, { siteUrl: mock.baseUrl, ...creds });
  const { policy } = await createPolicy(admin, agent.id, conn.connection.id, settings);
  return { agentId: agent.id, token, connectionId: conn.connection.id, policyId: policy.id };
}

type Filed = { approvalRequestId: string; expiresAt: string; auditId: string };

function ask(token: string, body: Record<string, unknown>) {
  return http<Filed & { error?: string }>('POST', `${gw.baseUrl}/v1/vault/permission-requests`, {
    headers: { authorization: `Bearer ${token}` },
    json: body,
  });
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

describe('permission requests', () => {
  it('files a call the policy allows outright, sends nothing, and runs it once after approval', async () => {
    const b = await newBinding();
    const url = `${mock.baseUrl}/rest/api/3/myself`;
    const before = mock.requests.length;
    const filed = await ask(b.token, {
      connectionId: b.connectionId,
      actionDescription: 'Check which account the tracker connection uses',
      method: 'GET',
      url,
    });
    expect(filed.status, JSON.stringify(filed.body)).toBe(201);
    expect(filed.body.approvalRequestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(mock.requests.length).toBe(before);

    const view = await http<{ approval: { status: string; requestDetails: Record<string, unknown> } }>(
      'GET',
      `${gw.baseUrl}/v1/approvals/${filed.body.approvalRequestId}`,
      { headers: admin.headers },
    );
    expect(view.body.approval.status).toBe('pending');
    expect(view.body.approval.requestDetails).toMatchObject({
      method: 'GET',
      url,
      actionDescription: 'Check which account the tracker connection uses',
    });
    const requested = await pollAudit(
      admin,
      { agentId: b.agentId, action: 'approval_requested' },
      (e) => e.length >= 1,
    );
    expect(requested[0]!.auditId).toBe(filed.body.auditId);
    const denied = await pollAudit(
      admin,
      { agentId: b.agentId, action: 'execution_denied' },
      (e) => e.length >= 1,
    );
    expect(JSON.stringify(denied[0])).toContain('permission requested by the agent');

    // Not yet approved: the call is refused and still not sent.
    const early = await execute(gw.baseUrl, b.token, {
      connectionId: b.connectionId,
      method: 'GET',
      url,
      approvalId: filed.body.approvalRequestId,
    });
    expect(early.status).toBe(403);
    expect(JSON.stringify(early.body)).toMatch(/still pending/);
    expect(mock.requests.length).toBe(before);

    const approved = await http(
      'POST',
      `${gw.baseUrl}/v1/approvals/${filed.body.approvalRequestId}/approve`,
      {
        headers: admin.headers,
      },
    );
    expect(approved.status).toBe(200);
    const run = await execute(gw.baseUrl, b.token, {
      connectionId: b.connectionId,
      method: 'GET',
      url,
      approvalId: filed.body.approvalRequestId,
    });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    expect(mock.requests.length).toBe(before + 1);
    const again = await execute(gw.baseUrl, b.token, {
      connectionId: b.connectionId,
      method: 'GET',
      url,
      approvalId: filed.body.approvalRequestId,
    });
    expect(again.status).toBe(409);
    expect(JSON.stringify(again.body)).toMatch(/already been used/);
    expect(mock.requests.length).toBe(before + 1);
  });

  it('an approval binds the exact request: another URL with its id is refused', async () => {
    const b = await newBinding();
    const filed = await ask(b.token, {
      connectionId: b.connectionId,
      actionDescription: 'Read my profile',
      method: 'GET',
      url: `${mock.baseUrl}/rest/api/3/myself`,
    });
    expect(filed.status).toBe(201);
    await http('POST', `${gw.baseUrl}/v1/approvals/${filed.body.approvalRequestId}/approve`, {
      headers: admin.headers,
    });
    const before = mock.requests.length;
    const other = await execute(gw.baseUrl, b.token, {
      connectionId: b.connectionId,
      method: 'GET',
      url: `${mock.baseUrl}/rest/api/3/project`,
      approvalId: filed.body.approvalRequestId,
    });
    expect(other.status).toBe(403);
    expect(JSON.stringify(other.body)).toMatch(/different request/);
    expect(mock.requests.length).toBe(before);
  });

  it('a request the policy denies is denied, not filed', async () => {
    const b = await newBinding();
    const r = await ask(b.token, {
      connectionId: b.connectionId,
      actionDescription: 'Open the admin page',
      method: 'GET',
      url: `${mock.baseUrl}/admin`,
    });
    expect(r.status).toBe(403);
    expect(r.body.error).toEqual(expect.any(String));
    const list = await http<{ approvals: unknown[] }>('GET', `${gw.baseUrl}/v1/approvals`, {
      headers: { authorization: `Bearer ${b.token}` },
    });
    expect(list.body.approvals).toHaveLength(0);
  });

  it('counts against the rate limit: past it, 429 and nothing filed', async () => {
    const b = await newBinding();
    await http('PUT', `${gw.baseUrl}/v1/policies/${b.policyId}/rate-limits`, {
      headers: admin.headers,
      json: { rateLimits: { maxRequestsPerHour: 2 } },
    });
    const body = {
      connectionId: b.connectionId,
      actionDescription: 'Read my profile',
      method: 'GET',
      url: `${mock.baseUrl}/rest/api/3/myself`,
    };
    expect((await ask(b.token, body)).status).toBe(201);
    expect((await ask(b.token, body)).status).toBe(201);
    const over = await ask(b.token, body);
    expect(over.status).toBe(429);
    expect(over.headers['retry-after']).toMatch(/^\d+$/);
  });

  it('refuses a missing description, an unknown connection and a user token', async () => {
    const b = await newBinding();
    const url = `${mock.baseUrl}/rest/api/3/myself`;
    const noDescription = await ask(b.token, { connectionId: b.connectionId, method: 'GET', url });
    expect(noDescription.status).toBe(400);
    expect(noDescription.body.error).toEqual(expect.any(String));
    const blank = await ask(b.token, {
      connectionId: b.connectionId,
      actionDescription: '   ',
      method: 'GET',
      url,
    });
    expect(blank.status).toBe(400);
    const unknown = await ask(b.token, {
      connectionId: '00000000-0000-4000-8000-000000000000',
      actionDescription: 'x',
      method: 'GET',
      url,
    });
    expect(unknown.status).toBe(404);
    const asUser = await http('POST', `${gw.baseUrl}/v1/vault/permission-requests`, {
      headers: admin.headers,
      json: { connectionId: b.connectionId, actionDescription: 'x', method: 'GET', url },
    });
    expect([401, 403]).toContain(asUser.status);
  });
});
