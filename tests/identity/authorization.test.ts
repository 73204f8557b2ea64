/**
 * Who may call what (spec: Authentication rules 8-9; docs/authorization.md): an agent token on
 * user routes and a viewer on mutating routes get 403; another workspace's ids get 404 on every
 * id route. Each case asserts the status and that the resource is untouched afterwards.
 *
 * A 404 that comes from the router ("no route for …") fails these tests on purpose: the spec
 * lists the route, so it must exist and be guarded, not merely be absent. Spec routes that later
 * work implements wait in PENDING_SPEC_ROUTES, which asserts they are still unregistered.
 *
 * The three lists are checked against the routes the control-plane and data-plane plugins really
 * register (no database needed): a registered route missing from a sweep fails, so a new route
 * cannot go unguarded.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectStatus, http, type Admin } from '../support/api-client.js';
import {
  agentToken,
  bearer,
  callRoute,
  enrolledAgent,
  fromIp,
  isNoRoute,
  joinAs,
  missingServices,
  newUser,
  nextIp,
  seedApproval,
  seedConnection,
  seedNotificationChannel,
  startIdentityGateway,
  type IdentityGateway,
  type RouteCase,
  type TestAgent,
  type TestUser,
} from '../support/identity-harness.js';
import { collectRegisteredRoutes, type RegisteredRoute } from '../support/registered-routes.js';

const skip = missingServices();

const allowlist = {
  allowlists: [{ baseUrl: 'https://attacker.example', methods: ['GET'], pathPatterns: ['/*'] }],
};

/** Changing where approval buttons go decides who can approve: admins only, own workspace only. */
const NOTIFICATION_CHANNEL_WRITES: RouteCase[] = [
  {
    method: 'POST',
    path: '/v1/notification-channels',
    body: { channelType: 'chatbot_a', connectionId: ':botConnectionId', config: { chatId: '7' } },
  },
  {
    method: 'POST',
    path: '/v1/notification-channels/chatbot_a/detect-chats',
    body: { connectionId: ':botConnectionId' },
  },
  { method: 'POST', path: '/v1/notification-channels/:channelId/test' },
  { method: 'PATCH', path: '/v1/notification-channels/:channelId/enabled', body: { enabled: false } },
  { method: 'DELETE', path: '/v1/notification-channels/:channelId' },
];

