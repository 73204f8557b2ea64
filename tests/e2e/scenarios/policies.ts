/**
 * Policies: one agent bound to one connection, HTTPS-only allowlists, no binding across
 * workspaces.
 */
import { expect, it } from 'vitest';
import {
  createPolicy,
  describeResult,
  expectStatus,
  http,
  putAllowlists,
  READ_WRITE_UNATTENDED,
} from '../../support/api-client.js';
import { connect, enrol, newWorkspace, trackerAllowlist, type Scenario } from './setup.js';

export function policiesScenario(sc: Scenario): void {
  it('binds agents to connections with policies; allowlist base URLs must be HTTPS', async () => {
    const { mock, mockDown, mockDownAccount } = sc.env();
    const ws = await newWorkspace(sc, 'policies');
    const other = await newWorkspace(sc, 'policies-other');
    const main = (await enrol(sc, ws.admin, 'policies-main')).agent;
    const edge = (await enrol(sc, ws.admin, 'policies-edge')).agent;
    const foreign = (await enrol(sc, other.admin, 'policies-foreign')).agent;
    const connId = await connect(sc, ws.admin);
    const connDownId = await connect(sc, ws.admin, { site: mockDown, account: mockDownAccount });

    const policy = await createPolicy(ws.admin, main.id, connId, READ_WRITE_UNATTENDED);
    expect(typeof policy.policy.id).toBe('string');
    expect(typeof policy.auditId).toBe('string');

    const insecure = await putAllowlists(ws.admin, policy.policy.id, [
      { baseUrl: mock.baseUrl.replace('https:', 'http:'), methods: ['GET'], pathPatterns: ['/rest/api/3/*'] },
    ]);
    expect(insecure.status, `http:// allowlist entry: ${describeResult(insecure)}`).toBe(400);

    const put = expectStatus(await putAllowlists(ws.admin, policy.policy.id, trackerAllowlist(mock)), 200);
    expect(put.body.policy.id).toBe(policy.policy.id);
    expect(typeof put.body.auditId).toBe('string');

    const downPolicy = await createPolicy(ws.admin, main.id, connDownId, READ_WRITE_UNATTENDED);
    expectStatus(
      await putAllowlists(ws.admin, downPolicy.policy.id, [
        { baseUrl: mockDown.baseUrl, methods: ['GET'], pathPatterns: ['/rest/api/3/*'] },
      ]),
      200,
    );
    // Left at the spec defaults (read-only): the edge-case agent also proves writes are refused.
    const edgePolicy = await createPolicy(ws.admin, edge.id, connId);
    expectStatus(await putAllowlists(ws.admin, edgePolicy.policy.id, trackerAllowlist(mock)), 200);

    // Another workspace cannot bind its agent to this workspace's connection.
    const cross = await http('POST', `${other.admin.base}/v1/policies`, {
      headers: other.admin.headers,
      json: { agentId: foreign.id, connectionId: connId, allowedModels: ['B'] },
    });
    expect([400, 403, 404], `cross-workspace policy: ${describeResult(cross)}`).toContain(cross.status);
  });
}
