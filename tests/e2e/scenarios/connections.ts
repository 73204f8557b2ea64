/**
 * Connections: issue-tracker credentials validated at the site before anything is stored,
 * never returned, and visible only to their workspace.
 */
import { expect, it } from 'vitest';
import {
  createIssueTrackerConnection,
  createPat,
  describeResult,
  expectStatus,
  http,
  issueTrackerConnectionRequest,
  patAdmin,
} from '../../support/api-client.js';
import { newWorkspace, random, type Scenario } from './setup.js';

export function connectionsScenario(sc: Scenario): void {
  it('validates issue-tracker connections upstream and never returns the credential', async () => {
    const ws = await newWorkspace(sc, 'connections');
    const other = await newWorkspace(sc, 'connections-other');
    const pat = (await createPat(ws.admin, 'e2e')).plainToken;
    sc.secrets.add('PAT', pat, 'vltp_');
    const { mock, mockDown, mockAccount, mockDownAccount, tripwires } = sc.env();
    sc.secrets.add('issue-tracker API token', mockAccount.apiToken);
    sc.secrets.add('issue-tracker API token (second site)', mockDownAccount.apiToken);
    sc.secrets.add('injected Basic credentials', mock.expectedAuthorization.slice('Basic '.length));
    sc.secrets.add(
      'injected Basic credentials (second site)',
      mockDown.expectedAuthorization.slice('Basic '.length),
    );

    const wrongToken = `wrong-${random(12)}`;
    sc.secrets.add('rejected issue-tracker API token', wrongToken);
    const before = mock.requests.length;
    const wrong = await issueTrackerConnectionRequest(ws.admin, {
      siteUrl: mock.baseUrl,
      email: mockAccount.email,
      apiToken: wrongToken,
    });
    expect(
      wrong.status >= 400 && wrong.status < 500,
      `credentials the site refuses: ${describeResult(wrong)}`,
    ).toBe(true);
    const probe = mock.requests.slice(before);
    expect(probe.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /rest/api/3/myself']);
    expect(probe[0]!.authorized).toBe(false);

    const plain = await issueTrackerConnectionRequest(ws.admin, {
      siteUrl: mock.baseUrl.replace('https:', 'http:'),
      email: mockAccount.email,
      apiToken: mockAccount.apiToken,
    });
    expect(plain.status, `http:// site URL: ${describeResult(plain)}`).toBe(400);

    const ssrf = await issueTrackerConnectionRequest(ws.admin, {
      siteUrl: tripwires.v4.origin,
      email: mockAccount.email,
      apiToken: mockAccount.apiToken,
    });
    expect(ssrf.status >= 400 && ssrf.status < 600 && ssrf.status !== 201, describeResult(ssrf)).toBe(true);
    expect(tripwires.hits(), 'site URL on a blocked address must not be contacted').toEqual([]);
    expect(mock.requests.length).toBe(before + 1);

    const created = await createIssueTrackerConnection(ws.admin, {
      siteUrl: mock.baseUrl,
      email: mockAccount.email,
      apiToken: mockAccount.apiToken,
      label: 'E2E tracker',
    });
    expect(created.connection).toMatchObject({
      provider: 'issues',
      service: 'issues',
      label: 'E2E tracker',
      status: 'healthy',
    });
    expect(typeof created.auditId).toBe('string');
    const validation = mock.requests.at(-1)!;
    expect(`${validation.method} ${validation.path}`).toBe('GET /rest/api/3/myself');
    expect(validation.headers.authorization).toBe(mock.expectedAuthorization);

    const down = await createIssueTrackerConnection(ws.admin, {
      siteUrl: mockDown.baseUrl,
      email: mockDownAccount.email,
      apiToken: mockDownAccount.apiToken,
    });

    for (const admin of [ws.admin, patAdmin(ws.admin.base, pat)]) {
      const list = expectStatus(
        await http<{ connections: { id: string }[] }>('GET', `${admin.base}/v1/connections`, {
          headers: admin.headers,
        }),
        200,
      );
      expect(list.body.connections.map((c) => c.id).sort()).toEqual(
        [created.connection.id, down.connection.id].sort(),
      );
      expect(sc.secrets.scanText('GET /v1/connections', list.text)).toEqual([]);
    }
    const otherList = expectStatus(
      await http<{ connections: { id: string }[] }>('GET', `${other.admin.base}/v1/connections`, {
        headers: other.admin.headers,
      }),
      200,
    );
    expect(otherList.body.connections, 'another workspace must not see these connections').toEqual([]);
  });
}