/** Routes an agent must never reach: approvals, policies, connections, agents, tokens (and the rest of the admin API). */
const AGENT_FORBIDDEN: RouteCase[] = [
  { method: 'POST', path: '/v1/approvals/:approvalId/approve' },
  { method: 'POST', path: '/v1/approvals/:approvalId/deny' },
  { method: 'GET', path: '/v1/policies' },
  { method: 'GET', path: '/v1/policies/:policyId' },
  { method: 'POST', path: '/v1/policies', body: { agentId: ':agentId', connectionId: ':connectionId2' } },
  {
    method: 'PUT',
    path: '/v1/policies/:policyId',
    body: { defaultMode: 'read_write', stepUpApproval: 'never' },
  },
  { method: 'PUT', path: '/v1/policies/:policyId/allowlists', body: allowlist },
  { method: 'PUT', path: '/v1/policies/:policyId/rate-limits', body: { rateLimits: null } },
  { method: 'PUT', path: '/v1/policies/:policyId/time-windows', body: { timeWindows: [] } },
  { method: 'GET', path: '/v1/policies/:policyId/rules' },
  { method: 'PUT', path: '/v1/policies/:policyId/rules', body: { rules: { request: [], response: [] } } },
  { method: 'PUT', path: '/v1/policies/:policyId/provider-constraints', body: { providerConstraints: null } },
  {
    method: 'POST',
    path: '/v1/connections/issue-tracker',
    body: { siteUrl: 'https://tracker.invalid', email: 'a@b.c', apiToken: 'x' },
  },
  { method: 'PUT', path: '/v1/connections/:connectionId/label', body: { label: 'pwned' } },
  { method: 'POST', path: '/v1/connections/start', body: { service: 'suite_a-mail', scopes: ['mail.read'] } },
  { method: 'POST', path: '/v1/connections/bot-token', body: { service: 'chatbot_a', botToken: '123:abc' } },
  { method: 'POST', path: '/v1/connections/api-key', body: { service: 'llm_a-messages', apiKey: 'sk-test' } },
  { method: 'POST', path: '/v1/connections/:connectionId/reauth' },
  {
    method: 'POST',
    path: '/v1/workspace-oauth-apps',
    body: { provider: 'suite_a', clientId: 'by-intruder', clientSecret: 'x' },
  },
  { method: 'DELETE', path: '/v1/workspace-oauth-apps/:policyId' },
  { method: 'GET', path: '/v1/workspace-oauth-apps' },
  { method: 'GET', path: '/v1/templates/:provider' },
  { method: 'GET', path: '/v1/templates/:provider/rules' },
  { method: 'GET', path: '/v1/templates/:provider/guards' },
  { method: 'POST', path: '/v1/agent-permission-requests/:permissionRequestId/approve' },
  { method: 'POST', path: '/v1/agent-permission-requests/:permissionRequestId/deny' },
  { method: 'GET', path: '/v1/agents' },
  { method: 'POST', path: '/v1/agents', body: { name: 'spawned-by-agent' } },
  { method: 'GET', path: '/v1/agents/:agentId' },
  { method: 'PUT', path: '/v1/agents/:agentId', body: { name: 'renamed-by-agent' } },
  { method: 'POST', path: '/v1/agents/:agentId/bootstrap-secret' },
  { method: 'POST', path: '/v1/agents/:agentId/enable' },
  { method: 'GET', path: '/v1/tokens' },
  { method: 'POST', path: '/v1/tokens', body: { name: 'agent-pat' } },
  { method: 'PUT', path: '/v1/tokens/:tokenId', body: { name: 'renamed-by-agent' } },
  { method: 'GET', path: '/v1/audit' },
  { method: 'GET', path: '/v1/audit/export' },
  { method: 'GET', path: '/api/auth/sessions' },
  { method: 'GET', path: '/v1/workspaces' },
  { method: 'POST', path: '/v1/workspaces', body: { name: 'created-by-agent' } },
  { method: 'GET', path: '/v1/workspaces/:workspaceId/members' },
  { method: 'POST', path: '/v1/workspaces/:workspaceId/members', body: { email: ':email', role: 'owner' } },
  { method: 'PUT', path: '/v1/workspaces/:workspaceId/members/:viewerId', body: { role: 'owner' } },
  { method: 'POST', path: '/api/internal/token/exchange', body: { workspaceId: ':workspaceId' } },
  { method: 'GET', path: '/v1/notifications' },
  { method: 'GET', path: '/v1/notifications/stream' },
  { method: 'POST', path: '/v1/notifications/:notificationId/read' },
  { method: 'POST', path: '/v1/notifications/read-all' },
  { method: 'GET', path: '/v1/notifications/push-subscriptions' },
  {
    method: 'POST',
    path: '/v1/notifications/push-subscriptions',
    body: { token: 'ExponentPushToken[agent]', platform: 'ios' },
  },
  { method: 'DELETE', path: '/v1/notifications/push-subscriptions/:pushSubscriptionId' },
  { method: 'GET', path: '/v1/notification-channels' },
  ...NOTIFICATION_CHANNEL_WRITES,
  // Destructive ones last, so a failure above does not cascade.
  { method: 'POST', path: '/v1/agents/:otherAgentId/disable' },
  { method: 'DELETE', path: '/v1/tokens/:tokenId' },
  { method: 'DELETE', path: '/v1/policies/:policyId' },
  { method: 'DELETE', path: '/v1/agents/:otherAgentId' },
  { method: 'DELETE', path: '/v1/workspaces/:workspaceId/members/:viewerId' },
  { method: 'DELETE', path: '/api/auth/sessions/:sessionId' },
];

