/**
 * The audit trail of execution: exactly one execution_requested and one terminal row per call,
 * each response naming its terminal row, pagination, workspace isolation, and the CSV and JSON
 * exports.
 */
import { expect, it, onTestFinished } from 'vitest';
import {
  auditAll,
  auditPage,
  countByAction,
  describeResult,
  execute,
  expectStatus,
  http,
  pollAudit,
  putAllowlists,
  type AuditEvent,
} from '../../support/api-client.js';
import { parseCsv } from '../../support/csv.js';
import {
  bind,
  connect,
  enrol,
  newWorkspace,
  newBroker,
  replica,
  trackerAllowlist,
  type Broker,
  type LedgerEntry,
  type Scenario,
} from './setup.js';

/** The columns the spec fixes for the CSV export, in order. */
const CSV_COLUMNS = [
  'audit_id',
  'timestamp',
  'actor',
  'agent_id',
  'connection_id',
  'action',
  'decision',
  'metadata',
];

/** Terminal audit action implied by the gateway's answer; other statuses write no execution rows we count. */
function terminalAction(status: number): string | undefined {
  return { 200: 'execution_completed', 403: 'execution_denied', 502: 'execution_error' }[status];
}

/**
 * A mix of outcomes through every replica, of the kinds the other scenarios produce: completed
 * reads and writes (an upstream 404 relayed is still a completed call), allowlist denials, SSRF
 * refusals after the allowlist admits loopback aliases, a redirect towards a blocked address, and
 * provider errors on a second connection whose site is then taken down.
 */
async function makeCalls(sc: Scenario, b: Broker): Promise<LedgerEntry[]> {
  const { mock, tripwires } = sc.env();
  const api = `${mock.baseUrl}/rest/api/3`;
  for (let i = 0; i < 12; i++) {
    const r = await b.call(`myself ${i}`, replica(sc, i), {
      connectionId: b.connId,
      method: 'GET',
      url: `${api}/myself`,
    });
    expect(r.status, describeResult(r)).toBe(200);
  }
  // Writes to an issue that does not exist: allowed, relayed, and nothing changes on the site.
  for (const [i, method] of ['PUT', 'DELETE'].entries()) {
    const r = await b.call(`${method} missing issue`, replica(sc, i), {
      connectionId: b.connId,
      method,
      url: `${api}/issue/VLT-0`,
      ...(method === 'PUT' ? { body: { fields: { summary: 'never stored' } } } : {}),
    });
    expect(r.status, describeResult(r)).toBe(200);
    expect(r.body.status).toBe(404);
  }
  const outside = [
    `${api}/project`,
    `${mock.baseUrl}/rest/api/2/myself`,
    `${api}/serverInfo`,
    `${api}/issue/../../2/serverInfo`,
  ];
  for (const [i, url] of outside.entries()) {
    const r = await b.call(`denied ${url}`, replica(sc, i), { connectionId: b.connId, method: 'GET', url });
    expect(r.status, describeResult(r)).toBe(403);
  }
  // Refused at execution (SSRF), not by the allowlist: a different place that writes the row.
  const aliases = [tripwires.v4.origin, tripwires.v6.origin];
  expectStatus(
    await putAllowlists(b.ws.admin, b.policyId, [
      ...trackerAllowlist(mock),
      ...aliases.map((origin) => ({ baseUrl: origin, methods: ['GET'], pathPatterns: ['/*'] })),
    ]),
    200,
  );
  for (const [i, origin] of aliases.entries()) {
    const r = await b.call(`ssrf ${origin}`, replica(sc, i), {
      connectionId: b.connId,
      method: 'GET',
      url: `${origin}/rest/api/3/myself`,
    });
    expect(r.status, describeResult(r)).toBe(403);
  }
  const before = mock.requests.length;
  mock.respondOnce({ status: 302, headers: { location: `${tripwires.v4.origin}/rest/api/3/myself` } });
  const redirected = await b.call('redirect to a blocked address', replica(sc, 0), {
    connectionId: b.connId,
    method: 'GET',
    url: `${api}/myself`,
  });
  expect([200, 403, 502], describeResult(redirected)).toContain(redirected.status);
  expect(mock.requests.length).toBe(before + 1);
  expect(tripwires.hits(), 'a blocked address was contacted').toEqual([]);

  const { site, account } = await sc.env().startSite();
  // Closed below on purpose; this covers a failure before that point.
  onTestFinished(() => site.close());
  const downId = await connect(sc, b.ws.admin, { site, account });
  await bind(b.ws.admin, b.main.id, downId, [
    { baseUrl: site.baseUrl, methods: ['GET'], pathPatterns: ['/rest/api/3/*'] },
  ]);
  const url = `${site.baseUrl}/rest/api/3/myself`;
  const up = await b.call('second site up', replica(sc, 0), { connectionId: downId, method: 'GET', url });
  expect(up.status, describeResult(up)).toBe(200);
  await site.close();
  for (let i = 0; i < 6; i++) {
    const r = await b.call(`second site down ${i}`, replica(sc, i), {
      connectionId: downId,
      method: 'GET',
      url,
    });
    expect(r.status, describeResult(r)).toBe(502);
  }
  return b.ledger;
}

