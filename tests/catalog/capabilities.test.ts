/**
 * Discovery and agent self-service over HTTP: the catalog with its OAuth status, an agent's own
 * capabilities (bound connections, pending requests, what it could still ask for), and the
 * permission-request round trip with its audit rows. Both shapes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICES } from '@vlt/contracts';
import {
  apiKeyConnectionRequest,
  createPolicy,
  expectStatus,
  http,
  pollAudit,
} from '../support/api-client.js';
import { newUser } from '../support/identity-harness.js';
import { connectOAuth, startConnectionsGateway, type ConnectionsGateway } from '../support/mock-providers.js';

interface Me {
  agentId: string;
  activeConnections: {
    connectionId: string | null;
    service: string;
    provider: string;
    status: string;
    credentialType: string;
    category: string;
    displayName: string;
    label: string;
    actionTemplateId: string | null;
  }[];
  pendingRequests: { id: string; actionTemplateId: string; reason: string; requestedAt: string }[];
  availableActions: {
    id: string;
    serviceId: string;
    label: string;
    description: string;
    requiresApproval: boolean;
  }[];
}

const SHAPES = ['embedded', 'services'] as const;

describe.each(SHAPES)('capabilities and permission requests (%s)', (shape) => {
  let fx: ConnectionsGateway;
  let agent: { id: string; token: string };
  let mailConnectionId: string;
  const asAgent = () => ({ authorization: `Bearer ${agent.token}` });

  beforeAll(async () => {
    // suite_b has no deployment app: its oauthStatus depends on the workspace's own app.
    fx = await startConnectionsGateway({ shape, providerOptions: { withoutApp: ['suite_b'] } });
    agent = await fx.newAgent();
    const { connection } = await connectOAuth(fx, {
      service: 'suite_a-mail',
      scopes: [],
      agentId: agent.id,
      allowedModels: ['A', 'B'],
      label: 'work mail',
    });
    mailConnectionId = connection.id;
    fx.mock.apiKeys.add('sk-capabilities-test-key');
    const llm = expectStatus(
      await apiKeyConnectionRequest(fx.admin, {
        service: 'llm_a-messages',
        apiKey: 'sk-capabilities-test-key',
      }),
      201,
    );
    await createPolicy(fx.admin, agent.id, llm.body.connection.id, { allowedModels: ['B'] });
  }, 120_000);
  afterAll(async () => {
    await fx?.close();
  });

  it('GET /v1/capabilities/services: every catalog service with its actions, and oauthStatus per OAuth provider', async () => {
    const r = expectStatus(
      await http<{
        services: { id: string; singleton: boolean; actions: { id: string }[] }[];
        oauthStatus: Record<string, { available: boolean; source: string | null }>;
      }>('GET', `${fx.base}/v1/capabilities/services`, { headers: fx.admin.headers }),
      200,
    );
    expect(r.body.services.map((s) => s.id)).toEqual(SERVICES.map((s) => s.id));
    expect(r.body.services.find((s) => s.id === 'chatbot_a')?.singleton).toBe(true);
    for (const s of r.body.services) expect(s.actions.length, s.id).toBeGreaterThan(0);
    expect(r.body.oauthStatus.suite_a).toEqual({ available: true, source: 'platform' });
    expect(r.body.oauthStatus.suite_b).toEqual({ available: false, source: null });
    expect(Object.keys(r.body.oauthStatus).sort()).toEqual(
      ['board', 'chatbot_b', 'code_host', 'notes', 'suite_a', 'suite_b'].sort(),
    );

    // A workspace app makes the provider available, from the workspace.
    expectStatus(
      await http('POST', `${fx.base}/v1/workspace-oauth-apps`, {
        headers: fx.admin.headers,
        json: { provider: 'suite_b', clientId: 'ws-client', clientSecret: 'ws-secret' },
      }),
      201,
    );
    const after = expectStatus(
      await http<{ oauthStatus: Record<string, unknown> }>('GET', `${fx.base}/v1/capabilities/services`, {
        headers: asAgent(),
      }),
      200,
    );
    expect(after.body.oauthStatus.suite_b).toEqual({ available: true, source: 'workspace' });
  });

  it('GET /v1/capabilities/services without credentials is 401', async () => {
    expect((await http('GET', `${fx.base}/v1/capabilities/services`)).status).toBe(401);
  });

  it('GET /v1/capabilities/me: a user JWT is 403, no token 401', async () => {
    const r = await http('GET', `${fx.base}/v1/capabilities/me`, { headers: fx.admin.headers });
    expect(r.status, r.text).toBe(403);
    expect((await http('GET', `${fx.base}/v1/capabilities/me`)).status).toBe(401);
  });

  it('GET /v1/capabilities/me: bound connections (singletons without id), and what is left to ask for', async () => {
    const r = expectStatus(
      await http<Me>('GET', `${fx.base}/v1/capabilities/me`, { headers: asAgent() }),
      200,
    );
    expect(r.body.agentId).toBe(agent.id);
    const byService = new Map(r.body.activeConnections.map((c) => [c.service, c]));
    expect([...byService.keys()].sort()).toEqual(['llm_a-messages', 'suite_a-mail']);
    expect(byService.get('suite_a-mail')).toMatchObject({
      connectionId: mailConnectionId,
      provider: 'suite_a',
      status: 'healthy',
      credentialType: 'oauth',
      category: 'email',
      label: 'work mail',
      actionTemplateId: 'suite_a-mail.read',
    });
    expect(byService.get('llm_a-messages')).toMatchObject({ connectionId: null, credentialType: 'api_key' });
    const available = r.body.availableActions.map((a) => a.id);
    expect(available).not.toContain('suite_a-mail.read');
    expect(available).not.toContain('suite_a-mail.send');
    expect(available).not.toContain('llm_a-messages.use');
    expect(available).toContain('suite_a-drive.read');
    expect(r.body.availableActions.find((a) => a.id === 'suite_a-drive.write')).toMatchObject({
      serviceId: 'suite_a-drive',
      requiresApproval: true,
    });
  });

  it('another agent of the workspace sees none of these connections', async () => {
    const other = await fx.newAgent();
    const r = expectStatus(
      await http<Me>('GET', `${fx.base}/v1/capabilities/me`, {
        headers: { authorization: `Bearer ${other.token}` },
      }),
      200,
    );
    expect(r.body.activeConnections).toEqual([]);
    expect(r.body.availableActions.map((a) => a.id)).toContain('suite_a-mail.read');
  });

  it('a permission request: 201, listed as pending, no longer available; a duplicate is 409; audited', async () => {
    const created = await http<{
      success: boolean;
      requestId: string;
      actionTemplateId: string;
      message: string;
    }>('POST', `${fx.base}/v1/agent-permission-requests`, {
      headers: asAgent(),
      json: { actionTemplateId: 'suite_a-drive.read', reason: 'read the quarterly report' },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ success: true, actionTemplateId: 'suite_a-drive.read' });
    expect(typeof created.body.message).toBe('string');

    const dup = await http('POST', `${fx.base}/v1/agent-permission-requests`, {
      headers: asAgent(),
      json: { actionTemplateId: 'suite_a-drive.read', reason: 'again' },
    });
    expect(dup.status, dup.text).toBe(409);

    const me = expectStatus(
      await http<Me>('GET', `${fx.base}/v1/capabilities/me`, { headers: asAgent() }),
      200,
    );
    expect(me.body.pendingRequests).toEqual([
      expect.objectContaining({
        id: created.body.requestId,
        actionTemplateId: 'suite_a-drive.read',
        reason: 'read the quarterly report',
      }),
    ]);
    expect(me.body.availableActions.map((a) => a.id)).not.toContain('suite_a-drive.read');
    expect(me.body.availableActions.map((a) => a.id)).toContain('suite_a-drive.write');

    const audit = await pollAudit(
      fx.admin,
      { action: 'permission_requested', agentId: agent.id },
      (e) => e.length > 0,
    );
    expect(audit[0]!.metadata).toMatchObject({
      requestId: created.body.requestId,
      actionTemplateId: 'suite_a-drive.read',
    });
  });

  it('unknown action templates and empty reasons are 400; users cannot file requests (403)', async () => {
    const unknown = await http('POST', `${fx.base}/v1/agent-permission-requests`, {
      headers: asAgent(),
      json: { actionTemplateId: 'nope.read', reason: 'x' },
    });
    expect(unknown.status, unknown.text).toBe(400);
    const empty = await http('POST', `${fx.base}/v1/agent-permission-requests`, {
      headers: asAgent(),
      json: { actionTemplateId: 'suite_a-drive.write', reason: '  ' },
    });
    expect(empty.status, empty.text).toBe(400);
    const byUser = await http('POST', `${fx.base}/v1/agent-permission-requests`, {
      headers: fx.admin.headers,
      json: { actionTemplateId: 'suite_a-drive.write', reason: 'x' },
    });
    expect(byUser.status, byUser.text).toBe(403);
  });

  it('users list the workspace requests, an agent only its own; a decision is once, audited, and leaves the list', async () => {
    const other = await fx.newAgent();
    const theirs = expectStatus(
      await http<{ requestId: string }>('POST', `${fx.base}/v1/agent-permission-requests`, {
        headers: { authorization: `Bearer ${other.token}` },
        json: { actionTemplateId: 'code_host-repos.read', reason: 'review the pull request' },
      }),
      201,
    ).body.requestId;

    const all = expectStatus(
      await http<{ requests: { id: string; agentId: string; status: string }[] }>(
        'GET',
        `${fx.base}/v1/agent-permission-requests`,
        { headers: fx.admin.headers },
      ),
      200,
    );
    expect(all.body.requests.map((r) => r.id)).toContain(theirs);
    const own = expectStatus(
      await http<{ requests: { id: string; agentId: string }[] }>(
        'GET',
        `${fx.base}/v1/agent-permission-requests`,
        {
          headers: asAgent(),
        },
      ),
      200,
    );
    expect(own.body.requests.every((r) => r.agentId === agent.id)).toBe(true);
    expect(own.body.requests.map((r) => r.id)).not.toContain(theirs);

    const approved = await http<{ request: { status: string } }>(
      'POST',
      `${fx.base}/v1/agent-permission-requests/${theirs}/approve`,
      { headers: fx.admin.headers },
    );
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body.request.status).toBe('approved');
    const again = await http('POST', `${fx.base}/v1/agent-permission-requests/${theirs}/deny`, {
      headers: fx.admin.headers,
    });
    expect(again.status, again.text).toBe(409);
    const me = expectStatus(
      await http<Me>('GET', `${fx.base}/v1/capabilities/me`, {
        headers: { authorization: `Bearer ${other.token}` },
      }),
      200,
    );
    expect(me.body.pendingRequests).toEqual([]);
    await pollAudit(
      fx.admin,
      { action: 'permission_request_approved', agentId: other.id },
      (e) => e.length === 1,
    );

    // Another workspace's user cannot see or decide them.
    const outsider = await newUser(fx.base, 'outsider-perm');
    const foreign = await http('POST', `${fx.base}/v1/agent-permission-requests/${theirs}/deny`, {
      headers: outsider.admin.headers,
    });
    expect(foreign.status, foreign.text).toBe(404);
    const foreignList = expectStatus(
      await http<{ requests: unknown[] }>('GET', `${fx.base}/v1/agent-permission-requests`, {
        headers: outsider.admin.headers,
      }),
      200,
    );
    expect(foreignList.body.requests).toEqual([]);
  });
});