/** Every route that changes workspace state. A viewer's own credentials (PATs, sessions) are not workspace state. */
const VIEWER_FORBIDDEN: RouteCase[] = [
  { method: 'POST', path: '/v1/agents', body: { name: 'by-viewer' } },
  { method: 'PUT', path: '/v1/agents/:agentId', body: { name: 'renamed-by-viewer' } },
  { method: 'POST', path: '/v1/agents/:agentId/bootstrap-secret' },
  { method: 'POST', path: '/v1/agents/:agentId/disable' },
  { method: 'POST', path: '/v1/agents/:disabledAgentId/enable' },
  { method: 'POST', path: '/v1/policies', body: { agentId: ':agentId', connectionId: ':connectionId2' } },
  { method: 'PUT', path: '/v1/policies/:policyId', body: { defaultMode: 'read_write' } },
  { method: 'PUT', path: '/v1/policies/:policyId/allowlists', body: allowlist },
  {
    method: 'PUT',
    path: '/v1/policies/:policyId/rate-limits',
    body: { rateLimits: { maxRequestsPerHour: 1 } },
  },
  { method: 'PUT', path: '/v1/policies/:policyId/time-windows', body: { timeWindows: [] } },
  { method: 'PUT', path: '/v1/policies/:policyId/rules', body: { rules: { request: [], response: [] } } },
  { method: 'PUT', path: '/v1/policies/:policyId/provider-constraints', body: { providerConstraints: null } },
  {
    method: 'POST',
    path: '/v1/connections/issue-tracker',
    body: { siteUrl: 'https://tracker.invalid', email: 'a@b.c', apiToken: 'x' },
  },
  { method: 'PUT', path: '/v1/connections/:connectionId/label', body: { label: 'renamed-by-viewer' } },
  { method: 'POST', path: '/v1/connections/start', body: { service: 'suite_a-mail', scopes: ['mail.read'] } },
  { method: 'POST', path: '/v1/connections/bot-token', body: { service: 'chatbot_a', botToken: '123:abc' } },
  { method: 'POST', path: '/v1/connections/api-key', body: { service: 'llm_a-messages', apiKey: 'sk-test' } },
  { method: 'POST', path: '/v1/connections/:connectionId/reauth' },
  {
    method: 'POST',
    path: '/v1/workspace-oauth-apps',
    body: { provider: 'suite_a', clientId: 'by-intruder', clientSecret: 'x' },
  },
  { method: 'DELETE', path: '/v1/workspace-oauth-apps/:policyId' },
  { method: 'POST', path: '/v1/agent-permission-requests/:permissionRequestId/approve' },
  { method: 'POST', path: '/v1/agent-permission-requests/:permissionRequestId/deny' },
  { method: 'POST', path: '/v1/approvals/:approvalId/approve' },
  { method: 'POST', path: '/v1/approvals/:approvalId/deny' },
  { method: 'POST', path: '/v1/workspaces/:workspaceId/members', body: { email: ':email', role: 'admin' } },
  { method: 'PUT', path: '/v1/workspaces/:workspaceId/members/:viewerId', body: { role: 'owner' } },
  { method: 'DELETE', path: '/v1/workspaces/:workspaceId/members/:ownerId' },
  ...NOTIFICATION_CHANNEL_WRITES,
  { method: 'POST', path: '/v1/connections/:connectionId/revoke' },
  { method: 'DELETE', path: '/v1/policies/:policyId' },
  { method: 'DELETE', path: '/v1/agents/:agentId' },
];

/**
 * Mutating user routes a viewer may call: they act on the caller's own credentials or create a
 * workspace the caller then owns, never on the workspace the caller is a viewer of (docs/
 * authorization.md, "Why PATs, sessions and POST /v1/workspaces need only api:read"). Each must
 * declare `api:read` or no scope; any other mutating user route belongs in VIEWER_FORBIDDEN.
 */
const VIEWER_EXEMPT: { method: string; path: string; reason: string }[] = [
  { method: 'POST', path: '/v1/tokens', reason: 'creates a PAT of the caller (capped at the role’s scopes)' },
  { method: 'PUT', path: '/v1/tokens/:tokenId', reason: 'renames a PAT of the caller' },
  { method: 'DELETE', path: '/v1/tokens/:tokenId', reason: 'revokes a PAT of the caller' },
  { method: 'DELETE', path: '/api/auth/sessions/:sessionId', reason: 'ends a session of the caller' },
  { method: 'POST', path: '/v1/workspaces', reason: 'creates a new workspace the caller owns' },
  {
    method: 'POST',
    path: '/v1/notifications/:notificationId/read',
    reason: 'marks a notification of the caller read',
  },
  { method: 'POST', path: '/v1/notifications/read-all', reason: 'marks the caller’s notifications read' },
  {
    method: 'POST',
    path: '/v1/notifications/push-subscriptions',
    reason: 'registers a device of the caller for push',
  },
  {
    method: 'DELETE',
    path: '/v1/notifications/push-subscriptions/:pushSubscriptionId',
    reason: 'removes a device of the caller',
  },
  {
    method: 'POST',
    path: '/api/internal/token/exchange',
    reason: 'exchanges the caller’s session for a JWT in a workspace the caller belongs to, with its role',
  },
];

