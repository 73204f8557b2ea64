/**
 * Policy templates (`/v1/templates/:provider`, `/rules`, `/guards`).
 *
 * Without a gateway: every template passes the engine's write-time validation (RE2, field
 * paths, allowlists), and every guard and preset decides what it says on concrete requests
 * (the engine's own pipeline, on the default API URL and on one behind a path prefix), while
 * ordinary requests pass every guard.
 *
 * Over HTTP, in-process gateway in front of the mock providers: the three routes answer for each
 * provider with allowlists on the configured API URL, 404 for a provider without templates, 401
 * without credentials and refuse an agent token; then every allowlist template, preset, rule
 * template and guard is applied through the real policy API to a real policy of a real
 * connection, and comes back as applied.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AllowlistTemplatesResponse,
  GuardTemplatesResponse,
  PROVIDERS,
  PolicyDocument,
  RuleTemplatesResponse,
  SERVICES,
  TEMPLATE_PROVIDERS,
  allowlistTemplates,
  guardTemplates,
  ruleTemplates,
  serviceSpec,
  type PolicyRules,
  type SuggestedPolicySettings,
  type TemplateProvider,
} from '@vlt/contracts';
import {
  compilePolicy,
  evaluateExecution,
  hydratePolicy,
  validateAllowlists,
  validatePolicyRules,
} from '@vlt/policy-engine';
import { botTokenConnectionRequest, createPolicy, expectStatus, http } from '../support/api-client.js';
import { connectOAuth, startConnectionsGateway, type ConnectionsGateway } from '../support/mock-providers.js';

// ---------------------------------------------------------------------------------------------
// What the rules decide, through the engine

type Outcome = 'allow' | 'deny' | 'require_approval' | `deny:${string}`;
/** method, path under the API URL, body (an object is JSON, a string is sent as text), outcome. */
type Case = [string, string, unknown, Outcome];

const UNATTENDED: SuggestedPolicySettings = { defaultMode: 'read_write', stepUpApproval: 'never' };

