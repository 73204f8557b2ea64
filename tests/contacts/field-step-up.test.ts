/**
 * ADR 0045, the contacts field step-up, end to end against a People-style mock contacts API:
 * PII fields are stripped from every `suite_a-contacts` answer (buffered, streamed, downloaded);
 * `requestFullFields` on one contact files an approval on a balanced policy with field step-up
 * enabled, and the approved re-submission returns the PII fields with notes still stripped; list,
 * search and batch endpoints, the strict tier and a disabled step-up are 403; every decision is
 * audited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceSpec } from '@vlt/contracts';
import {
  expectStatus,
  http,
  pollAudit,
  resolveCredential,
  vendToken,
  type AuditEvent,
  type HttpResult,
} from '../support/api-client.js';
import { connectOAuth, startConnectionsGateway, type ConnectionsGateway } from '../support/mock-providers.js';
import {
  NOTE_MARKER,
  PII_MARKER,
  UNKNOWN_MARKER,
  startMockContacts,
  type MockContacts,
} from '../support/mock-contacts.js';

const SHAPES = ['embedded', 'services'] as const;
const BASIC = ['resourceName', 'etag', 'metadata', 'names', 'emailAddresses', 'organizations', 'memberships'];
const PII = ['phoneNumbers', 'addresses', 'birthdays', 'relations', 'events', 'imClients', 'photos', 'urls'];

type Person = Record<string, unknown>;
interface Envelope {
  model: 'B';
  status: number;
  body: unknown;
  auditId: string;
  headers: Record<string, string>;
}
interface Refusal {
  error: string;
  code: string;
  auditId: string;
}
interface Paused {
  approvalRequired: true;
  approvalRequestId: string;
  expiresAt: string;
  auditId: string;
}

/** No PII, notes or unclassified value anywhere in the text the agent received. */
function expectNothingHidden(text: string, label: string) {
  for (const marker of [PII_MARKER, NOTE_MARKER, UNKNOWN_MARKER, '555 0101']) {
    expect(text.includes(marker), `${label}: "${marker}" leaked`).toBe(false);
  }
}