/** Every route that takes an id in the path (or a body id naming another resource). */
const ID_ROUTES: RouteCase[] = [
  { method: 'GET', path: '/v1/agents/:agentId' },
  { method: 'PUT', path: '/v1/agents/:agentId', body: { name: 'renamed-across-workspaces' } },
  { method: 'POST', path: '/v1/agents/:agentId/bootstrap-secret' },
  { method: 'POST', path: '/v1/agents/:agentId/disable' },
  { method: 'POST', path: '/v1/agents/:disabledAgentId/enable' },
  { method: 'PUT', path: '/v1/tokens/:tokenId', body: { name: 'renamed-across-workspaces' } },
  { method: 'POST', path: '/v1/policies', body: { agentId: ':agentId', connectionId: ':connectionId2' } },
  { method: 'GET', path: '/v1/policies/:policyId' },
  { method: 'PUT', path: '/v1/policies/:policyId', body: { defaultMode: 'read_write' } },
  { method: 'PUT', path: '/v1/policies/:policyId/allowlists', body: allowlist },
  { method: 'PUT', path: '/v1/policies/:policyId/rate-limits', body: { rateLimits: null } },
  { method: 'PUT', path: '/v1/policies/:policyId/time-windows', body: { timeWindows: [] } },
  { method: 'GET', path: '/v1/policies/:policyId/rules' },
  { method: 'PUT', path: '/v1/policies/:policyId/rules', body: { rules: { request: [], response: [] } } },
  { method: 'PUT', path: '/v1/policies/:policyId/provider-constraints', body: { providerConstraints: null } },
  {
    method: 'PUT',
    path: '/v1/connections/:connectionId/label',
    body: { label: 'renamed-across-workspaces' },
  },
  { method: 'POST', path: '/v1/connections/:connectionId/reauth' },
  { method: 'DELETE', path: '/v1/workspace-oauth-apps/:policyId' },
  { method: 'POST', path: '/v1/agent-permission-requests/:permissionRequestId/approve' },
  { method: 'POST', path: '/v1/agent-permission-requests/:permissionRequestId/deny' },
  { method: 'GET', path: '/v1/approvals/:approvalId' },
  { method: 'POST', path: '/v1/approvals/:approvalId/approve' },
  { method: 'POST', path: '/v1/approvals/:approvalId/deny' },
  { method: 'GET', path: '/v1/workspaces/:workspaceId/members' },
  { method: 'POST', path: '/v1/workspaces/:workspaceId/members', body: { email: ':email', role: 'owner' } },
  { method: 'PUT', path: '/v1/workspaces/:workspaceId/members/:ownerId', body: { role: 'viewer' } },
  { method: 'DELETE', path: '/v1/workspaces/:workspaceId/members/:ownerId' },
  { method: 'POST', path: '/v1/notifications/:notificationId/read' },
  { method: 'DELETE', path: '/v1/notifications/push-subscriptions/:pushSubscriptionId' },
  ...NOTIFICATION_CHANNEL_WRITES.filter((r) => r.path !== '/v1/notification-channels'),
  { method: 'DELETE', path: '/api/auth/sessions/:sessionId' },
  { method: 'DELETE', path: '/v1/tokens/:tokenId' },
  { method: 'POST', path: '/v1/connections/:connectionId/revoke' },
  { method: 'DELETE', path: '/v1/policies/:policyId' },
  { method: 'DELETE', path: '/v1/agents/:agentId' },
];

/**
 * Path parameters that name no workspace resource (a provider of the catalog): the same for
 * every workspace, so not in ID_ROUTES. tests/catalog/templates.test.ts covers them.
 */
const NOT_WORKSPACE_PARAMS = ['/v1/templates/:provider'];

type Sweep = 'AGENT_FORBIDDEN' | 'VIEWER_FORBIDDEN' | 'ID_ROUTES';

/**
 * Routes of the interface that later issues implement: not registered yet, so the sweeps
 * would only see the router's 404. Each names the sweeps it joins, with the body to send there.
 * When one is registered, the "not registered yet" test below fails: move it into those lists,
 * where it must pass like every other route.
 */
const PENDING_SPEC_ROUTES: (RouteCase & { sweeps: Sweep[] })[] = [];

const label = (r: RouteCase) => `${r.method} ${r.path.replace(/:\w+/g, ':id')}`;

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Routes a workspace user may call (`any` also admits agents, so it is not agent-forbidden). */
const userCallable = (r: RegisteredRoute) => r.auth === 'user' || r.auth === 'any';
const needsMoreThanRead = (r: RegisteredRoute) => r.scope !== undefined && r.scope !== 'api:read';
const asCase = (r: RegisteredRoute): RouteCase => ({ method: r.method, path: r.url });

/** Registered routes (as `METHOD /path/:id` labels) matching `pick` that `list` does not cover. */
function missingFrom(
  registered: RegisteredRoute[],
  pick: (r: RegisteredRoute) => boolean,
  list: RouteCase[],
): string[] {
  const listed = new Set(list.map(label));
  return registered
    .filter(pick)
    .map((r) => label(asCase(r)))
    .filter((l) => !listed.has(l));
}