export function auditScenario(sc: Scenario): void {
  it('records exactly one execution_requested and one terminal row per call, with the right decision', async () => {
    const { mock } = sc.env();
    const b = await newBroker(sc, 'audit');
    const other = await newWorkspace(sc, 'audit-other');
    const ledger = await makeCalls(sc, b);
    // Agents whose calls never execute: one read-only, one without a policy.
    const edge = await enrol(sc, b.ws.admin, 'audit-edge');
    await bind(b.ws.admin, edge.agent.id, b.connId, trackerAllowlist(mock), { allowedModels: ['B'] });
    const noPolicy = await enrol(sc, b.ws.admin, 'audit-no-policy');
    const write = {
      connectionId: b.connId,
      method: 'POST',
      url: `${mock.baseUrl}/rest/api/3/issue`,
      body: {},
    };
    expect((await execute(replica(sc, 0), edge.token, write)).status).toBe(403);
    expect([403, 404]).toContain((await execute(replica(sc, 1), noPolicy.token, write)).status);

    const counted = ledger.filter((e) => terminalAction(e.status));
    expect(counted.length, 'the calls above count').toBeGreaterThan(20);
    const expected = new Map<string, Record<string, number>>();
    for (const e of counted) {
      const c = expected.get(e.connectionId) ?? {};
      c.execution_requested = (c.execution_requested ?? 0) + 1;
      const t = terminalAction(e.status)!;
      c[t] = (c[t] ?? 0) + 1;
      expected.set(e.connectionId, c);
    }
    const execRows = (events: AuditEvent[]) => events.filter((e) => e.action.startsWith('execution_'));
    const byConnection = (events: AuditEvent[]) => {
      const m = new Map<string, Record<string, number>>();
      for (const [conn] of expected)
        m.set(conn, countByAction(execRows(events).filter((e) => e.connectionId === conn)));
      return m;
    };
    // Terminal rows are published after their call's execution_requested, so once every terminal
    // row is there, anything still missing is missing for good.
    const enough = (events: AuditEvent[]) =>
      [...byConnection(events)].every(([conn, got]) =>
        Object.entries(expected.get(conn)!).every(
          ([action, n]) => action === 'execution_requested' || (got[action] ?? 0) >= n,
        ),
      );
    const events = await pollAudit(b.ws.admin, { agentId: b.main.id }, enough, 30_000);
    // Late duplicates would arrive after the first complete read; look once more.
    await new Promise((r) => setTimeout(r, 500));
    const final = await auditAll(b.ws.admin, { agentId: b.main.id });
    expect(final.length).toBeGreaterThanOrEqual(events.length);
    // Soft, so the per-row checks below still report when the counts are off.
    expect
      .soft(Object.fromEntries(byConnection(final)), 'execution rows per connection')
      .toEqual(Object.fromEntries(expected));

    for (const e of execRows(final)) {
      expect(e.agentId).toBe(b.main.id);
      expect(expected.has(e.connectionId!), `row for an unexpected connection: ${JSON.stringify(e)}`).toBe(
        true,
      );
      if (e.action === 'execution_completed') expect(e.decision, JSON.stringify(e)).toBe('allowed');
      if (e.action === 'execution_denied') expect(e.decision, JSON.stringify(e)).toBe('denied');
    }
    const ids = final.map((e) => e.auditId);
    expect(new Set(ids).size, 'auditIds are unique').toBe(ids.length);
    for (const call of counted.filter((c) => c.auditId)) {
      const rows = final.filter((e) => e.auditId === call.auditId);
      expect(
        rows.length,
        `response auditId of "${call.label}" (${call.status}) must match exactly one row`,
      ).toBe(1);
      // The response's auditId names the call's terminal row (docs/decisions/0004).
      expect(rows[0]!.action, `row named by the response of "${call.label}"`).toBe(
        terminalAction(call.status),
      );
      expect(rows[0]!.connectionId).toBe(call.connectionId);
    }

    // Pairing: every execution_requested row is closed by exactly one terminal row pointing at it.
    const requested = execRows(final).filter((e) => e.action === 'execution_requested');
    const terminals = execRows(final).filter((e) => e.action !== 'execution_requested');
    for (const r of requested) {
      const closing = terminals.filter((t) => t.metadata.requestAuditId === r.auditId);
      expect(closing.length, `terminal rows for execution_requested ${r.auditId}`).toBe(1);
    }
    // Agents whose calls never executed have no completed rows.
    for (const agent of [edge.agent, noPolicy.agent]) {
      const rows = await auditAll(b.ws.admin, { agentId: agent.id, action: 'execution_completed' });
      expect(rows, `${agent.name} never executed`).toEqual([]);
    }

    // Pagination walks the same rows, newest first, without overlap.
    const walked: AuditEvent[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 500; page++) {
      const r = expectStatus(await auditPage(b.ws.admin, { agentId: b.main.id, limit: 7, cursor }), 200);
      expect(r.body.events.length).toBeLessThanOrEqual(7);
      walked.push(...r.body.events);
      if (!r.body.nextCursor) break;
      cursor = r.body.nextCursor;
    }
    expect(walked.map((e) => e.id)).toEqual(final.map((e) => e.id));
    const times = walked.map((e) => Date.parse(e.timestamp));
    expect(
      times.every((t, i) => i === 0 || t <= times[i - 1]!),
      'newest first',
    ).toBe(true);

    const denied = await auditAll(b.ws.admin, { agentId: b.main.id, action: 'execution_denied' });
    expect(denied.length).toBe(expected.get(b.connId)?.execution_denied ?? 0);
    expect(denied.every((e) => e.action === 'execution_denied')).toBe(true);

    const big = await auditPage(b.ws.admin, { limit: 201 });
    expect([200, 400], describeResult(big)).toContain(big.status);
    if (big.status === 200) expect(big.body.events.length).toBeLessThanOrEqual(200);

    const foreignView = expectStatus(await auditPage(other.admin, { agentId: b.main.id }), 200);
    expect(foreignView.body.events, 'another workspace must not see these events').toEqual([]);
    expect(sc.secrets.scanText('audit events', JSON.stringify(final))).toEqual([]);
  }, 90_000);

  it('exports the audit log as CSV in the spec’s column order and as JSON, with the same rows', async () => {
    const b = await newBroker(sc, 'export');
    const calls = (await makeCalls(sc, b)).filter((e) => terminalAction(e.status)).length;
    const admin = b.ws.admin;
    // Each counted call leaves an execution_requested and a terminal row.
    const listed = await pollAudit(
      admin,
      { agentId: b.main.id },
      (e) => e.filter((x) => x.action.startsWith('execution_')).length >= 2 * calls,
    );
    const json = expectStatus(
      await http('GET', `${admin.base}/v1/audit/export?format=json&agentId=${b.main.id}`, {
        headers: admin.headers,
      }),
      200,
    );
    const jsonText = json.text;
    const parsed = JSON.parse(jsonText) as AuditEvent[] | { events: AuditEvent[] };
    const jsonEvents = Array.isArray(parsed) ? parsed : parsed.events;
    expect(jsonEvents.map((e) => e.auditId).sort()).toEqual(listed.map((e) => e.auditId).sort());

    const csv = expectStatus(
      await http('GET', `${admin.base}/v1/audit/export?format=csv&agentId=${b.main.id}`, {
        headers: admin.headers,
      }),
      200,
    );
    expect(String(csv.headers['content-type'])).toMatch(/text\/csv/);
    expect(String(csv.headers['content-disposition'] ?? ''), 'a downloadable file').toMatch(/attachment/i);
    const rows = parseCsv(csv.text).filter((r) => r.length > 1 || r[0] !== '');
    expect(rows[0]).toEqual(CSV_COLUMNS);
    const body = rows.slice(1);
    expect(
      body.every((r) => r.length === CSV_COLUMNS.length),
      'every row has 8 fields',
    ).toBe(true);
    expect(body.map((r) => r[0]).sort()).toEqual(listed.map((e) => e.auditId).sort());
    for (const r of body) {
      const e = listed.find((x) => x.auditId === r[0])!;
      expect(r.slice(3, 7)).toEqual([e.agentId ?? '', e.connectionId ?? '', e.action, e.decision]);
      expect(() => JSON.parse(r[7]!), 'metadata column is JSON').not.toThrow();
    }
    expect(sc.secrets.scanText('CSV export', csv.text)).toEqual([]);
    expect(sc.secrets.scanText('JSON export', jsonText)).toEqual([]);
  }, 90_000);
}
