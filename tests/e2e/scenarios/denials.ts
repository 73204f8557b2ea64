/**
 * What the gateway refuses: calls outside the allowlist, loopback aliases and redirects
 * towards blocked addresses (SSRF), unknown connections, bad or foreign tokens, disabled
 * agents — and what it answers when the site is down.
 */
import { randomUUID } from 'node:crypto';
import { expect, it, onTestFinished } from 'vitest';
import {
  createPat,
  describeResult,
  execute,
  expectStatus,
  http,
  putAllowlists,
  signAssertion,
  tokenRequest,
  type ExecuteRequest,
} from '../../support/api-client.js';
import {
  bind,
  connect,
  enrol,
  newBroker,
  newWorkspace,
  random,
  replica,
  staleness,
  trackerAllowlist,
  type Scenario,
} from './setup.js';

export function denialsScenario(sc: Scenario): void {
  it('denies requests outside the allowlist with 403 without contacting any upstream', async () => {
    const { mock, mockDown } = sc.env();
    const b = await newBroker(sc, 'denials');
    const edge = await enrol(sc, b.ws.admin, 'denials-edge');
    // Left at the spec defaults (read-only): the edge-case agent also proves writes are refused.
    await bind(b.ws.admin, edge.agent.id, b.connId, trackerAllowlist(mock), { allowedModels: ['B'] });
    const before = { mock: mock.requests.length, down: mockDown.requests.length };
    const cases: [string, string, string][] = [
      ['path outside the patterns', 'GET', `${mock.baseUrl}/rest/api/3/project`],
      ['other API version', 'GET', `${mock.baseUrl}/rest/api/2/myself`],
      [
        'dot segments escaping an allowed prefix',
        'GET',
        `${mock.baseUrl}/rest/api/3/issue/../../2/serverInfo`,
      ],
      ['encoded dot segments', 'GET', `${mock.baseUrl}/rest/api/3/issue/%2e%2e/%2E%2E/2/serverInfo`],
      ['method not allowed', 'PATCH', `${mock.baseUrl}/rest/api/3/issue/VLT-1`],
      ['other host name for the same address', 'GET', `https://localhost:${mock.port}/rest/api/3/myself`],
      // A real site with its own account: the first connection's credentials must never go there.
      ['other port (another live site)', 'GET', `${mockDown.baseUrl}/rest/api/3/myself`],
    ];
    for (const [i, [why, method, url]] of cases.entries()) {
      const r = await b.call(`denied: ${why}`, replica(sc, i), { connectionId: b.connId, method, url });
      expect(r.status, `${why}: ${describeResult(r)}`).toBe(403);
      expect(typeof r.body.error).toBe('string');
    }

    // Refused either at validation (400) or by the allowlist (403); which one is the gateway's choice.
    const either: [string, string][] = [
      ['credentials embedded in the URL', `https://e2e:pw@127.0.0.1:${mock.port}/rest/api/3/myself`],
      ['plain http', `http://127.0.0.1:${mock.port}/rest/api/3/myself`],
    ];
    for (const [i, [why, url]] of either.entries()) {
      const r = await execute(replica(sc, i), edge.token, { connectionId: b.connId, method: 'GET', url });
      expect([400, 403], `${why}: ${describeResult(r)}`).toContain(r.status);
    }
    const invalid: [string, ExecuteRequest][] = [
      ['no method', { connectionId: b.connId, url: `${mock.baseUrl}/rest/api/3/myself`, method: undefined }],
      [
        'unknown method',
        { connectionId: b.connId, method: 'TRACE', url: `${mock.baseUrl}/rest/api/3/myself` },
      ],
      ['no url', { connectionId: b.connId, method: 'GET' }],
      ['not a URL', { connectionId: b.connId, method: 'GET', url: 'not a url' }],
      [
        'unknown model',
        { model: 'Z', connectionId: b.connId, method: 'GET', url: `${mock.baseUrl}/rest/api/3/myself` },
      ],
      ['neither connectionId nor service', { method: 'GET', url: `${mock.baseUrl}/rest/api/3/myself` }],
    ];
    for (const [i, [why, req]] of invalid.entries()) {
      const r = await execute(replica(sc, i), edge.token, req);
      expect(r.status, `invalid request (${why}): ${describeResult(r)}`).toBe(400);
    }
    // The edge agent's policy is read-only (the spec default): an allowlisted write is still refused.
    const write = await execute(replica(sc, 0), edge.token, {
      connectionId: b.connId,
      method: 'POST',
      url: `${mock.baseUrl}/rest/api/3/issue`,
      body: { fields: { project: { key: 'VLT' }, summary: 'must not exist', issuetype: { name: 'Task' } } },
    });
    expect(write.status, `write under a read-only policy: ${describeResult(write)}`).toBe(403);
    expect(
      mock.requests.slice(before.mock).map((r) => `${r.method} ${r.rawPath}`),
      'the site must not be contacted',
    ).toEqual([]);
    expect(mockDown.requests.length, 'the other site must not be contacted').toBe(before.down);
  });

  it('refuses loopback aliases outside VLT_SSRF_ALLOW_CIDRS even when the allowlist admits them', async () => {
    const { mock, tripwires } = sc.env();
    const b = await newBroker(sc, 'ssrf');
    const t4 = tripwires.v4.port;
    const t6 = tripwires.v6.port;
    const aliases: [string, string][] = [
      ['127.0.0.2', tripwires.v4.origin],
      ['[::1]', tripwires.v6.origin],
      ['IPv4-mapped IPv6', `https://[::ffff:127.0.0.2]:${t4}`],
      ['decimal integer host', `https://2130706434:${t4}`],
      ['hex first octet', `https://0x7f.0.0.2:${t4}`],
      ['octal first octet', `https://0177.0.0.2:${t4}`],
      ['uncompressed ::1', `https://[0:0:0:0:0:0:0:1]:${t6}`],
      ['IPv6 unspecified', `https://[::]:${t6}`],
      // 0.0.0.0 reaches local listeners; on the mock's port it would land on the real site.
      ['0.0.0.0', `https://0.0.0.0:${mock.port}`],
    ];
    const allowlist = [
      ...trackerAllowlist(mock),
      { baseUrl: mock.baseUrl, methods: ['GET'], pathPatterns: ['/rest/api/3/project'] },
      ...aliases.map(([, origin]) => ({ baseUrl: origin, methods: ['GET'], pathPatterns: ['/*'] })),
    ];
    const put = await putAllowlists(b.ws.admin, b.policyId, allowlist);
    expect(
      put.status,
      `allowlist naming loopback aliases must be storable (SSRF is checked at execution): ${describeResult(put)}`,
    ).toBe(200);

    // The new entry must already be live on every replica: no waiting, no retry.
    for (const [i, dp] of sc.env().dataPlanes.entries()) {
      const probe = () =>
        b.call(`newly allowed path via replica ${i}`, dp, {
          connectionId: b.connId,
          method: 'GET',
          url: `${mock.baseUrl}/rest/api/3/project`,
        });
      const r = await probe();
      const lag = r.status === 200 ? '' : await staleness(probe, 200);
      expect(r.status, `replica ${i} right after PUT allowlists: ${describeResult(r)}; ${lag}`).toBe(200);
      expect(r.body.status).toBe(200);
    }

    const before = mock.requests.length;
    for (const [i, [why, origin]] of aliases.entries()) {
      const r = await b.call(`ssrf: ${why}`, replica(sc, i), {
        connectionId: b.connId,
        method: 'GET',
        url: `${origin}/rest/api/3/myself`,
      });
      expect(r.status, `SSRF via ${why} (${origin}): ${describeResult(r)}`).toBe(403);
      expect(tripwires.hits(), `SSRF via ${why} reached a tripwire`).toEqual([]);
    }
    expect(mock.requests.length, 'no alias may land on the real site either').toBe(before);

    // A redirect from an allowed site towards a blocked address must not be followed.
    mock.respondOnce({ status: 302, headers: { location: `${tripwires.v4.origin}/rest/api/3/myself` } });
    const redirected = await b.call('redirect to a blocked address', replica(sc, 0), {
      connectionId: b.connId,
      method: 'GET',
      url: `${mock.baseUrl}/rest/api/3/myself`,
    });
    expect([200, 403, 502], describeResult(redirected)).toContain(redirected.status);
    if (redirected.status === 200)
      expect(redirected.body.status, 'redirect must be relayed, not followed').toBe(302);
    expect(mock.requests.length).toBe(before + 1);
    expect(tripwires.hits(), 'redirect was followed to a blocked address').toEqual([]);
  });

  it('answers 502 when the site is down, 404 for unknown connections, 401 for bad tokens, and refuses other agents', async () => {
    const env = sc.env();
    const { mock } = env;
    const b = await newBroker(sc, 'faults');
    // A site of its own: this scenario takes it down.
    const { site: mockDown, account: downAccount } = await env.startSite();
    // Closed below on purpose; this covers a failure before that point.
    onTestFinished(() => mockDown.close());
    const connDownId = await connect(sc, b.ws.admin, { site: mockDown, account: downAccount });
    await bind(b.ws.admin, b.main.id, connDownId, [
      { baseUrl: mockDown.baseUrl, methods: ['GET'], pathPatterns: ['/rest/api/3/*'] },
    ]);
    const unbound = await enrol(sc, b.ws.admin, 'faults-no-policy');
    const other = await newWorkspace(sc, 'faults-other');
    const foreigner = await enrol(sc, other.admin, 'faults-foreign');
    const patToken = (await createPat(b.ws.admin, 'e2e')).plainToken;
    sc.secrets.add('PAT (faults)', patToken, 'vltp_');
    const downUrl = `${mockDown.baseUrl}/rest/api/3/myself`;

    const up = await b.call('second site while up', replica(sc, 0), {
      connectionId: connDownId,
      method: 'GET',
      url: downUrl,
    });
    expect(up.status, describeResult(up)).toBe(200);
    expect(up.body.status).toBe(200);
    expect(mockDown.requests.at(-1)!.headers.authorization).toBe(mockDown.expectedAuthorization);
    await mockDown.close();
    const down = await b.call('second site down', replica(sc, 1), {
      connectionId: connDownId,
      method: 'GET',
      url: downUrl,
    });
    expect(down.status, `upstream unreachable: ${describeResult(down)}`).toBe(502);
    expect(typeof down.body.error).toBe('string');

    const before = mock.requests.length;
    const myself = { method: 'GET', url: `${mock.baseUrl}/rest/api/3/myself` };
    const unknown = await execute(replica(sc, 0), b.token, { connectionId: randomUUID(), ...myself });
    expect(unknown.status, `unknown connection: ${describeResult(unknown)}`).toBe(404);

    const badTokens: [string, string | undefined][] = [
      ['no Authorization header', undefined],
      ['unknown vltt_ token', `vltt_${random(24)}`],
      ['random bearer', random(24)],
    ];
    for (const dp of sc.env().dataPlanes) {
      for (const [why, token] of badTokens) {
        const r = await execute(dp, token, { connectionId: b.connId, ...myself });
        expect(r.status, `${why} on ${dp}: ${describeResult(r)}`).toBe(401);
      }
      // Admin credentials are not agent credentials.
      const jwt = await execute(dp, b.ws.jwt, { connectionId: b.connId, ...myself });
      expect([401, 403], `API JWT used as agent token: ${describeResult(jwt)}`).toContain(jwt.status);
      const pat = await http('POST', `${dp}/v1/vault/execute`, {
        headers: { 'x-api-key': patToken },
        json: { model: 'B', connectionId: b.connId, ...myself },
      });
      expect([401, 403], `PAT used on the agent route: ${describeResult(pat)}`).toContain(pat.status);

      const noPolicy = await execute(dp, unbound.token, { connectionId: b.connId, ...myself });
      expect([403, 404], `agent without a policy: ${describeResult(noPolicy)}`).toContain(noPolicy.status);
      const foreign = await execute(dp, foreigner.token, { connectionId: b.connId, ...myself });
      expect([403, 404], `agent of another workspace: ${describeResult(foreign)}`).toContain(foreign.status);
    }
    expect(mock.requests.length, 'none of these may reach the site').toBe(before);

    // Disabling an agent revokes its tokens everywhere at once.
    const disabled = expectStatus(
      await http<{ success: boolean; tokensRevoked: number }>(
        'POST',
        `${b.ws.admin.base}/v1/agents/${unbound.agent.id}/disable`,
        {
          headers: b.ws.admin.headers,
        },
      ),
      200,
    );
    expect(disabled.body.success).toBe(true);
    expect(disabled.body.tokensRevoked).toBeGreaterThanOrEqual(1);
    for (const [i, dp] of sc.env().dataPlanes.entries()) {
      const probe = () => execute(dp, unbound.token, { connectionId: b.connId, ...myself });
      const r = await probe();
      const lag = r.status === 401 ? '' : await staleness(probe, 401);
      expect(
        r.status,
        `disabled agent's token on replica ${i}, immediately after disable: ${describeResult(r)}; ${lag}`,
      ).toBe(401);
    }
    const relogin = await tokenRequest(
      env.controlPlane,
      await signAssertion(unbound.agent, { audience: env.publicBaseUrl }),
    );
    expect(relogin.status, `token exchange for a disabled agent: ${describeResult(relogin)}`).toBe(401);
  });
}