function decide(
  provider: TemplateProvider,
  apiUrl: string,
  rules: PolicyRules,
  settings: SuggestedPolicySettings,
  [method, path, body]: Case,
): string {
  const base = apiUrl.replace(/\/+$/, '');
  const policy = PolicyDocument.parse({
    id: randomUUID(),
    workspaceId: randomUUID(),
    agentId: randomUUID(),
    connectionId: randomUUID(),
    allowedModels: ['B'],
    ...settings,
    allowlists: [{ baseUrl: base, methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'], pathPatterns: ['/*'] }],
    rules,
    version: 1,
  });
  const service = SERVICES.find((s) => s.provider === provider)!.id;
  const runtime = hydratePolicy(JSON.parse(JSON.stringify(compilePolicy(policy, { provider, service }))));
  const contentType = typeof body === 'string' ? 'text/plain' : 'application/json';
  const d = evaluateExecution(
    {
      method,
      url: `${base}${path}`,
      body: body ?? undefined,
      headers: body === undefined ? {} : { 'content-type': contentType },
    },
    runtime,
    {
      now: new Date(),
      requestsInLastHour: 0,
      resolvedAddresses: ['93.184.216.34'],
      ssrfAllowCidrs: [],
      model: 'B',
    },
  );
  switch (d.outcome) {
    case 'allow':
      return 'allow';
    case 'deny':
      return d.code === 'rule_denied' ? 'deny' : `deny:${d.code}`;
    case 'require_approval':
      return d.code === 'rule_requires_approval' ? 'require_approval' : `require_approval:${d.code}`;
    default:
      return `${d.outcome}:${JSON.stringify(d)}`;
  }
}

const A = 'require_approval' as const;
const D = 'deny' as const;
const OK = 'allow' as const;

/** Per guard id: requests it must catch. */
const CAUGHT: Record<string, Case[]> = {
  'suite_a.send_mail': [
    ['POST', '/gmail/v1/users/me/messages/send', { raw: 'eA' }, A],
    ['POST', '/upload/gmail/v1/users/me/messages/send', 'raw message', A],
    ['POST', '/gmail/v1/users/me/drafts/send', { id: 'd1' }, A],
    ['POST', '/gmail/v1/users/me/messages/%73end', { raw: 'eA' }, A],
    ['POST', '/Gmail/v1/users/me/messages/SEND/', { raw: 'eA' }, A],
  ],
  'suite_a.delete_mail': [
    ['DELETE', '/gmail/v1/users/me/messages/m1', undefined, D],
    ['DELETE', '/gmail/v1/users/me/threads/t1', undefined, D],
    ['POST', '/gmail/v1/users/me/messages/batchDelete', { ids: ['m1'] }, D],
    ['POST', '/gmail/v1/users/me/messages/m1/trash', undefined, A],
    ['POST', '/gmail/v1/users/me/threads/t1/trash', undefined, A],
  ],
  'suite_a.mail_forwarding': [
    ['POST', '/gmail/v1/users/me/settings/forwardingAddresses', { forwardingEmail: 'x@evil.test' }, D],
    ['PUT', '/gmail/v1/users/me/settings/autoForwarding', { enabled: true }, D],
    ['POST', '/gmail/v1/users/me/settings/filters', { action: { forward: 'x@evil.test' } }, D],
    ['POST', '/gmail/v1/users/me/settings/delegates', { delegateEmail: 'x@evil.test' }, D],
    ['POST', '/gmail/v1/users/me/watch', { topicName: 'projects/evil/topics/t' }, D],
  ],
  'suite_a.delete_files': [
    ['DELETE', '/drive/v3/files/f1', undefined, D],
    ['DELETE', '/drive/v3/files/trash', undefined, D],
    ['DELETE', '/drive/v3/drives/d1', undefined, D],
    ['PATCH', '/drive/v3/files/f1', { trashed: true }, A],
    ['PATCH', '/drive/v3/files/f1', { trashed: 'TRUE' }, A],
    ['PATCH', '/upload/drive/v3/files/f1', 'new content', A],
  ],
  'suite_a.share_files': [
    ['POST', '/drive/v3/files/f1/permissions', { type: 'anyone', role: 'reader' }, D],
    ['POST', '/drive/v3/files/f1/permissions', { type: 'user', role: 'owner', emailAddress: 'x@y.test' }, D],
    ['POST', '/drive/v3/files/f1/permissions', { type: 'user', role: 'writer', emailAddress: 'x@y.test' }, A],
    // A body the rules cannot read falls through to the approval.
    ['POST', '/drive/v3/files/f1/permissions', 'type=anyone&role=reader', A],
    ['DELETE', '/drive/v3/files/f1/permissions/p1', undefined, A],
    ['PATCH', '/drive/v3/files/f1/revisions/r1', { published: true }, A],
  ],
  'suite_a.calendar_events': [
    ['POST', '/calendar/v3/calendars/primary/events', { summary: 'x' }, A],
    ['POST', '/calendar/v3/calendars/primary/events/quickAdd', undefined, A],
    ['PATCH', '/calendar/v3/calendars/a%40b.test/events/e1', { summary: 'y' }, A],
    ['DELETE', '/calendar/v3/calendars/primary/events/e1', undefined, A],
  ],
  'suite_a.share_calendars': [
    ['POST', '/calendar/v3/calendars/primary/acl', { role: 'owner' }, D],
    ['DELETE', '/calendar/v3/calendars/c1', undefined, D],
    ['POST', '/calendar/v3/calendars/c1/clear', undefined, D],
  ],
  'suite_a.delete_contacts': [
    ['DELETE', '/v1/people/c1:deleteContact', undefined, A],
    ['DELETE', '/v1/people/c1%3AdeleteContact', undefined, A],
    ['POST', '/v1/people:batchDeleteContacts', { resourceNames: ['people/c1'] }, A],
    ['DELETE', '/v1/contactGroups/g1', undefined, A],
  ],
  // The pipeline refuses a Google batch before any rule (ADR 0101); the guard is a second lock.
  'suite_a.batch_requests': [
    ['POST', '/batch/gmail/v1', 'multipart', 'deny:batch_refused'],
    ['POST', '/batch', 'multipart', 'deny:batch_refused'],
  ],

  'suite_b.send_mail': [
    ['POST', '/v1.0/me/sendMail', { message: {} }, A],
    ['POST', '/v1.0/me/messages/m1/send', undefined, A],
    ['POST', "/v1.0/me/messages('m1')/reply", { comment: 'x' }, A],
    ['POST', '/v1.0/me/messages%28%27m1%27%29/send', undefined, A],
    ['POST', '/v1.0/me/messages/m1/microsoft.graph.forward', { toRecipients: [] }, A],
    ['POST', '/v1.0/me/mailFolders/inbox/messages/m1/replyAll', { comment: 'x' }, A],
    ['POST', '/v1.0/ME/SENDMAIL', { message: {} }, A],
  ],
  'suite_b.delete_mail': [
    ['POST', '/v1.0/me/messages/m1/permanentDelete', undefined, D],
    ['POST', '/v1.0/me/mailFolders/f1/permanentDelete', undefined, D],
    ['DELETE', '/v1.0/me/messages/m1', undefined, A],
    ['POST', '/v1.0/me/messages/m1/move', { destinationId: 'deleteditems' }, A],
    ['POST', '/v1.0/me/messages/m1/move', { destinationId: 'DeletedItems' }, A],
  ],
  'suite_b.mail_forwarding': [
    ['POST', '/v1.0/me/mailFolders/inbox/messageRules', { actions: { forwardTo: [] } }, D],
    ['PATCH', '/v1.0/me/mailboxSettings', { automaticRepliesSetting: {} }, D],
  ],
  'suite_b.post_messages': [
    ['POST', '/v1.0/chats/c1/messages', { body: { content: 'hi' } }, A],
    ['POST', '/v1.0/me/chats/c1/messages', { body: { content: 'hi' } }, A],
    ['POST', '/v1.0/teams/t1/channels/ch1/messages', { body: { content: 'hi' } }, A],
    ['POST', '/v1.0/teams/t1/channels/ch1/messages/m1/replies', { body: { content: 'hi' } }, A],
    ['POST', '/v1.0/teams/t1/primaryChannel/messages', { body: { content: 'hi' } }, A],
    ['POST', '/v1.0/chats/c1/sendActivityNotification', { topic: {} }, A],
  ],
  'suite_b.edit_messages': [
    ['PATCH', '/v1.0/chats/c1/messages/m1', { body: { content: 'edited' } }, A],
    ['POST', '/v1.0/chats/c1/messages/m1/softDelete', undefined, A],
  ],
  'suite_b.manage_members': [
    ['POST', '/v1.0/chats/c1/members', { roles: ['owner'] }, A],
    ['DELETE', '/v1.0/teams/t1/members/m1', undefined, A],
    ['POST', '/v1.0/chats', { chatType: 'group' }, A],
    ['POST', '/v1.0/teams/t1/channels', { displayName: 'x' }, A],
    ['DELETE', '/v1.0/teams/t1/channels/ch1', undefined, A],
  ],
  'suite_b.delete_files': [
    ['POST', '/v1.0/me/drive/items/i1/permanentDelete', undefined, D],
    ['DELETE', '/v1.0/me/drive/items/i1', undefined, A],
    ['DELETE', '/v1.0/drives/d1/items/i1', undefined, A],
  ],
  'suite_b.share_files': [
    ['POST', '/v1.0/me/drive/items/i1/createLink', { type: 'view', scope: 'anonymous' }, D],
    ['POST', '/v1.0/me/drive/items/i1/createLink', { type: 'view', scope: 'organization' }, A],
    ['POST', '/v1.0/me/drive/items/i1/invite', { recipients: [] }, A],
    ['PATCH', '/v1.0/me/drive/items/i1/permissions/p1', { roles: ['write'] }, A],
  ],
  'suite_b.batch_requests': [
    ['POST', '/v1.0/$batch', { requests: [] }, D],
    ['POST', '/v1.0/%24batch', { requests: [] }, D],
  ],

  'chatbot_a.post_messages': [
    ['POST', '/sendMessage', { chat_id: 1, text: 'hi' }, A],
    ['GET', '/sendMessage', undefined, A],
    ['POST', '/SENDPHOTO', { chat_id: 1 }, A],
    ['POST', '/forwardMessage', { chat_id: 1 }, A],
    ['POST', '/copyMessages', { chat_id: 1 }, A],
    ['POST', '/sendChatAction', { chat_id: 1, action: 'typing' }, A],
  ],
  'chatbot_a.edit_messages': [
    ['POST', '/editMessageText', { chat_id: 1, message_id: 2, text: 'x' }, A],
    ['POST', '/deleteMessage', { chat_id: 1, message_id: 2 }, A],
    ['POST', '/deleteMessages', { chat_id: 1, message_ids: [2] }, A],
  ],
  'chatbot_a.manage_members': [
    ['POST', '/banChatMember', { chat_id: 1, user_id: 2 }, D],
    ['POST', '/promoteChatMember', { chat_id: 1, user_id: 2 }, D],
    ['POST', '/createChatInviteLink', { chat_id: 1 }, D],
    ['GET', '/exportChatInviteLink', undefined, D],
    ['GET', '/approveChatJoinRequest', undefined, D],
  ],
  'chatbot_a.chat_settings': [
    ['POST', '/setChatTitle', { chat_id: 1, title: 'x' }, A],
    ['POST', '/pinChatMessage', { chat_id: 1, message_id: 2 }, A],
    ['POST', '/unpinAllChatMessages', { chat_id: 1 }, A],
    ['POST', '/leaveChat', { chat_id: 1 }, A],
  ],
  'chatbot_a.bot_configuration': [
    ['POST', '/setWebhook', { url: 'https://evil.test/hook' }, D],
    ['GET', '/setWebhook', undefined, D],
    ['POST', '/deleteWebhook', undefined, D],
    ['POST', '/logOut', undefined, D],
    ['POST', '/close', undefined, D],
    ['POST', '/setMyCommands', { commands: [] }, D],
  ],

  'chatbot_b.post_messages': [
    ['POST', '/api/chat.postMessage', { channel: 'C1', text: 'hi' }, A],
    ['GET', '/api/chat.postMessage', undefined, A],
    ['POST', '/api/chat.scheduleMessage', 'channel=C1&text=hi', A],
    ['POST', '/api/files.completeUploadExternal', { files: [] }, A],
  ],
  'chatbot_b.edit_messages': [
    ['POST', '/api/chat.update', { channel: 'C1', ts: '1' }, A],
    ['POST', '/api/chat.delete', { channel: 'C1', ts: '1' }, A],
    ['POST', '/api/files.delete', { file: 'F1' }, A],
  ],
  'chatbot_b.manage_members': [
    ['POST', '/api/conversations.invite', { channel: 'C1', users: 'U1' }, A],
    ['POST', '/api/conversations.create', { name: 'x' }, A],
    ['POST', '/api/conversations.kick', { channel: 'C1', user: 'U1' }, A],
    ['POST', '/api/conversations.open', { users: 'U1' }, A],
  ],
  'chatbot_b.external_sharing': [
    ['POST', '/api/conversations.inviteShared', { channel: 'C1', emails: 'x@evil.test' }, D],
    ['POST', '/api/files.sharedPublicURL', { file: 'F1' }, D],
  ],
  'chatbot_b.workspace_admin': [
    ['POST', '/api/admin.users.invite', { email: 'x@evil.test' }, D],
    ['POST', '/api/auth.revoke', undefined, D],
    ['GET', '/api/apps.uninstall', undefined, D],
  ],
};

/** Ordinary work no guard of the provider may catch. */
const BENIGN: Record<TemplateProvider, Case[]> = {
  suite_a: [
    ['GET', '/gmail/v1/users/me/messages', undefined, OK],
    ['GET', '/gmail/v1/users/me/messages/m1', undefined, OK],
    ['POST', '/gmail/v1/users/me/messages/m1/modify', { addLabelIds: ['L1'] }, OK],
    ['POST', '/gmail/v1/users/me/messages/batchModify', { ids: ['m1'] }, OK],
    ['POST', '/gmail/v1/users/me/drafts', { message: { raw: 'eA' } }, OK],
    ['GET', '/gmail/v1/users/me/settings/filters', undefined, OK],
    ['GET', '/drive/v3/files', undefined, OK],
    ['POST', '/drive/v3/files', { name: 'a' }, OK],
    ['PATCH', '/drive/v3/files/f1', { name: 'b', trashed: false }, OK],
    ['GET', '/drive/v3/files/f1/permissions', undefined, OK],
    ['GET', '/calendar/v3/calendars/primary/events', undefined, OK],
    ['GET', '/v1/people/me/connections', undefined, OK],
  ],
  suite_b: [
    ['GET', '/v1.0/me/messages', undefined, OK],
    ['GET', '/v1.0/me/messages/m1', undefined, OK],
    ['PATCH', '/v1.0/me/messages/m1', { isRead: true }, OK],
    ['POST', '/v1.0/me/messages', { subject: 'draft' }, OK],
    ['POST', '/v1.0/me/messages/m1/move', { destinationId: 'archive' }, OK],
    ['GET', '/v1.0/me/mailFolders/inbox/messageRules', undefined, OK],
    ['GET', '/v1.0/me/chats/c1/messages', undefined, OK],
    ['GET', '/v1.0/me/drive/root/children', undefined, OK],
    ['PUT', '/v1.0/me/drive/items/i1/content', 'new content', OK],
  ],
  chatbot_a: [
    ['GET', '/getUpdates', undefined, OK],
    ['POST', '/getUpdates', { offset: 1 }, OK],
    ['GET', '/getMe', undefined, OK],
    ['POST', '/getChatMember', { chat_id: 1, user_id: 2 }, OK],
    ['POST', '/answerCallbackQuery', { callback_query_id: 'q' }, OK],
    ['POST', '/closeForumTopic', { chat_id: 1 }, OK],
  ],
  chatbot_b: [
    ['GET', '/api/conversations.history', undefined, OK],
    ['POST', '/api/conversations.history', { channel: 'C1' }, OK],
    ['GET', '/api/conversations.list', undefined, OK],
    ['GET', '/api/auth.test', undefined, OK],
    ['POST', '/api/reactions.add', { channel: 'C1', name: 'ok' }, OK],
    ['POST', '/api/conversations.mark', { channel: 'C1', ts: '1' }, OK],
  ],
};

/** Per preset, under its suggested settings. */
const PRESET_CASES: Record<TemplateProvider, Partial<Record<'minimal' | 'standard' | 'strict', Case[]>>> = {
  suite_a: {
    minimal: [
      ['POST', '/gmail/v1/users/me/messages/send', { raw: 'eA' }, OK],
      ['DELETE', '/gmail/v1/users/me/messages/m1', undefined, OK],
      ['POST', '/gmail/v1/users/me/settings/filters', {}, D],
    ],
    standard: [
      ['POST', '/gmail/v1/users/me/messages/send', { raw: 'eA' }, A],
      ['POST', '/gmail/v1/users/me/messages/m1/modify', { addLabelIds: ['L1'] }, OK],
      ['DELETE', '/gmail/v1/users/me/messages/m1', undefined, D],
      ['POST', '/gmail/v1/users/me/settings/filters', {}, D],
      ['GET', '/gmail/v1/users/me/messages', undefined, OK],
    ],
    strict: [
      ['POST', '/gmail/v1/users/me/messages/m1/modify', { addLabelIds: ['L1'] }, A],
      ['DELETE', '/gmail/v1/users/me/messages/m1', undefined, D],
      ['GET', '/gmail/v1/users/me/messages', undefined, OK],
    ],
  },
  suite_b: {
    minimal: [
      ['POST', '/v1.0/me/sendMail', { message: {} }, OK],
      ['POST', '/v1.0/$batch', { requests: [] }, D],
    ],
    standard: [
      ['POST', '/v1.0/me/sendMail', { message: {} }, A],
      ['PATCH', '/v1.0/me/messages/m1', { isRead: true }, OK],
      ['POST', '/v1.0/me/messages/m1/permanentDelete', undefined, D],
    ],
    strict: [
      ['PATCH', '/v1.0/me/messages/m1', { isRead: true }, A],
      ['GET', '/v1.0/me/messages', undefined, OK],
    ],
  },
  chatbot_a: {
    minimal: [
      ['POST', '/sendMessage', { chat_id: 1, text: 'hi' }, OK],
      ['POST', '/setWebhook', { url: 'https://evil.test' }, D],
    ],
    standard: [
      ['POST', '/sendMessage', { chat_id: 1, text: 'hi' }, OK],
      ['POST', '/editMessageText', { chat_id: 1, message_id: 2, text: 'x' }, A],
      ['POST', '/setWebhook', { url: 'https://evil.test' }, D],
    ],
    strict: [
      ['POST', '/getUpdates', { offset: 1 }, OK],
      ['GET', '/getMe', undefined, OK],
      ['POST', '/sendMessage', { chat_id: 1, text: 'hi' }, A],
      ['GET', '/sendMessage', undefined, A],
      ['POST', '/answerCallbackQuery', { callback_query_id: 'q' }, A],
      ['POST', '/setWebhook', { url: 'https://evil.test' }, D],
    ],
  },
  chatbot_b: {
    minimal: [
      ['POST', '/api/chat.postMessage', { channel: 'C1', text: 'hi' }, OK],
      ['POST', '/api/auth.revoke', undefined, D],
    ],
    standard: [
      ['POST', '/api/chat.postMessage', { channel: 'C1', text: 'hi' }, A],
      ['POST', '/api/reactions.add', { channel: 'C1', name: 'ok' }, OK],
      ['POST', '/api/auth.revoke', undefined, D],
    ],
    strict: [
      ['POST', '/api/conversations.history', { channel: 'C1' }, OK],
      ['GET', '/api/conversations.list', undefined, OK],
      ['POST', '/api/reactions.add', { channel: 'C1', name: 'ok' }, A],
      ['POST', '/api/auth.revoke', undefined, D],
    ],
  },
};

const label = ([m, p, , o]: Case) => `${m} ${p} -> ${o}`;

describe.each(
  TEMPLATE_PROVIDERS.flatMap((p) =>
    [PROVIDERS[p].defaults!.apiUrl, 'https://gateway.example.test/proxy/v2'].map((u) => [p, u] as const),
  ),
)('templates of %s on %s, through the policy engine', (provider, apiUrl) => {
  const guards = guardTemplates(provider, apiUrl);
  const { presets, rules } = ruleTemplates(provider, apiUrl);

  it('every template passes the write-time validation of the policy routes', () => {
    for (const t of allowlistTemplates(provider, apiUrl))
      expect(validateAllowlists(t.allowlists), t.id).toEqual([]);
    for (const t of [...rules, ...presets, ...guards]) expect(validatePolicyRules(t.rules), t.id).toEqual([]);
  });

  it('every guard has cases, and catches each of them', () => {
    for (const g of guards) {
      const cases = CAUGHT[g.id];
      expect(cases, `no cases for ${g.id}`).toBeDefined();
      const got = cases!.map(
        (c) => `${label(c).split(' -> ')[0]} -> ${decide(provider, apiUrl, g.rules, UNATTENDED, c)}`,
      );
      expect(got, g.id).toEqual(cases!.map(label));
    }
  });

  it('ordinary work passes every guard at once', () => {
    const all: PolicyRules = { request: guards.flatMap((g) => g.rules.request), response: [] };
    // Deny rules first, as a client combining guards should order them.
    all.request.sort((a, b) => Number(a.action !== 'deny') - Number(b.action !== 'deny'));
    const cases = BENIGN[provider];
    const got = cases.map(
      (c) => `${label(c).split(' -> ')[0]} -> ${decide(provider, apiUrl, all, UNATTENDED, c)}`,
    );
    expect(got).toEqual(cases.map(label));
  });

  it('each preset decides as described under its suggested settings', () => {
    for (const p of presets) {
      const cases = PRESET_CASES[provider][p.id] ?? [];
      expect(cases.length, `${p.id} has cases`).toBeGreaterThan(0);
      const got = cases.map(
        (c) => `${label(c).split(' -> ')[0]} -> ${decide(provider, apiUrl, p.rules, p.suggestedSettings, c)}`,
      );
      expect(got, p.id).toEqual(cases.map(label));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Over HTTP

describe('template routes over HTTP', () => {
  let fx: ConnectionsGateway;
  let agentToken: string;
  /** One policy per provider, on a real connection of that provider. */
  const policyOf = {} as Record<TemplateProvider, string>;

  beforeAll(async () => {
    fx = await startConnectionsGateway({ providers: TEMPLATE_PROVIDERS });
    const agent = await fx.newAgent();
    agentToken = agent.token;
    const connections: Record<TemplateProvider, string> = {
      suite_a: '',
      suite_b: '',
      chatbot_b: '',
      chatbot_a: expectStatus(await botTokenConnectionRequest(fx.admin, { botToken: fx.mock.botToken }), 201)
        .body.connection.id,
    };
    for (const [provider, service] of [
      ['suite_a', 'suite_a-mail'],
      ['suite_b', 'suite_b-mail'],
      ['chatbot_b', 'chatbot_b'],
    ] as const) {
      const scopes = [...serviceSpec(service)!.defaultScopes];
      connections[provider] = (await connectOAuth(fx, { service, scopes })).connection.id;
    }
    for (const p of TEMPLATE_PROVIDERS) {
      policyOf[p] = (
        await createPolicy(fx.admin, agent.id, connections[p], { allowedModels: ['B'] })
      ).policy.id;
    }
  });
  afterAll(async () => {
    await fx?.close();
  });

  const get = (path: string, headers: Record<string, string> = fx.admin.headers) =>
    http('GET', `${fx.base}${path}`, { headers });
  const paths = (p: string) => [
    `/v1/templates/${p}`,
    `/v1/templates/${p}/rules`,
    `/v1/templates/${p}/guards`,
  ];

  it.each(TEMPLATE_PROVIDERS)(
    '%s: the three routes answer 200 with allowlists on the configured API URL',
    async (p) => {
      const [allow, rules, guards] = await Promise.all(paths(p).map((u) => get(u)));
      expect(allow!.status, allow!.text).toBe(200);
      expect(rules!.status, rules!.text).toBe(200);
      expect(guards!.status, guards!.text).toBe(200);

      const a = AllowlistTemplatesResponse.parse(allow!.body);
      // The deployment points the provider at the mock: the templates follow, not the default.
      expect(fx.mock.url).not.toBe(PROVIDERS[p].defaults!.apiUrl);
      expect(a).toMatchObject({ provider: p, apiUrl: fx.mock.url });
      for (const t of a.templates) for (const e of t.allowlists) expect(e.baseUrl).toBe(fx.mock.url);
      expect(allow!.body).toEqual(JSON.parse(JSON.stringify(a)));
      expect(a.templates).toEqual(JSON.parse(JSON.stringify(allowlistTemplates(p, fx.mock.url))));

      expect(RuleTemplatesResponse.parse(rules!.body).provider).toBe(p);
      expect(rules!.body).toEqual(
        JSON.parse(JSON.stringify({ provider: p, ...ruleTemplates(p, fx.mock.url) })),
      );
      expect(GuardTemplatesResponse.parse(guards!.body).provider).toBe(p);
      expect(guards!.body).toEqual(
        JSON.parse(JSON.stringify({ provider: p, guards: guardTemplates(p, fx.mock.url) })),
      );
    },
  );

  it.each(['code_host', 'issues', 'llm_a', 'nope', 'SUITE_A', 'constructor', '__proto__', 'suite_a%00'])(
    'a provider without templates (%s) is 404 {error, code} on every route',
    async (p) => {
      for (const path of paths(p)) {
        const r = await get(path);
        expect(r.status, r.text).toBe(404);
        expect(r.body).toMatchObject({ error: expect.any(String), code: 'NOT_FOUND' });
        expect(r.text).not.toContain('constructor');
      }
    },
  );

  it('without credentials every route is 401', async () => {
    for (const path of paths('suite_a')) {
      const r = await get(path, {});
      expect(r.status, r.text).toBe(401);
      expect(r.body).toMatchObject({ error: expect.any(String) });
    }
  });

  it('an agent token is refused (401/403) on every route', async () => {
    for (const path of paths('suite_a')) {
      const r = await get(path, { authorization: `Bearer ${agentToken}` });
      expect([401, 403], r.text).toContain(r.status);
    }
  });

  it('the routes and their response shapes are in the OpenAPI document', async () => {
    const doc = expectStatus(await http('GET', `${fx.base}/docs/json`), 200).body as {
      paths: Record<string, { get?: { responses?: Record<string, unknown> } }>;
    };
    for (const path of [
      '/v1/templates/{provider}',
      '/v1/templates/{provider}/rules',
      '/v1/templates/{provider}/guards',
    ]) {
      expect(doc.paths[path]?.get?.responses?.['200'], path).toBeDefined();
      expect(doc.paths[path]?.get?.responses?.['404'], path).toBeDefined();
    }
  });

  it.each(TEMPLATE_PROVIDERS)(
    '%s: every allowlist template, preset, rule template and guard applies to a real policy',
    async (p) => {
      const policyId = policyOf[p];
      const put = (suffix: string, json: unknown) =>
        http('PUT', `${fx.base}/v1/policies/${policyId}${suffix}`, { headers: fx.admin.headers, json });
      const allow = AllowlistTemplatesResponse.parse((await get(`/v1/templates/${p}`)).body);
      const { presets, rules } = RuleTemplatesResponse.parse((await get(`/v1/templates/${p}/rules`)).body);
      const { guards } = GuardTemplatesResponse.parse((await get(`/v1/templates/${p}/guards`)).body);

      for (const t of allow.templates) {
        const r = await put('/allowlists', { allowlists: t.allowlists });
        expect(r.status, `${t.id}: ${r.text}`).toBe(200);
        expect(r.body.policy.allowlists, t.id).toEqual(t.allowlists);
      }
      for (const t of [...presets, ...rules, ...guards]) {
        const r = await put('/rules', { rules: t.rules });
        expect(r.status, `${t.id}: ${r.text}`).toBe(200);
        const back = expectStatus(await get(`/v1/policies/${policyId}/rules`), 200);
        expect(back.body.rules, t.id).toEqual(JSON.parse(JSON.stringify(t.rules)));
      }
      for (const preset of presets) {
        const r = await put('', preset.suggestedSettings);
        expect(r.status, `${preset.id}: ${r.text}`).toBe(200);
        expect(r.body.policy, preset.id).toMatchObject(preset.suggestedSettings);
      }
    },
  );
});