describe('the sweep lists cover every registered route', () => {
  let registered: RegisteredRoute[];
  beforeAll(async () => {
    registered = await collectRegisteredRoutes();
  });

  it('every user route is in AGENT_FORBIDDEN', () => {
    const missing = missingFrom(registered, (r) => r.auth === 'user', AGENT_FORBIDDEN);
    expect(missing, 'user routes an agent token is not tried on').toEqual([]);
  });

  it('every mutating user route that needs more than api:read is in VIEWER_FORBIDDEN', () => {
    const missing = missingFrom(
      registered,
      (r) => userCallable(r) && MUTATING.has(r.method) && needsMoreThanRead(r),
      VIEWER_FORBIDDEN,
    );
    expect(missing, 'mutating routes a viewer is not tried on').toEqual([]);
  });

  it('every other mutating user route is a listed viewer exemption, and declares only api:read', () => {
    const unlisted = missingFrom(
      registered,
      (r) => userCallable(r) && MUTATING.has(r.method) && !needsMoreThanRead(r),
      VIEWER_EXEMPT,
    );
    expect(unlisted, 'mutating routes a viewer may call without a listed reason').toEqual([]);
    const byLabel = new Map(registered.map((r) => [label(asCase(r)), r]));
    for (const e of VIEWER_EXEMPT) {
      const r = byLabel.get(label(e));
      expect(r, `exempt route ${label(e)} is not registered`).toBeDefined();
      expect(needsMoreThanRead(r!), `exempt route ${label(e)} needs scope ${r!.scope}`).toBe(false);
      expect(VIEWER_FORBIDDEN.map(label), `${label(e)} is both exempt and forbidden`).not.toContain(label(e));
    }
  });

  it('every user route with a path parameter under /v1 is in ID_ROUTES', () => {
    const missing = missingFrom(
      registered,
      (r) =>
        userCallable(r) &&
        r.url.startsWith('/v1/') &&
        /:\w+/.test(r.url) &&
        !NOT_WORKSPACE_PARAMS.some((p) => r.url.startsWith(p)),
      ID_ROUTES,
    );
    expect(missing, 'id routes another workspace is not tried on').toEqual([]);
  });

  it('the routes exempt from ID_ROUTES take no workspace resource: any workspace reads the same', () => {
    for (const p of NOT_WORKSPACE_PARAMS) {
      expect(
        registered.some((r) => r.url.startsWith(p)),
        `${p} is not registered`,
      ).toBe(true);
    }
  });

  it.each(PENDING_SPEC_ROUTES.map((r) => [label(r), r] as const))(
    'pending spec route %s is not registered yet (once it is, move it into its sweeps)',
    (name, route) => {
      expect(
        registered.map((r) => label(asCase(r))),
        `${name} is registered now: move it from PENDING_SPEC_ROUTES into ${route.sweeps.join(', ')}`,
      ).not.toContain(name);
      for (const sweep of route.sweeps) {
        const list = { AGENT_FORBIDDEN, VIEWER_FORBIDDEN, ID_ROUTES }[sweep];
        expect(list.map(label), `${name} is both pending and in ${sweep}`).not.toContain(name);
      }
    },
  );
});

