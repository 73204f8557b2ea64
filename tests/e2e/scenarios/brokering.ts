/**
 * Model B brokering: every data-plane replica injects the connection's credentials, strips the
 * agent's own, and carries the issue tracker's whole API surface.
 */
import { expect, it } from 'vitest';
import {
  describeResult,
  expectStatus,
  type ExecuteRequest,
  type HttpResult,
} from '../../support/api-client.js';
import { newBroker, random, replica, type Scenario } from './setup.js';

export function brokeringScenario(sc: Scenario): void {
  it('brokers calls through every data-plane replica, injecting Basic credentials and stripping the agent’s own', async () => {
    const { mock, mockAccount } = sc.env();
    const b = await newBroker(sc, 'broker');
    for (const [i, dp] of sc.env().dataPlanes.entries()) {
      const before = mock.requests.length;
      const r = await b.call(`myself via replica ${i}`, dp, {
        connectionId: b.connId,
        method: 'GET',
        url: `${mock.baseUrl}/rest/api/3/myself`,
        headers: {
          AuThOrIzAtIoN: `Bearer agent-supplied-${random(8)}`,
          Cookie: `session=agent-cookie-${random(8)}`,
          Host: 'evil.example',
          'X-E2E-Marker': `replica-${i}`,
        },
      });
      expect(r.status, `replica ${i} (${dp}), right after setup, no retry: ${describeResult(r)}`).toBe(200);
      expect(r.body.model).toBe('B');
      expect(r.body.status).toBe(200);
      expect((r.body.body as { emailAddress: string }).emailAddress).toBe(mockAccount.email);
      expect(typeof r.body.auditId).toBe('string');
      expect(mock.requests.length, 'exactly one upstream request per call').toBe(before + 1);
      const up = mock.requests.at(-1)!;
      expect(up.headers.authorization, 'gateway must inject the connection’s Basic credentials').toBe(
        mock.expectedAuthorization,
      );
      expect(up.headers.cookie, 'agent Cookie header must be stripped').toBeUndefined();
      expect(up.headers.host, 'agent Host header must be stripped').toBe(`127.0.0.1:${mock.port}`);
      expect(up.headers['x-e2e-marker'], 'other agent headers pass through').toBe(`replica-${i}`);
      expect(
        sc.secrets.scanText('execute response', r.text),
        'the response must not echo credentials',
      ).toEqual([]);
    }
  });

  it('creates, reads, updates, comments on, transitions, searches and deletes issues across replicas', async () => {
    const { mock } = sc.env();
    const broker = await newBroker(sc, 'issues');
    const a = replica(sc, 0);
    const b = replica(sc, 1);
    const base = `${mock.baseUrl}/rest/api/3`;
    const call = (
      label: string,
      dp: string,
      method: string,
      path: string,
      extra: Partial<ExecuteRequest> = {},
    ) => broker.call(label, dp, { connectionId: broker.connId, method, url: `${base}${path}`, ...extra });
    const ok = <T>(r: HttpResult<T>) => expectStatus(r, 200);

    const summary = `e2e issue ${random(4)}`;
    const created = ok(
      await call('create issue', a, 'POST', '/issue', {
        body: { fields: { project: { key: 'VLT' }, summary, issuetype: { name: 'Task' } } },
      }),
    );
    expect(created.body.status).toBe(201);
    const key = (created.body.body as { key: string }).key;
    expect(mock.issues.get(key)?.fields.summary).toBe(summary);
    expect(mock.requests.at(-1)!.headers['content-type']).toMatch(/application\/json/);

    const invalid = ok(
      await call('create invalid issue', b, 'POST', '/issue', {
        body: { fields: { project: { key: 'VLT' } } },
      }),
    );
    expect(invalid.body.status, 'an upstream 4xx is relayed in the envelope').toBe(400);

    const got = ok(await call('get issue', b, 'GET', `/issue/${key}`));
    expect((got.body.body as { fields: { summary: string } }).fields.summary).toBe(summary);

    ok(
      await call('update issue', a, 'PUT', `/issue/${key}`, {
        body: { fields: { summary: `${summary} (edited)` } },
      }),
    );
    expect(mock.issues.get(key)?.fields.summary).toBe(`${summary} (edited)`);

    const doc = {
      type: 'doc',
      version: 1,
      content: [{ type: 'paragraph', content: [{ type: 'text', text: 'hello from e2e' }] }],
    };
    const comment = ok(
      await call('add comment', b, 'POST', `/issue/${key}/comment`, { body: { body: doc } }),
    );
    expect(comment.body.status).toBe(201);
    const comments = ok(await call('list comments', a, 'GET', `/issue/${key}/comment`));
    expect((comments.body.body as { comments: { body: unknown }[] }).comments.map((c) => c.body)).toEqual([
      doc,
    ]);

    const transitions = ok(await call('list transitions', b, 'GET', `/issue/${key}/transitions`));
    const done = (transitions.body.body as { transitions: { id: string; name: string }[] }).transitions.find(
      (t) => t.name === 'Done',
    );
    expect(done).toBeDefined();
    const moved = ok(
      await call('transition issue', a, 'POST', `/issue/${key}/transitions`, {
        body: { transition: { id: done!.id } },
      }),
    );
    expect(moved.body.status).toBe(204);
    expect(mock.issues.get(key)?.fields.status.name).toBe('Done');

    const jql = 'project = VLT AND summary ~ "e2e & co/ä"';
    const search = ok(await call('search', a, 'GET', '/search', { query: { jql } }));
    expect(mock.requests.at(-1)!.query.jql, 'JQL must reach the site URL-encoded and intact').toBe(jql);
    expect((search.body.body as { total: number }).total).toBe(1);

    const del = ok(await call('delete issue', b, 'DELETE', `/issue/${key}`));
    expect(del.body.status).toBe(204);
    expect(mock.issues.has(key)).toBe(false);
    const gone = ok(await call('get deleted issue', a, 'GET', `/issue/${key}`));
    expect(gone.body.status).toBe(404);
  });
}
