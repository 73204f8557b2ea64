/**
 * Discovery and agent self-service across the shape's processes: the catalog, an agent's own
 * capabilities, a permission request decided by the admin, templates, and an agent reading
 * only its own approvals and connections (ADR 0042, 0044). Agents call the control plane with
 * their access token; execution goes to the data planes.
 */
import { expect, it } from 'vitest';
import { describeResult, expectStatus, http, pollAudit } from '../../support/api-client.js';
import { bind, connect, enrol, newWorkspace, trackerAllowlist, type Scenario } from './setup.js';

interface Me {
  agentId: string;
  activeConnections: { connectionId: string | null; service: string; credentialType: string }[];
  pendingRequests: { id: string; actionTemplateId: string }[];
  availableActions: { id: string; serviceId: string }[];
}

export function discoveryScenario(sc: Scenario): void {
  it('agents discover the catalog and their own capabilities, ask for more, and read only their own state', async () => {
    const ws = await newWorkspace(sc, 'discovery');
    const cp = sc.env().controlPlane;
    const { agent: main, token } = await enrol(sc, ws.admin, 'discovery-main');
    const { token: otherToken } = await enrol(sc, ws.admin, 'discovery-other');
    const asMain = { authorization: `Bearer ${token}` };
    const asOther = { authorization: `Bearer ${otherToken}` };
    const connId = await connect(sc, ws.admin);
    await bind(ws.admin, main.id, connId, trackerAllowlist(sc.env().mock));

    const services = expectStatus(
      await http<{ services: { id: string }[]; oauthStatus: Record<string, { available: boolean }> }>(
        'GET',
        `${cp}/v1/capabilities/services`,
        { headers: asMain },
      ),
      200,
    );
    expect(services.body.services.map((s) => s.id)).toContain('issues');
    expect(Object.keys(services.body.oauthStatus)).toContain('suite_a');

    const userMe = await http('GET', `${cp}/v1/capabilities/me`, { headers: ws.admin.headers });
    expect(userMe.status, describeResult(userMe)).toBe(403);

    const me = expectStatus(await http<Me>('GET', `${cp}/v1/capabilities/me`, { headers: asMain }), 200);
    expect(me.body.agentId).toBe(main.id);
    expect(me.body.activeConnections).toEqual([
      expect.objectContaining({ connectionId: connId, service: 'issues', credentialType: 'basic' }),
    ]);
    expect(me.body.availableActions.map((a) => a.serviceId)).not.toContain('issues');

    const asked = await http<{ requestId: string }>('POST', `${cp}/v1/agent-permission-requests`, {
      headers: asMain,
      json: { actionTemplateId: 'suite_a-calendar.read', reason: 'plan the sprint review' },
    });
    expect(asked.status, describeResult(asked)).toBe(201);
    const again = await http('POST', `${cp}/v1/agent-permission-requests`, {
      headers: asMain,
      json: { actionTemplateId: 'suite_a-calendar.read', reason: 'again' },
    });
    expect(again.status, describeResult(again)).toBe(409);
    const pending = expectStatus(await http<Me>('GET', `${cp}/v1/capabilities/me`, { headers: asMain }), 200);
    expect(pending.body.pendingRequests.map((r) => r.id)).toEqual([asked.body.requestId]);

    const decided = await http('POST', `${cp}/v1/agent-permission-requests/${asked.body.requestId}/deny`, {
      headers: ws.admin.headers,
    });
    expect(decided.status, describeResult(decided)).toBe(200);
    await pollAudit(
      ws.admin,
      { action: 'permission_request_denied', agentId: main.id },
      (e) => e.length === 1,
    );

    // Own state only: the other agent sees no connection, and cannot revoke this one.
    const mine = expectStatus(
      await http<{ connections: { id: string }[] }>('GET', `${cp}/v1/connections`, { headers: asMain }),
      200,
    );
    expect(mine.body.connections.map((c) => c.id)).toEqual([connId]);
    const theirs = expectStatus(
      await http<{ connections: unknown[] }>('GET', `${cp}/v1/connections`, { headers: asOther }),
      200,
    );
    expect(theirs.body.connections).toEqual([]);
    const revoke = await http('POST', `${cp}/v1/connections/${connId}/revoke`, { headers: asOther });
    expect(revoke.status, describeResult(revoke)).toBe(404);

    const templates = await http<{ templates: unknown[] }>('GET', `${cp}/v1/templates/suite_a`, {
      headers: ws.admin.headers,
    });
    expect(templates.status, describeResult(templates)).toBe(200);
    expect(templates.body.templates.length).toBeGreaterThan(0);
  });
}