describe.each(SHAPES)('contacts field step-up (%s)', (shape) => {
  let contacts: MockContacts;
  let fx: ConnectionsGateway;
  let agent: { id: string; token: string };
  let connectionId: string;
  let policyId: string;

  const execute = <T = Envelope>(req: Record<string, unknown>) =>
    http<T>('POST', `${fx.base}/v1/vault/execute`, {
      headers: { authorization: `Bearer ${agent.token}` },
      json: { model: 'B', connectionId, method: 'GET', ...req },
    });
  const url = (path: string) => `${contacts.url}${path}`;
  const setContactFields = (contactFields: unknown, id = policyId) =>
    http<{ policy: { contactFields: unknown; version: number }; auditId: string; error?: string }>(
      'PUT',
      `${fx.base}/v1/policies/${id}`,
      { headers: fx.admin.headers, json: { contactFields } },
    );
  const approve = (id: string) =>
    http('POST', `${fx.base}/v1/approvals/${id}/approve`, { headers: fx.admin.headers });
  const auditRow = async (action: string, auditId: string): Promise<AuditEvent> => {
    const rows = await pollAudit(
      fx.admin,
      { agentId: agent.id, action },
      (e) => e.some((x) => x.auditId === auditId),
      15_000,
    );
    const row = rows.find((x) => x.auditId === auditId);
    expect(row, `${action} ${auditId}`).toBeDefined();
    return row!;
  };
  const expectDenied = async (r: HttpResult<unknown>, code: string) => {
    expect(r.status, r.text).toBe(403);
    const body = r.body as Refusal;
    expect(body.code).toBe('POLICY_DENIED');
    const row = await auditRow('execution_denied', body.auditId);
    expect(row.metadata).toMatchObject({ step: 'step_up', code });
    return row;
  };

  beforeAll(async () => {
    contacts = await startMockContacts();
    fx = await startConnectionsGateway({ shape, env: { VLT_SUITE_A_API_URL: contacts.url } });
    contacts.useTls(fx.mock.pki);
    agent = await fx.newAgent();
    const { connection } = await connectOAuth(fx, {
      service: 'suite_a-contacts',
      scopes: [...serviceSpec('suite_a-contacts')!.defaultScopes],
      agentId: agent.id,
      allowedModels: ['B'],
    });
    connectionId = connection.id;
    policyId = connection.policies.find((p) => p.agentId === agent.id)!.id;
    // The default allowlist has `/v1/people/*`; search and batch live at `/v1/people:…`.
    expectStatus(
      await http('PUT', `${fx.base}/v1/policies/${policyId}/allowlists`, {
        headers: fx.admin.headers,
        json: {
          allowlists: [
            {
              baseUrl: contacts.url,
              methods: ['GET'],
              pathPatterns: [
                '/v1/people/*',
                '/v1/people:searchContacts',
                '/v1/people:batchGet',
                '/v1/contactGroups*',
              ],
            },
          ],
        },
      }),
      200,
    );
  });
  afterAll(async () => {
    await fx?.close();
    await contacts?.close();
  });

  describe('PII stripped by default', () => {
    it('a new contacts policy is balanced with field step-up disabled', async () => {
      const r = await http<{ policy: { contactFields: unknown } }>(
        'GET',
        `${fx.base}/v1/policies/${policyId}`,
        {
          headers: fx.admin.headers,
        },
      );
      expect(r.status).toBe(200);
      expect(r.body.policy.contactFields).toEqual({ tier: 'balanced', fieldStepUpEnabled: false });
    });

    it('the list keeps names and emails, strips PII, notes and unclassified fields; audited completed', async () => {
      const r = await execute({ url: url('/v1/people/me/connections') });
      expect(r.status, r.text).toBe(200);
      const body = r.body.body as { connections: Person[]; totalPeople: number };
      expect(body.totalPeople).toBe(3);
      expect(body.connections).toHaveLength(3);
      for (const p of body.connections) expect(Object.keys(p)).toEqual(BASIC);
      expect(body.connections[0]).toMatchObject({
        names: [{ displayName: 'Ann Archer' }],
        emailAddresses: [{ value: 'c1001@example.com' }],
      });
      expectNothingHidden(r.text, 'list');
      // The provider was asked for everything: stripping happens on the way back.
      expect(contacts.requests.at(-1)).toMatchObject({ path: '/v1/people/me/connections' });
      const row = await auditRow('execution_completed', r.body.auditId);
      expect(row.metadata).toMatchObject({ responseStatus: 200, path: '/v1/people/me/connections' });
      expect(row.metadata).not.toHaveProperty('fullFields');
    });

    it('one contact, search, batch and contact groups are stripped the same way', async () => {
      const one = await execute({ url: url('/v1/people/c1001') });
      expect(one.status, one.text).toBe(200);
      expect(Object.keys(one.body.body as Person)).toEqual(BASIC);
      const search = await execute({ url: url('/v1/people:searchContacts'), query: { query: 'bob' } });
      expect(search.status, search.text).toBe(200);
      const results = (search.body.body as { results: { person: Person }[] }).results;
      expect(results).toHaveLength(1);
      expect(Object.keys(results[0]!.person)).toEqual(BASIC);
      const batch = await execute({
        url: `${url('/v1/people:batchGet')}?resourceNames=people/c1001&resourceNames=people/c1003`,
      });
      expect(batch.status, batch.text).toBe(200);
      const responses = (batch.body.body as { responses: { person: Person; httpStatusCode: number }[] })
        .responses;
      expect(responses.map((x) => x.httpStatusCode)).toEqual([200, 200]);
      for (const x of responses) expect(Object.keys(x.person)).toEqual(BASIC);
      const groups = await execute({ url: url('/v1/contactGroups') });
      expect(groups.status, groups.text).toBe(200);
      expect((groups.body.body as { contactGroups: Person[] }).contactGroups[0]).toMatchObject({
        name: 'myContacts',
        memberCount: 3,
      });
      for (const [label, r] of [
        ['one', one],
        ['search', search],
        ['batch', batch],
        ['groups', groups],
      ] as const) {
        expectNothingHidden(r.text, label);
      }
      // A provider error passes through in its own (JSON) shape.
      const missing = await execute({ url: url('/v1/people/c9999') });
      expect(missing.status).toBe(200);
      expect(missing.body).toMatchObject({ status: 404, body: { error: { status: 'NOT_FOUND' } } });
    });

    it('streamed and downloaded answers go through the same stripping', async () => {
      const streamed = await execute<{ connections: Person[] }>({
        url: url('/v1/people/me/connections'),
        stream: true,
      });
      expect(streamed.status, streamed.text).toBe(200);
      expect(streamed.headers['content-type']).toMatch(/application\/json/);
      expect(streamed.body.connections.map((p) => Object.keys(p))).toEqual([BASIC, BASIC, BASIC]);
      expectNothingHidden(streamed.text, 'streamed list');

      const downloaded = await execute<Person>({ url: url('/v1/people/c1002'), download: true });
      expect(downloaded.status, downloaded.text).toBe(200);
      expect(downloaded.headers['content-length']).toBeUndefined();
      expect(Object.keys(downloaded.body)).toEqual(BASIC);
      expectNothingHidden(downloaded.text, 'downloaded contact');

      const ndjson = await execute({
        url: url('/v1/people/me/connections'),
        query: { alt: 'ndjson' },
        stream: true,
      });
      expect(ndjson.status, ndjson.text).toBe(200);
      const lines = ndjson.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Person);
      expect(lines.map((p) => Object.keys(p))).toEqual([BASIC, BASIC, BASIC]);
      expectNothingHidden(ndjson.text, 'ndjson list');
    });

    it('an answer that cannot be read as JSON (a vCard export) is refused, never passed', async () => {
      for (const mode of [{}, { stream: true }, { download: true }]) {
        const r = await execute<Refusal>({ url: url('/v1/people/c1001'), query: { alt: 'vcard' }, ...mode });
        expect(r.status, `${JSON.stringify(mode)} ${r.text}`).toBe(403);
        expect(r.body.code).toBe('RESPONSE_UNFILTERABLE');
        expectNothingHidden(r.text, 'vcard');
        const row = await auditRow('execution_denied', r.body.auditId);
        expect(row.metadata).toMatchObject({ step: 'response_rules' });
      }
    });
  });

  describe('contacts are brokered only', () => {
    it('Model A (400, audited) and credential resolution (404) are refused even when the policy allows A', async () => {
      expectStatus(
        await http('PUT', `${fx.base}/v1/policies/${policyId}`, {
          headers: fx.admin.headers,
          json: { allowedModels: ['A', 'B'] },
        }),
        200,
      );
      try {
        const token = fx.mock.lastIssued(fx.mock.deploymentApp('suite_a').clientId)!.accessToken;
        // The catalog marks contacts brokered only (not vendable): Model A is 400, audited.
        const vend = await vendToken(fx.base, agent.token, { connectionId });
        expect(vend.status, vend.text).toBe(400);
        expect(vend.body).toMatchObject({ code: 'MODEL_NOT_AVAILABLE' });
        expect(vend.text).not.toContain(token);
        // Resolve answers as if there were nothing to hand out (no hint of existence).
        const resolved = await resolveCredential(fx.base, agent.token, {
          kind: 'model_provider',
          provider: 'suite_a-contacts',
        });
        expect(resolved.status, resolved.text).toBe(404);
        expect(resolved.text).not.toContain(token);
        const rows = await pollAudit(
          fx.admin,
          { agentId: agent.id, action: 'token_vend_denied' },
          (e) => e.some((x) => x.connectionId === connectionId),
          15_000,
        );
        const mine = rows.filter((x) => x.connectionId === connectionId);
        expect(mine.length).toBeGreaterThanOrEqual(1);
        for (const row of mine) expect(row.metadata.reason).toMatch(/brokered only/);
      } finally {
        expectStatus(
          await http('PUT', `${fx.base}/v1/policies/${policyId}`, {
            headers: fx.admin.headers,
            json: { allowedModels: ['B'] },
          }),
          200,
        );
      }
    });
  });

  describe('field step-up refusals', () => {
    it('with the default settings (step-up disabled) requestFullFields is 403, nothing filed', async () => {
      const before = contacts.requests.length;
      const r = await execute({ url: url('/v1/people/c1001'), requestFullFields: true });
      const row = await expectDenied(r, 'full_fields_disabled');
      expect(row.metadata.reason).toMatch(/not enabled/);
      expect(contacts.requests.length).toBe(before);
    });

    it('strict tier: 403; strict with step-up enabled is refused when written (400)', async () => {
      const bad = await setContactFields({ tier: 'strict', fieldStepUpEnabled: true });
      expect(bad.status, bad.text).toBe(400);
      const set = await setContactFields({ tier: 'strict', fieldStepUpEnabled: false });
      expect(set.status, set.text).toBe(200);
      expect(set.body.policy.contactFields).toEqual({ tier: 'strict', fieldStepUpEnabled: false });
      const r = await execute({ url: url('/v1/people/c1001'), requestFullFields: true });
      const row = await expectDenied(r, 'full_fields_strict');
      expect(row.metadata.reason).toMatch(/permanently/);
      // Reads still work, stripped.
      const plain = await execute({ url: url('/v1/people/c1001') });
      expect(Object.keys(plain.body.body as Person)).toEqual(BASIC);
    });

    it('field step-up disabled explicitly: 403', async () => {
      expectStatus(await setContactFields({ tier: 'balanced', fieldStepUpEnabled: false }), 200);
      await expectDenied(
        await execute({ url: url('/v1/people/c1002'), requestFullFields: true }),
        'full_fields_disabled',
      );
    });

    it('list, search and batch with requestFullFields are 403 even with step-up enabled', async () => {
      expectStatus(await setContactFields({ tier: 'balanced', fieldStepUpEnabled: true }), 200);
      const before = contacts.requests.length;
      for (const req of [
        { url: url('/v1/people/me/connections') },
        { url: url('/v1/people:searchContacts'), query: { query: 'ann' } },
        { url: `${url('/v1/people:batchGet')}?resourceNames=people/c1001` },
        { url: url('/v1/contactGroups') },
      ]) {
        const r = await execute({ ...req, requestFullFields: true });
        const row = await expectDenied(r, 'full_fields_single_contact_only');
        expect(row.metadata.reason).toMatch(/one contact at a time/);
      }
      expect(contacts.requests.length).toBe(before);
    });

    it('contact field settings exist on contacts connections only (400), and requestFullFields elsewhere is 403', async () => {
      const { connection: mail } = await connectOAuth(fx, {
        service: 'suite_a-mail',
        scopes: [...serviceSpec('suite_a-mail')!.defaultScopes],
        agentId: agent.id,
        allowedModels: ['B'],
      });
      const mailPolicy = mail.policies.find((p) => p.agentId === agent.id)!.id;
      const r = await setContactFields({ tier: 'balanced', fieldStepUpEnabled: true }, mailPolicy);
      expect(r.status, r.text).toBe(400);
      expect(r.body.error).toMatch(/contacts connections/);
      const view = await http<{ policy: { contactFields: unknown } }>(
        'GET',
        `${fx.base}/v1/policies/${mailPolicy}`,
        {
          headers: fx.admin.headers,
        },
      );
      expect(view.body.policy.contactFields).toBeNull();
      const call = await http<Refusal>('POST', `${fx.base}/v1/vault/execute`, {
        headers: { authorization: `Bearer ${agent.token}` },
        json: {
          model: 'B',
          connectionId: mail.id,
          method: 'GET',
          url: url('/gmail/v1/users/me/messages/m1'),
          requestFullFields: true,
        },
      });
      expect(call.status, call.text).toBe(403);
      const row = await auditRow('execution_denied', call.body.auditId);
      expect(row.metadata).toMatchObject({ step: 'step_up', code: 'full_fields_unsupported' });
    });
  });

  describe('field step-up on a balanced policy with fieldStepUpEnabled', () => {
    it('setting it is audited policy_updated with the new value', async () => {
      const set = await setContactFields({ tier: 'balanced', fieldStepUpEnabled: true });
      expect(set.status, set.text).toBe(200);
      expect(set.body.policy.contactFields).toEqual({ tier: 'balanced', fieldStepUpEnabled: true });
      const rows = await pollAudit(
        fx.admin,
        { action: 'policy_updated' },
        (e) => e.some((x) => x.auditId === set.body.auditId),
        15_000,
      );
      expect(rows.find((x) => x.auditId === set.body.auditId)!.metadata).toMatchObject({
        policyId,
        changed: 'contactFields',
        contactFields: { tier: 'balanced', fieldStepUpEnabled: true },
      });
    });

    it('one contact: 202 → approved → the re-submission returns its PII fields, never its notes', async () => {
      expectStatus(await setContactFields({ tier: 'balanced', fieldStepUpEnabled: true }), 200);
      const target = url('/v1/people/c1001');
      const before = contacts.requests.length;

      const paused = await execute<Paused>({ url: target, requestFullFields: true });
      expect(paused.status, paused.text).toBe(202);
      expect(paused.body.approvalRequired).toBe(true);
      const approvalId = paused.body.approvalRequestId;
      expect(contacts.requests.length).toBe(before);
      const requested = await auditRow('approval_requested', paused.body.auditId);
      expect(requested.connectionId).toBe(connectionId);
      const paused403 = await pollAudit(
        fx.admin,
        { agentId: agent.id, action: 'execution_denied' },
        (e) => e.some((x) => x.metadata.approvalRequestId === approvalId),
        15_000,
      );
      expect(paused403.find((x) => x.metadata.approvalRequestId === approvalId)!.metadata).toMatchObject({
        reason: 'step-up approval required',
      });

      // What the reviewer sees: this contact, with full fields.
      const view = await http<{ approval: { status: string; requestDetails: Record<string, unknown> } }>(
        'GET',
        `${fx.base}/v1/approvals/${approvalId}`,
        { headers: fx.admin.headers },
      );
      expect(view.body.approval).toMatchObject({
        status: 'pending',
        requestDetails: { method: 'GET', url: target, requestFullFields: true },
      });
      const early = await execute<Refusal>({ url: target, requestFullFields: true, approvalId });
      expect(early.status).toBe(403);
      expect(early.body.code).toBe('APPROVAL_PENDING');

      expect((await approve(approvalId)).status).toBe(200);

      // The approval holds for exactly this request: not without requestFullFields, not for
      // another contact. Neither consumes it.
      const withoutFull = await execute<Refusal>({ url: target, approvalId });
      expect(withoutFull.status, withoutFull.text).toBe(403);
      expect(withoutFull.body.code).toBe('APPROVAL_MISMATCH');
      expect((await auditRow('execution_denied', withoutFull.body.auditId)).metadata).toMatchObject({
        step: 'step_up',
        approvalRequestId: approvalId,
      });
      const otherContact = await execute<Refusal>({
        url: url('/v1/people/c1002'),
        requestFullFields: true,
        approvalId,
      });
      expect(otherContact.status, otherContact.text).toBe(403);
      expect(otherContact.body.code).toBe('APPROVAL_MISMATCH');
      expect(contacts.requests.length).toBe(before);

      const full = await execute({ url: target, requestFullFields: true, approvalId });
      expect(full.status, full.text).toBe(200);
      const person = full.body.body as Person;
      expect(Object.keys(person).sort()).toEqual([...BASIC, ...PII].sort());
      expect(person).toMatchObject({
        phoneNumbers: [{ value: '+1 415 555 0101' }],
        birthdays: [{ date: { year: 1980, month: 4, day: 2 } }],
      });
      expect(full.text).toContain(PII_MARKER);
      expect(full.text).not.toContain(NOTE_MARKER);
      expect(full.text).not.toContain(UNKNOWN_MARKER);
      expect(contacts.requests.length).toBe(before + 1);
      const completed = await auditRow('execution_completed', full.body.auditId);
      expect(completed.metadata).toMatchObject({
        fullFields: true,
        approvalRequestId: approvalId,
        responseStatus: 200,
      });

      // Exactly once: the replay is refused, and plain reads are stripped again.
      const replay = await execute<Refusal>({ url: target, requestFullFields: true, approvalId });
      expect(replay.status).toBe(409);
      const plain = await execute({ url: target });
      expect(Object.keys(plain.body.body as Person)).toEqual(BASIC);
      expectNothingHidden(plain.text, 'read after the step-up');

      const trail = await pollAudit(
        fx.admin,
        { agentId: agent.id },
        (e) => ['approval_requested', 'approval_approved'].every((a) => e.some((x) => x.action === a)),
        15_000,
      );
      expect(
        trail.some((e) => e.action === 'approval_approved' && e.metadata.approvalRequestId === approvalId),
      ).toBe(true);
    });

    it('a full-fields approval redeemed as a download keeps the PII fields too, still without notes', async () => {
      const target = url('/v1/people/c1003');
      const paused = await execute<Paused>({ url: target, requestFullFields: true, download: true });
      expect(paused.status, paused.text).toBe(202);
      expect((await approve(paused.body.approvalRequestId)).status).toBe(200);
      const r = await execute<Person>({
        url: target,
        requestFullFields: true,
        download: true,
        approvalId: paused.body.approvalRequestId,
      });
      expect(r.status, r.text).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual([...BASIC, ...PII].sort());
      expect(r.text).not.toContain(NOTE_MARKER);
    });

    it('turning step-up off again refuses an approved full-fields request (403), unconsumed', async () => {
      const target = url('/v1/people/c1002');
      const paused = await execute<Paused>({ url: target, requestFullFields: true });
      expect(paused.status, paused.text).toBe(202);
      expect((await approve(paused.body.approvalRequestId)).status).toBe(200);
      expectStatus(await setContactFields(null), 200);
      const r = await execute({
        url: target,
        requestFullFields: true,
        approvalId: paused.body.approvalRequestId,
      });
      await expectDenied(r, 'full_fields_disabled');
      const view = await http<{ approval: { status: string } }>(
        'GET',
        `${fx.base}/v1/approvals/${paused.body.approvalRequestId}`,
        { headers: fx.admin.headers },
      );
      expect(view.body.approval.status).toBe('approved');
    });
  });
});