describe.skipIf(skip)(skip ? `authorization (skipped: ${skip})` : 'authorization', () => {
  let g: IdentityGateway;
  let owner: TestUser;
  let outsider: TestUser;
  let viewer: Admin;
  let viewerUser: TestUser;
  let agent: TestAgent;
  let other: TestAgent;
  let agentTok: string;
  let pat: string;
  const ids: Record<string, string> = {};

  /** Fills `:name` placeholders inside bodies too (ids and the e-mail of an existing account). */
  const bodyOf = (r: RouteCase): RouteCase =>
    r.body === undefined
      ? r
      : {
          ...r,
          body: JSON.parse(
            JSON.stringify(r.body).replace(/":(\w+)"/g, (m, k: string) => (ids[k] ? `"${ids[k]}"` : m)),
          ),
        };

  /** What must still hold after a sweep of refused calls: nothing in workspace A changed. */
  async function expectWorkspaceUntouched() {
    const agents = await g.sql<{ id: string; name: string; status: string }>(
      'SELECT id, name, status::text AS status FROM agents WHERE workspace_id = $1 ORDER BY created_at',
      [owner.workspaceId],
    );
    expect(agents.map((a) => [a.id, a.name, a.status])).toEqual(
      ids.snapshotAgents ? JSON.parse(ids.snapshotAgents) : [],
    );
    const policies = await g.sql<{ version: number }>('SELECT version FROM policies WHERE id = $1', [
      ids.policyId,
    ]);
    expect(policies).toEqual([{ version: 1 }]);
    const conns = await g.sql<{ status: string; label: string }>(
      'SELECT status::text AS status, label FROM connections WHERE id = $1',
      [ids.connectionId],
    );
    expect(conns[0]).toMatchObject({ status: 'healthy', label: 'seeded issues' });
    const approvals = await g.sql<{ status: string }>(
      'SELECT status::text AS status FROM approval_requests WHERE id = $1',
      [ids.approvalId],
    );
    expect(approvals).toEqual([{ status: 'pending' }]);
    const permissionRequests = await g.sql<{ status: string }>(
      'SELECT status::text AS status FROM agent_permission_requests WHERE id = $1',
      [ids.permissionRequestId],
    );
    expect(permissionRequests).toEqual([{ status: 'pending' }]);
    const members = await g.sql<{ user_id: string; role: string }>(
      'SELECT user_id, role::text AS role FROM memberships WHERE workspace_id = $1 ORDER BY user_id',
      [owner.workspaceId],
    );
    expect(members).toEqual(JSON.parse(ids.snapshotMembers!));
    const channels = await g.sql<{ enabled: boolean }>(
      'SELECT enabled FROM notification_channels WHERE id = $1',
      [ids.channelId],
    );
    expect(channels).toEqual([{ enabled: true }]);
    expect(
      await g.sql('SELECT read FROM notifications WHERE id = $1', [ids.notificationId]),
      'the owner’s notification is still unread',
    ).toEqual([{ read: false }]);
    expect(
      await g.sql('SELECT id FROM push_subscriptions WHERE id = $1', [ids.pushSubscriptionId]),
      'the owner’s device is still registered',
    ).toHaveLength(1);
    expect((await http('GET', `${g.baseUrl}/v1/agents`, { headers: { 'x-api-key': pat } })).status).toBe(200);
    const pats = await g.sql<{ name: string; revoked: boolean }>(
      'SELECT name, revoked_at IS NOT NULL AS revoked FROM personal_access_tokens WHERE id = $1',
      [ids.tokenId],
    );
    expect(pats).toEqual([{ name: 'owner-pat', revoked: false }]);
    expect((await http('GET', `${g.baseUrl}/v1/agents`, { headers: owner.admin.headers })).status).toBe(200);
  }

  beforeAll(async () => {
    g = await startIdentityGateway('authz');
    owner = await newUser(g.baseUrl, 'owner');
    outsider = await newUser(g.baseUrl, 'outsider');
    viewerUser = await newUser(g.baseUrl, 'viewer');
    viewer = await joinAs(owner, viewerUser, 'viewer');
    [agent, other] = await Promise.all([enrolledAgent(owner.admin), enrolledAgent(owner.admin)]);
    agentTok = await agentToken(g.baseUrl, agent);
    const disabled = await enrolledAgent(owner.admin);
    expectStatus(
      await http('POST', `${g.baseUrl}/v1/agents/${disabled.id}/disable`, { headers: owner.admin.headers }),
      200,
    );

    const connectionId = await seedConnection(g, owner.workspaceId);
    const connectionId2 = await seedConnection(g, owner.workspaceId);
    const botConnectionId = await seedConnection(g, owner.workspaceId, {
      provider: 'chatbot_a',
      service: 'chatbot_a',
      singleton: true,
    });
    const policy = expectStatus(
      await http<{ policy: { id: string } }>('POST', `${g.baseUrl}/v1/policies`, {
        headers: owner.admin.headers,
        json: { agentId: agent.id, connectionId, allowedModels: ['B'] },
      }),
      201,
    ).body.policy;
    const approvalId = await seedApproval(g, {
      workspaceId: owner.workspaceId,
      policyId: policy.id,
      agentId: agent.id,
      connectionId,
      actor: owner.id,
    });
    const channelId = await seedNotificationChannel(g, owner.workspaceId, botConnectionId);
    const notificationId = randomUUID();
    await g.sql(
      `INSERT INTO notifications (id, workspace_id, user_id, type, title, body, source_event_id) VALUES ($1, $2, $3, 'security_alert', 't', 'b', $4)`,
      [notificationId, owner.workspaceId, owner.id, notificationId],
    );
    const pushSubscriptionId = randomUUID();
    await g.sql(
      `INSERT INTO push_subscriptions (id, workspace_id, user_id, expo_push_token, platform) VALUES ($1, $2, $3, 'ExponentPushToken[owner]', 'ios')`,
      [pushSubscriptionId, owner.workspaceId, owner.id],
    );
    const permissionRequest = expectStatus(
      await http<{ requestId: string }>('POST', `${g.baseUrl}/v1/agent-permission-requests`, {
        headers: { authorization: `Bearer ${agentTok}` },
        json: { actionTemplateId: 'suite_a-mail.read', reason: 'triage the inbox' },
      }),
      201,
    ).body;
    const patRes = expectStatus(
      await http<{ token: { id: string }; plainToken: string }>('POST', `${g.baseUrl}/v1/tokens`, {
        headers: owner.admin.headers,
        json: { name: 'owner-pat', expiresInDays: 1 },
      }),
      201,
    );
    pat = patRes.body.plainToken;
    const sessions = expectStatus(
      await http<{ sessions: { id: string; current: boolean }[] }>('GET', `${g.baseUrl}/api/auth/sessions`, {
        headers: owner.admin.headers,
      }),
      200,
    );
    Object.assign(ids, {
      agentId: agent.id,
      otherAgentId: other.id,
      disabledAgentId: disabled.id,
      connectionId,
      connectionId2,
      botConnectionId,
      policyId: policy.id,
      approvalId,
      channelId,
      notificationId,
      pushSubscriptionId,
      permissionRequestId: permissionRequest.requestId,
      provider: 'suite_a',
      tokenId: patRes.body.token.id,
      sessionId: sessions.body.sessions.find((s) => s.current)!.id,
      workspaceId: owner.workspaceId,
      ownerId: owner.id,
      viewerId: viewerUser.id,
      email: outsider.email,
    });
    const agents = await g.sql<{ id: string; name: string; status: string }>(
      'SELECT id, name, status::text AS status FROM agents WHERE workspace_id = $1 ORDER BY created_at',
      [owner.workspaceId],
    );
    ids.snapshotAgents = JSON.stringify(agents.map((a) => [a.id, a.name, a.status]));
    ids.snapshotMembers = JSON.stringify(
      await g.sql(
        'SELECT user_id, role::text AS role FROM memberships WHERE workspace_id = $1 ORDER BY user_id',
        [owner.workspaceId],
      ),
    );
  });
  afterAll(async () => {
    await g?.close();
  });

  it('the pending spec routes still get the router 404 from the gateway the sweeps call', async () => {
    for (const route of PENDING_SPEC_ROUTES) {
      // No credentials: should one be registered after all, it refuses the call (401) and changes nothing.
      const r = await callRoute(g.baseUrl, bodyOf(route), ids, {});
      expect(isNoRoute(r), `${label(route)} answered ${r.status} ${r.text}: move it into its sweeps`).toBe(
        true,
      );
    }
  });

  describe('an agent token on user routes is refused with 403', () => {
    it('control: the agent token itself is valid (the data plane accepts it)', async () => {
      const r = await http('POST', `${g.baseUrl}/v1/vault/execute`, {
        headers: { authorization: `Bearer ${agentTok}` },
        json: { model: 'B' },
      });
      expect(r.status).toBe(400);
    });

    it.each(AGENT_FORBIDDEN.map((r) => [label(r), r] as const))('%s', async (_name, route) => {
      const r = await callRoute(g.baseUrl, bodyOf(route), ids, {
        authorization: `Bearer ${agentTok}`,
        ...fromIp(nextIp()),
      });
      expect(isNoRoute(r), `route missing: ${r.text}`).toBe(false);
      expect(r.status, r.text).toBe(403);
    });

    it('after the sweep nothing in the workspace changed', expectWorkspaceUntouched);
  });

  describe('an agent reads its own state, and nothing else (ADR 0044)', () => {
    const asAgent = () => ({ authorization: `Bearer ${agentTok}`, ...fromIp(nextIp()) });

    it('GET /v1/approvals lists only its own approvals; another agent sees none of them', async () => {
      const own = expectStatus(
        await http<{ approvals: { id: string }[] }>('GET', `${g.baseUrl}/v1/approvals`, {
          headers: asAgent(),
        }),
        200,
      );
      expect(own.body.approvals.map((a) => a.id)).toEqual([ids.approvalId]);
      const otherTok = await agentToken(g.baseUrl, other);
      const theirs = expectStatus(
        await http<{ approvals: unknown[] }>('GET', `${g.baseUrl}/v1/approvals`, {
          headers: { authorization: `Bearer ${otherTok}`, ...fromIp(nextIp()) },
        }),
        200,
      );
      expect(theirs.body.approvals).toEqual([]);
      const peek = await http('GET', `${g.baseUrl}/v1/approvals/${ids.approvalId}`, {
        headers: { authorization: `Bearer ${otherTok}`, ...fromIp(nextIp()) },
      });
      expect(peek.status, peek.text).toBe(404);
      const mine = await http('GET', `${g.baseUrl}/v1/approvals/${ids.approvalId}`, { headers: asAgent() });
      expect(mine.status, mine.text).toBe(200);
    });

    it('GET /v1/connections lists only the connections bound to it, with only its own policy', async () => {
      const r = expectStatus(
        await http<{ connections: { id: string; policies: { agentId: string }[] }[] }>(
          'GET',
          `${g.baseUrl}/v1/connections`,
          { headers: asAgent() },
        ),
        200,
      );
      expect(r.body.connections.map((c) => c.id)).toEqual([ids.connectionId]);
      expect(r.body.connections[0]!.policies.map((p) => p.agentId)).toEqual([agent.id]);
    });

    it('POST /v1/connections/:id/revoke on a connection it is not bound to is 404 and changes nothing', async () => {
      const r = await http('POST', `${g.baseUrl}/v1/connections/${ids.connectionId2}/revoke`, {
        headers: asAgent(),
      });
      expect(r.status, r.text).toBe(404);
      const rows = await g.sql<{ status: string }>(
        'SELECT status::text AS status FROM connections WHERE id = $1',
        [ids.connectionId2],
      );
      expect(rows).toEqual([{ status: 'healthy' }]);
    });

    it('an agent cannot decide its own permission request (403)', async () => {
      const r = await http(
        'POST',
        `${g.baseUrl}/v1/agent-permission-requests/${ids.permissionRequestId}/approve`,
        {
          headers: asAgent(),
        },
      );
      expect(r.status, r.text).toBe(403);
    });

    it('after these reads nothing in the workspace changed', expectWorkspaceUntouched);
  });

  describe('a viewer on mutating routes is refused with 403', () => {
    it("control: the viewer's token acts in the owner's workspace with the viewer's scopes only", async () => {
      const list = await http<{ agents: { id: string }[] }>('GET', `${g.baseUrl}/v1/agents`, {
        headers: viewer.headers,
      });
      expect(list.status).toBe(200);
      expect(list.body.agents.map((a) => a.id)).toContain(agent.id);
    });

    it.each(VIEWER_FORBIDDEN.map((r) => [label(r), r] as const))('%s', async (_name, route) => {
      const r = await callRoute(g.baseUrl, bodyOf(route), ids, viewer.headers);
      expect(isNoRoute(r), `route missing: ${r.text}`).toBe(false);
      expect(r.status, r.text).toBe(403);
    });

    it("a viewer's own PAT cannot write either (403)", async () => {
      const created = await http<{ plainToken: string }>('POST', `${g.baseUrl}/v1/tokens`, {
        headers: viewer.headers,
        json: { name: 'viewer-pat' },
      });
      if (created.status === 201) {
        const r = await http('POST', `${g.baseUrl}/v1/agents`, {
          headers: { 'x-api-key': created.body.plainToken },
          json: { name: 'via-viewer-pat' },
        });
        expect(r.status, r.text).toBe(403);
      } else {
        expect(created.status).toBe(403);
      }
    });

    it('after the sweep nothing in the workspace changed', expectWorkspaceUntouched);
  });

  describe("another workspace's ids are 404 on every id route", () => {
    it.each(ID_ROUTES.map((r) => [label(r), r] as const))('%s', async (_name, route) => {
      const r = await callRoute(g.baseUrl, bodyOf(route), ids, outsider.admin.headers);
      expect(isNoRoute(r), `route missing: ${r.text}`).toBe(false);
      expect(r.status, r.text).toBe(404);
    });

    it("the audit log does not show another workspace's agent events when filtered by its id", async () => {
      const own = await http<{ events: unknown[] }>('GET', `${g.baseUrl}/v1/audit?agentId=${agent.id}`, {
        headers: owner.admin.headers,
      });
      const foreign = await http<{ events: unknown[] }>('GET', `${g.baseUrl}/v1/audit?agentId=${agent.id}`, {
        headers: outsider.admin.headers,
      });
      expect(foreign.status).toBe(200);
      expect(foreign.body.events).toEqual([]);
      expect(own.status).toBe(200);
    });

    it('after the sweep nothing in the workspace changed', expectWorkspaceUntouched);

    it("the owner's ids work for the owner (the 404s above come from scoping)", async () => {
      const r = await http('GET', `${g.baseUrl}/v1/agents/${agent.id}`, { headers: owner.admin.headers });
      expect(r.status).toBe(200);
      const members = await http('GET', `${g.baseUrl}/v1/workspaces/${owner.workspaceId}/members`, {
        headers: owner.admin.headers,
      });
      expect(members.status).toBe(200);
      const put = await http('PUT', `${g.baseUrl}/v1/policies/${ids.policyId}/allowlists`, {
        headers: owner.admin.headers,
        json: {
          allowlists: [
            { baseUrl: 'https://tracker.invalid', methods: ['GET'], pathPatterns: ['/rest/api/3/myself'] },
          ],
        },
      });
      expect(put.status, put.text).toBe(200);
    });
  });

  it('an outsider PAT is scoped to its own workspace too', async () => {
    const created = expectStatus(
      await http<{ plainToken: string }>('POST', `${g.baseUrl}/v1/tokens`, {
        headers: outsider.admin.headers,
        json: { name: 'outsider' },
      }),
      201,
    );
    const r = await http('GET', `${g.baseUrl}/v1/agents/${agent.id}`, {
      headers: { 'x-api-key': created.body.plainToken },
    });
    expect(r.status).toBe(404);
    const list = await http<{ agents: { id: string }[] }>('GET', `${g.baseUrl}/v1/agents`, {
      headers: bearer(g.baseUrl, outsider.jwt).headers,
    });
    expect(list.body.agents).toEqual([]);
  });
});
