/**
 * An in-process gateway in front of a mock issue-tracker site served over HTTPS by the test's
 * own handler, with a signed-up admin and one connection to the site. `bind` enrols an agent
 * and binds it to that connection with an allowlist and rules. Used by the tests that attack
 * the request and response path as a provider and as an agent.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createIssueTrackerConnection,
  createPolicy,
  enrolAgent,
  http,
  putAllowlists,
  signUp,
  type Admin,
  type PolicySettings,
} from './api-client.js';
import { startInProcessGateway, type InProcessGateway } from './in-process-gateway.js';
import { createTestPki, type TestPki } from './test-pki.js';
import { realServices } from './services.js';

export interface Binding {
  agentId: string;
  token: string;
  policyId: string;
}

export interface ProviderGateway {
  gw: InProcessGateway;
  admin: Admin;
  /** `https://127.0.0.1:<port>`: the mock site. */
  site: string;
  /** The credential the connection holds (what must never come back). */
  creds: { email: string; apiToken: string };
  connectionId: string;
  bind(
    rules: { request?: unknown[]; response?: unknown[] },
    settings?: PolicySettings & { methods?: string[] },
  ): Promise<Binding>;
  close(): Promise<void>;
}

/**
 * The connection check (`GET /rest/api/3/myself`) is answered here; every other request goes
 * to `handler`.
 */
export async function startProviderGateway(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  env: Record<string, string> = {},
  creds = { email: 'bot@tracker.test', apiToken: `tok-${randomBytes(12).toString('hex')}` },
  /**
   * `embedded`: PGlite and the in-process bus, as `make start` runs. `services`: the run's
   * PostgreSQL and NATS JetStream (each when present), as the split shape uses them.
   */
  shape: 'embedded' | 'services' = 'services',
): Promise<ProviderGateway> {
  const pki: TestPki = await createTestPki();
  const upstream = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    if (req.url === '/rest/api/3/myself') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"accountId":"a1","displayName":"Bot"}');
      return;
    }
    handler(req, res);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const site = `https://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const bus: Record<string, string> =
    shape === 'services' && realServices.hasNats() ? { NATS_URL: realServices.natsUrl() } : {};
  const gw = await startInProcessGateway(
    { VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32', ...bus, ...env },
    { upstreamCa: [pki.caPem] },
    { embeddedDatabase: shape === 'embedded' },
  );
  const email = `gw-${randomBytes(4).toString('hex')}@gw.test`;
  const { user } = await signUp(gw.baseUrl, email, 'correct horse battery');
  const admin = bearerAdmin(gw.baseUrl, (await apiJwt(gw.baseUrl, user.session)).token);
  const connectionId = (await createIssueTrackerConnection(admin, { siteUrl: site, ...creds })).connection.id;

  return {
    gw,
    admin,
    site,
    creds,
    connectionId,
    async bind(rules, settings = { allowedModels: ['B'] }) {
      const { methods = ['GET'], ...policySettings } = settings;
      const name = `agent-${randomBytes(3).toString('hex')}`;
      const { agent, token } = await enrolAgent(admin, gw.baseUrl, name);
      const { policy } = await createPolicy(admin, agent.id, connectionId, policySettings);
      const allow = await putAllowlists(admin, policy.id, [
        { baseUrl: site, methods, pathPatterns: ['/rest/api/3/*'] },
      ]);
      expect(allow.status, allow.text).toBe(200);
      const r = await http('PUT', `${gw.baseUrl}/v1/policies/${policy.id}/rules`, {
        headers: admin.headers,
        json: { rules: { request: rules.request ?? [], response: rules.response ?? [] } },
      });
      expect(r.status, r.text).toBe(200);
      return { agentId: agent.id, token, policyId: policy.id };
    },
    async close() {
      await gw.close();
      upstream.closeAllConnections();
      await new Promise((r) => upstream.close(r));
      await pki.dispose();
    },
  };
}
