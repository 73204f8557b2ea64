/**
 * Regression tests for the control-plane classes of the gateway's security review (class 12):
 * text the database cannot store is refused with 400 on every route, and concurrent writes
 * all succeed — on the embedded database the all-in-one defaults to, and on PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiJwt, bearerAdmin, http, signUp, type Admin } from '../support/api-client.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';
import { realServices } from '../support/services.js';

const SHAPES = [
  { name: 'embedded database', embedded: true, skip: false },
  { name: 'PostgreSQL', embedded: false, skip: !realServices.hasPostgres() },
];

for (const shape of SHAPES) {
  describe.skipIf(shape.skip)(`control plane on the ${shape.name}`, () => {
    let gw: InProcessGateway;
    let admin: Admin;

    beforeAll(async () => {
      gw = await startInProcessGateway({}, {}, { embeddedDatabase: shape.embedded });
      const { user } = await signUp(
        gw.baseUrl,
        `cp-${randomBytes(4).toString('hex')}@gw.test`,
        'correct horse battery',
      );
      admin = bearerAdmin(gw.baseUrl, (await apiJwt(gw.baseUrl, user.session)).token);
    }, 60_000);
    afterAll(async () => {
      await gw?.close();
    });

    it('regression: NUL and lone surrogates in stored text are a 400, never a 500', async () => {
      const cases: Array<[string, string, unknown]> = [
        ['POST', '/v1/agents', { name: 'agent \u0000 name' }],
        ['POST', '/v1/agents', { name: 'agent \ud800 name' }],
        ['POST', '/v1/agents', { name: 'ok', description: 'tail \udfff' }],
        ['POST', '/api/auth/sign-up', { email: 'n\u0000@x.test', password: 'correct horse battery' }],
        [
          'PUT',
          '/v1/policies/00000000-0000-4000-8000-000000000000/rules',
          {
            rules: { request: [{ label: 'l\u0000', match: {}, action: 'deny' }], response: [] },
          },
        ],
        [
          'PUT',
          '/v1/policies/00000000-0000-4000-8000-000000000000/rules',
          {
            rules: {
              request: [
                { label: 'l', match: { body: [{ path: 'a', op: 'eq', value: 'v\u0000' }] }, action: 'deny' },
              ],
              response: [],
            },
          },
        ],
      ];
      for (const [method, path, json] of cases) {
        const r = await http(method, `${gw.baseUrl}${path}`, { headers: admin.headers, json });
        expect(r.status, `${method} ${path}: ${r.text}`).toBe(400);
        expect((r.body as { error: string }).error).toMatch(/NUL or an unpaired surrogate/);
      }
      const q = await http('GET', `${gw.baseUrl}/v1/audit?action=${encodeURIComponent('x\u0000')}`, {
        headers: admin.headers,
      });
      expect(q.status).toBe(400);
    });

    it('regression: 30 concurrent agent creations all succeed', async () => {
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          http('POST', `${gw.baseUrl}/v1/agents`, { headers: admin.headers, json: { name: `burst-${i}` } }),
        ),
      );
      expect(results.map((r) => `${r.status} ${r.status === 201 ? '' : r.text}`.trim())).toEqual(
        Array(30).fill('201'),
      );
      const list = await http<{ agents: { name: string }[] }>('GET', `${gw.baseUrl}/v1/agents`, {
        headers: admin.headers,
      });
      expect(list.body.agents.filter((a) => a.name.startsWith('burst-'))).toHaveLength(30);
    });
  });
}
