/**
 * Prometheus metrics (VLT_METRICS_PORT): request rate, latency and errors per route template,
 * decisions by outcome, the outbox depth — on a listener of their own, never on the public
 * port, and never carrying an id, a query value or a secret.
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

beforeAll(async () => {
  pki = await createTestPki();
  mock = await startMockIssueTracker({ ...creds, tls: { key: pki.key, cert: pki.cert } });
  gw = await startInProcessGateway(
    { VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32', VLT_METRICS_PORT: '0' },
    { upstreamCa: [pki.caPem] },
  );
  const { user } = await signUp(
    gw.baseUrl,
    `owner-${randomBytes(4).toString('hex')}@metrics.test`,
    'correct horse battery',
  );
  admin = bearerAdmin(gw.baseUrl, (await apiJwt(gw.baseUrl, user.session)).token);
});
afterAll(async () => {
  await gw?.close();
  await mock?.close();
  await pki?.dispose();
});

/** The value of one sample line, e.g. `vlt_decisions_total{action="x",decision="y",...}`. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const inside = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}'));
    if (Object.entries(labels).every(([k, v]) => inside.includes(`${k}="${v}"`))) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return undefined;
}

describe('metrics', () => {
  it('count requests per route template and decisions by outcome, on their own port only', async () => {
    const { agent, token } = await enrolAgent(admin, gw.baseUrl, `agent-${randomBytes(3).toString('hex')}`);
    const conn = await createIssueTrackerConnection(admin, { siteUrl: mock.baseUrl, ...creds });
    await createPolicy(admin, agent.id, conn.connection.id, { allowedModels: ['B'] });
    const ok = await execute(gw.baseUrl, token, {
      connectionId: conn.connection.id,
      method: 'GET',
      url: `${mock.baseUrl}/rest/api/3/myself?apikey=QUERYSECRET`,
    });
    expect(ok.status).toBe(200);
    const denied = await execute(gw.baseUrl, token, {
      connectionId: conn.connection.id,
      method: 'GET',
      url: `${mock.baseUrl}/admin`,
    });
    expect(denied.status).toBe(403);
    expect(
      (await http('GET', `${gw.baseUrl}/v1/agents/${agent.id}`, { headers: admin.headers })).status,
    ).toBe(200);

    // Not on the public port: the edge forwards every path of it to a service.
    expect((await http('GET', `${gw.baseUrl}/metrics`)).status).toBe(404);
    expect(gw.metricsUrl).toBeDefined();
    const scraped = await http<string>('GET', gw.metricsUrl!);
    expect(scraped.status).toBe(200);
    expect(String(scraped.headers['content-type'])).toContain('text/plain');
    const text = scraped.text;

    const executeCalls = { method: 'POST', route: '/v1/vault/execute' };
    expect(sample(text, 'vlt_http_request_duration_seconds_count', { ...executeCalls, status: '2xx' })).toBe(
      1,
    );
    expect(sample(text, 'vlt_http_request_duration_seconds_count', { ...executeCalls, status: '4xx' })).toBe(
      1,
    );
    expect(
      sample(text, 'vlt_http_request_duration_seconds_count', { method: 'GET', route: '/v1/agents/:id' }),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'vlt_decisions_total', { action: 'execution_completed', decision: 'allowed' })).toBe(
      1,
    );
    expect(sample(text, 'vlt_decisions_total', { action: 'execution_denied', decision: 'denied' })).toBe(1);
    expect(sample(text, 'vlt_outbox_pending', {})).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'vlt_audit_consumer_pending', {})).toBeGreaterThanOrEqual(0);
    expect(text).toContain('process_cpu_seconds_total');

    // Route templates only: no id, query value, token or credential in any label.
    for (const secret of [agent.id, 'QUERYSECRET', token, creds.apiToken, '/rest/api/3/myself']) {
      expect(text).not.toContain(secret);
    }
    expect((await http('GET', gw.metricsUrl!.replace('/metrics', '/other'))).status).toBe(404);
  });
});
