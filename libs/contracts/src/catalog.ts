/**
 * The provider and service catalog: the one place that says which services exist, how each is
 * connected (auth kind), whether a workspace may hold one or many, which scopes and allowlist a
 * new binding starts with, and how the data plane injects the credential. The control plane,
 * the data plane and the capabilities endpoint all read it from here.
 *
 * Endpoints are not here: they come from the environment (`VLT_<PROVIDER>_*`, see
 * `providerEndpoints` in @vlt/config), defaulting to the real provider.
 */
import type { AllowlistEntry } from './policy.js';

export type AuthKind = 'oauth' | 'bot_token' | 'api_key' | 'issue_tracker';

/** Where the data plane puts the credential on a brokered request. */
export type CredentialInjection =
  | { kind: 'bearer' }
  | { kind: 'header'; header: 'x-api-key' | 'x-goog-api-key' }
  /** `chatbot_a`: the token is a path segment (`/bot<token>/<method>`), never a header. */
  | { kind: 'bot_path' }
  | { kind: 'basic' };

export const PROVIDER_IDS = [
  'suite_a',
  'suite_b',
  'code_host',
  'notes',
  'board',
  'chatbot_a',
  'chatbot_b',
  'llm_a',
  'llm_b',
  'llm_c',
  'llm_d',
  'issues',
] as const;
export type ProviderId = (typeof PROVIDER_IDS)[number];

export interface ProviderDefaults {
  authorizeUrl?: string;
  tokenUrl?: string;
  /** RFC 7009 revocation endpoint, where the provider offers one. */
  revokeUrl?: string;
  apiUrl: string;
}

export interface ProviderSpec {
  id: ProviderId;
  name: string;
  authKind: AuthKind;
  injection: CredentialInjection;
  /** Environment prefix of its endpoints and OAuth app: `VLT_SUITE_A_TOKEN_URL`, … */
  envPrefix: string;
  /** The real provider; the issue tracker has none (each connection names its own site). */
  defaults: ProviderDefaults | null;
  /** Extra authorization-URL parameters the provider needs to hand out a refresh token. */
  authorizeParams?: Record<string, string>;
}

export interface ServiceSpec {
  id: string;
  provider: ProviderId;
  name: string;
  description: string;
  authKind: AuthKind;
  /** One connection per workspace; agents address it by service name. */
  singleton: boolean;
  defaultScopes: readonly string[];
  /** Model A (token vending) is possible: OAuth access tokens only (ADR 0042), never contacts (ADR 0045). */
  vendable: boolean;
  /** Allowlist of a new binding, relative to the provider's API URL (ADR 0007). */
  defaultAllowlist: ReadonlyArray<Omit<AllowlistEntry, 'baseUrl'>>;
}

const env = (id: ProviderId) => `VLT_${id.toUpperCase()}`;

export const PROVIDERS: Readonly<Record<ProviderId, ProviderSpec>> = {
  suite_a: {
    id: 'suite_a',
    name: 'Suite A',
    authKind: 'oauth',
    injection: { kind: 'bearer' },
    envPrefix: env('suite_a'),
    defaults: {
      authorizeUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
      tokenUrl: 'https://oauth2.googleapis.com/token',
      revokeUrl: 'https://oauth2.googleapis.com/revoke',
      apiUrl: 'https://www.googleapis.com',
    },
    authorizeParams: { access_type: 'offline', prompt: 'consent' },
  },
  suite_b: {
    id: 'suite_b',
    name: 'Suite B',
    authKind: 'oauth',
    injection: { kind: 'bearer' },
    envPrefix: env('suite_b'),
    defaults: {
      authorizeUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
      tokenUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
      apiUrl: 'https://graph.microsoft.com',
    },
  },
  code_host: {
    id: 'code_host',
    name: 'Code host',
    authKind: 'oauth',
    injection: { kind: 'bearer' },
    envPrefix: env('code_host'),
    defaults: {
      authorizeUrl: 'https://github.com/login/oauth/authorize',
      tokenUrl: 'https://github.com/login/oauth/access_token',
      apiUrl: 'https://api.github.com',
    },
  },
  notes: {
    id: 'notes',
    name: 'Notes',
    authKind: 'oauth',
    injection: { kind: 'bearer' },
    envPrefix: env('notes'),
    defaults: {
      authorizeUrl: 'https://api.notion.com/v1/oauth/authorize',
      tokenUrl: 'https://api.notion.com/v1/oauth/token',
      apiUrl: 'https://api.notion.com',
    },
    authorizeParams: { owner: 'user' },
  },
  board: {
    id: 'board',
    name: 'Boards',
    authKind: 'oauth',
    injection: { kind: 'bearer' },
    envPrefix: env('board'),
    defaults: {
      authorizeUrl: 'https://miro.com/oauth/authorize',
      tokenUrl: 'https://api.miro.com/v1/oauth/token',
      revokeUrl: 'https://api.miro.com/v2/oauth/revoke',
      apiUrl: 'https://api.miro.com',
    },
  },
  chatbot_a: {
    id: 'chatbot_a',
    name: 'Bot chat',
    authKind: 'bot_token',
    injection: { kind: 'bot_path' },
    envPrefix: env('chatbot_a'),
    defaults: { apiUrl: 'https://api.telegram.org' },
  },
  chatbot_b: {
    id: 'chatbot_b',
    name: 'Team chat',
    authKind: 'oauth',
    injection: { kind: 'bearer' },
    envPrefix: env('chatbot_b'),
    defaults: {
      authorizeUrl: 'https://slack.com/oauth/v2/authorize',
      tokenUrl: 'https://slack.com/api/oauth.v2.access',
      apiUrl: 'https://slack.com',
    },
  },
  llm_a: {
    id: 'llm_a',
    name: 'LLM A',
    authKind: 'api_key',
    injection: { kind: 'header', header: 'x-api-key' },
    envPrefix: env('llm_a'),
    defaults: { apiUrl: 'https://api.anthropic.com' },
  },
  llm_b: {
    id: 'llm_b',
    name: 'LLM B',
    authKind: 'api_key',
    injection: { kind: 'bearer' },
    envPrefix: env('llm_b'),
    defaults: { apiUrl: 'https://api.openai.com' },
  },
  llm_c: {
    id: 'llm_c',
    name: 'LLM C',
    authKind: 'api_key',
    injection: { kind: 'header', header: 'x-goog-api-key' },
    envPrefix: env('llm_c'),
    defaults: { apiUrl: 'https://generativelanguage.googleapis.com' },
  },
  llm_d: {
    id: 'llm_d',
    name: 'LLM D',
    authKind: 'api_key',
    injection: { kind: 'bearer' },
    envPrefix: env('llm_d'),
    defaults: { apiUrl: 'https://api.mistral.ai' },
  },
  issues: {
    id: 'issues',
    name: 'Issue tracker',
    authKind: 'issue_tracker',
    injection: { kind: 'basic' },
    envPrefix: env('issues'),
    defaults: null,
  },
};

const READ = ['GET'] as const;
const WRITE = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;

function oauthService(
  id: string,
  provider: ProviderId,
  name: string,
  description: string,
  defaultScopes: string[],
  allow: ServiceSpec['defaultAllowlist'],
  singleton = false,
  vendable = true,
): ServiceSpec {
  return {
    id,
    provider,
    name,
    description,
    authKind: 'oauth',
    singleton,
    defaultScopes,
    vendable,
    defaultAllowlist: allow,
  };
}

function apiKeyService(id: string, provider: ProviderId, name: string, paths: string[]): ServiceSpec {
  return {
    id,
    provider,
    name,
    description: `${name} through the gateway; the API key stays in the vault`,
    authKind: 'api_key',
    singleton: true,
    defaultScopes: [],
    vendable: false,
    defaultAllowlist: [{ methods: ['GET', 'POST'], pathPatterns: paths }],
  };
}

export const SERVICES: readonly ServiceSpec[] = [
  oauthService(
    'suite_a-mail',
    'suite_a',
    'Mail',
    'Read, label and send mail',
    ['https://www.googleapis.com/auth/gmail.modify'],
    [
      { methods: [...READ], pathPatterns: ['/gmail/v1/users/me/*'] },
      { methods: [...WRITE], pathPatterns: ['/gmail/v1/users/me/*'] },
    ],
  ),
  oauthService(
    'suite_a-drive',
    'suite_a',
    'Drive',
    'Files and folders',
    ['https://www.googleapis.com/auth/drive'],
    [
      { methods: [...READ], pathPatterns: ['/drive/v3/*'] },
      { methods: [...WRITE], pathPatterns: ['/drive/v3/*', '/upload/drive/v3/*'] },
    ],
  ),
  oauthService(
    'suite_a-calendar',
    'suite_a',
    'Calendar',
    'Calendars and events',
    ['https://www.googleapis.com/auth/calendar'],
    [
      { methods: [...READ], pathPatterns: ['/calendar/v3/*'] },
      { methods: [...WRITE], pathPatterns: ['/calendar/v3/*'] },
    ],
  ),
  oauthService(
    'suite_a-contacts',
    'suite_a',
    'Contacts',
    'People and contact groups',
    ['https://www.googleapis.com/auth/contacts'],
    [
      {
        methods: [...READ],
        pathPatterns: [
          '/v1/people/*',
          '/v1/people:searchContacts',
          '/v1/people:batchGet',
          '/v1/contactGroups',
          '/v1/contactGroups/*',
        ],
      },
      { methods: [...WRITE], pathPatterns: ['/v1/people/*'] },
    ],
    false,
    // Brokered only (ADR 0045): a vended token would bypass the contact-field stripping.
    false,
  ),
  oauthService(
    'suite_b-mail',
    'suite_b',
    'Mail',
    'Mail of the signed-in account',
    ['offline_access', 'Mail.ReadWrite', 'Mail.Send'],
    [
      { methods: [...READ], pathPatterns: ['/v1.0/me/messages/*', '/v1.0/me/mailFolders/*'] },
      { methods: [...WRITE], pathPatterns: ['/v1.0/me/messages/*', '/v1.0/me/sendMail'] },
    ],
  ),
  oauthService(
    'suite_b-teams',
    'suite_b',
    'Teams',
    'Team chats and channels',
    ['offline_access', 'Chat.ReadWrite', 'ChannelMessage.Send', 'Team.ReadBasic.All'],
    [
      { methods: [...READ], pathPatterns: ['/v1.0/me/chats/*', '/v1.0/teams/*', '/v1.0/chats/*'] },
      { methods: ['POST'], pathPatterns: ['/v1.0/chats/*', '/v1.0/teams/*'] },
    ],
  ),
  oauthService(
    'suite_b-drive',
    'suite_b',
    'Drive',
    'Files of the signed-in account',
    ['offline_access', 'Files.ReadWrite'],
    [
      { methods: [...READ], pathPatterns: ['/v1.0/me/drive/*'] },
      { methods: [...WRITE], pathPatterns: ['/v1.0/me/drive/*'] },
    ],
  ),
  oauthService(
    'code_host-repos',
    'code_host',
    'Repositories',
    'Repositories, issues and pull requests',
    ['repo', 'read:user'],
    [
      { methods: [...READ], pathPatterns: ['/user', '/user/repos', '/repos/*', '/search/*'] },
      { methods: [...WRITE], pathPatterns: ['/repos/*'] },
    ],
  ),
  oauthService(
    'notes-pages',
    'notes',
    'Pages',
    'Pages and databases shared with the integration',
    [],
    [
      {
        methods: [...READ],
        pathPatterns: ['/v1/pages/*', '/v1/databases/*', '/v1/blocks/*', '/v1/users/me'],
      },
      {
        methods: ['POST', 'PATCH'],
        pathPatterns: ['/v1/pages', '/v1/pages/*', '/v1/search', '/v1/databases/*'],
      },
    ],
  ),
  oauthService(
    'board-boards',
    'board',
    'Boards',
    'Boards and their items',
    ['boards:read', 'boards:write'],
    [
      { methods: [...READ], pathPatterns: ['/v2/boards', '/v2/boards/*'] },
      { methods: [...WRITE], pathPatterns: ['/v2/boards/*'] },
    ],
  ),
  oauthService(
    'chatbot_b',
    'chatbot_b',
    'Team chat bot',
    'Post and read messages as the workspace bot',
    ['chat:write', 'channels:read', 'channels:history'],
    [
      {
        methods: [...READ],
        pathPatterns: ['/api/conversations.list', '/api/conversations.history', '/api/auth.test'],
      },
      { methods: ['POST'], pathPatterns: ['/api/chat.postMessage', '/api/chat.update'] },
    ],
    true,
  ),
  {
    id: 'chatbot_a',
    provider: 'chatbot_a',
    name: 'Bot chat',
    description: 'Send and read messages as a bot',
    authKind: 'bot_token',
    singleton: true,
    defaultScopes: [],
    vendable: false,
    // Paths are the bot method without the token (`/sendMessage`); the data plane inserts it.
    defaultAllowlist: [
      { methods: ['GET', 'POST'], pathPatterns: ['/getMe', '/getUpdates', '/getChat'] },
      { methods: ['POST'], pathPatterns: ['/sendMessage', '/editMessageText'] },
    ],
  },
  apiKeyService('llm_a-messages', 'llm_a', 'LLM A messages', [
    '/v1/messages',
    '/v1/messages/count_tokens',
    '/v1/models',
    '/v1/models/*',
  ]),
  apiKeyService('llm_b-chat', 'llm_b', 'LLM B chat', [
    '/v1/chat/completions',
    '/v1/responses',
    '/v1/embeddings',
    '/v1/models',
    '/v1/models/*',
  ]),
  apiKeyService('llm_c-generate', 'llm_c', 'LLM C generate', [
    '/v1beta/models',
    '/v1beta/models/*',
    '/v1/models',
    '/v1/models/*',
  ]),
  apiKeyService('llm_d-chat', 'llm_d', 'LLM D chat', [
    '/v1/chat/completions',
    '/v1/embeddings',
    '/v1/models',
  ]),
  {
    id: 'issues',
    provider: 'issues',
    name: 'Issue tracker',
    description: 'Issues and projects of one site (Model B only)',
    authKind: 'issue_tracker',
    singleton: false,
    defaultScopes: [],
    vendable: false,
    defaultAllowlist: [
      {
        methods: ['GET'],
        pathPatterns: [
          '/rest/api/3/myself',
          '/rest/api/3/search',
          '/rest/api/3/issue/*',
          '/rest/api/3/project',
        ],
      },
      { methods: ['POST', 'PUT', 'DELETE'], pathPatterns: ['/rest/api/3/issue', '/rest/api/3/issue/*'] },
    ],
  },
];

const SERVICE_BY_ID = new Map(SERVICES.map((s) => [s.id, s]));

export function serviceSpec(id: string): ServiceSpec | undefined {
  return SERVICE_BY_ID.get(id);
}

export function providerSpec(id: string): ProviderSpec | undefined {
  return (PROVIDERS as Record<string, ProviderSpec>)[id];
}

export const OAUTH_PROVIDERS: readonly ProviderId[] = PROVIDER_IDS.filter(
  (p) => PROVIDERS[p].authKind === 'oauth',
);

/** A binding's starting allowlist on the provider's API URL (or the issue tracker's site). */
export function defaultAllowlistFor(service: ServiceSpec, apiUrl: string): AllowlistEntry[] {
  const base = apiUrl.replace(/\/+$/, '');
  return service.defaultAllowlist.map(({ methods, pathPatterns }) => ({
    baseUrl: base,
    methods: [...methods],
    pathPatterns: [...pathPatterns],
  }));
}

/** What an agent can ask to be able to do (`request_capability`); one or more per service. */
export interface ActionTemplate {
  id: string;
  label: string;
  description: string;
  requiresApproval: boolean;
}

export type ServiceCategory =
  'email' | 'files' | 'calendar' | 'contacts' | 'chat' | 'code' | 'notes' | 'boards' | 'llm' | 'issues';

interface ServiceExtras {
  category: ServiceCategory;
  icon: string;
  actions: ActionTemplate[];
}

const act = (id: string, label: string, description: string, requiresApproval = false): ActionTemplate => ({
  id,
  label,
  description,
  requiresApproval,
});

const EXTRAS: Record<string, ServiceExtras> = {
  'suite_a-mail': {
    category: 'email',
    icon: 'mail',
    actions: [
      act('suite_a-mail.read', 'Read mail', 'Search and read messages'),
      act('suite_a-mail.send', 'Send mail', 'Send messages and replies', true),
    ],
  },
  'suite_a-drive': {
    category: 'files',
    icon: 'folder',
    actions: [
      act('suite_a-drive.read', 'Read files', 'List, search and download files'),
      act('suite_a-drive.write', 'Change files', 'Upload, edit and delete files', true),
    ],
  },
  'suite_a-calendar': {
    category: 'calendar',
    icon: 'calendar',
    actions: [
      act('suite_a-calendar.read', 'Read calendar', 'List calendars and events'),
      act('suite_a-calendar.write', 'Manage events', 'Create, move and cancel events', true),
    ],
  },
  'suite_a-contacts': {
    category: 'contacts',
    icon: 'contacts',
    actions: [
      act(
        'suite_a-contacts.read',
        'Read contacts',
        'Names and e-mail addresses; other personal fields need approval',
      ),
    ],
  },
  'suite_b-mail': {
    category: 'email',
    icon: 'mail',
    actions: [
      act('suite_b-mail.read', 'Read mail', 'Search and read messages'),
      act('suite_b-mail.send', 'Send mail', 'Send messages and replies', true),
    ],
  },
  'suite_b-teams': {
    category: 'chat',
    icon: 'chat',
    actions: [
      act('suite_b-teams.read', 'Read team chats', 'Read chats and channel messages'),
      act('suite_b-teams.post', 'Post in team chats', 'Post to chats and channels', true),
    ],
  },
  'suite_b-drive': {
    category: 'files',
    icon: 'folder',
    actions: [
      act('suite_b-drive.read', 'Read files', 'List, search and download files'),
      act('suite_b-drive.write', 'Change files', 'Upload, edit and delete files', true),
    ],
  },
  'code_host-repos': {
    category: 'code',
    icon: 'code',
    actions: [
      act('code_host-repos.read', 'Read repositories', 'Code, issues and pull requests'),
      act('code_host-repos.write', 'Change repositories', 'Comment, open issues and pull requests', true),
    ],
  },
  'notes-pages': {
    category: 'notes',
    icon: 'notes',
    actions: [
      act('notes-pages.read', 'Read pages', 'Search and read shared pages'),
      act('notes-pages.write', 'Edit pages', 'Create and update pages', true),
    ],
  },
  'board-boards': {
    category: 'boards',
    icon: 'board',
    actions: [
      act('board-boards.read', 'Read boards', 'Boards and their items'),
      act('board-boards.write', 'Edit boards', 'Create and change items', true),
    ],
  },
  chatbot_b: {
    category: 'chat',
    icon: 'chat',
    actions: [
      act('chatbot_b.post', 'Post as the team bot', 'Post and update messages in allowed channels', true),
    ],
  },
  chatbot_a: {
    category: 'chat',
    icon: 'bot',
    actions: [act('chatbot_a.send', 'Send bot messages', 'Send messages to allowed chats')],
  },
  'llm_a-messages': {
    category: 'llm',
    icon: 'sparkles',
    actions: [act('llm_a-messages.use', 'Use LLM A', 'Model calls through the vault')],
  },
  'llm_b-chat': {
    category: 'llm',
    icon: 'sparkles',
    actions: [act('llm_b-chat.use', 'Use LLM B', 'Model calls through the vault')],
  },
  'llm_c-generate': {
    category: 'llm',
    icon: 'sparkles',
    actions: [act('llm_c-generate.use', 'Use LLM C', 'Model calls through the vault')],
  },
  'llm_d-chat': {
    category: 'llm',
    icon: 'sparkles',
    actions: [act('llm_d-chat.use', 'Use LLM D', 'Model calls through the vault')],
  },
  issues: {
    category: 'issues',
    icon: 'issues',
    actions: [
      act('issues.read', 'Read issues', 'Search and read issues and projects'),
      act('issues.write', 'Change issues', 'Create and update issues', true),
    ],
  },
};

export function serviceExtras(id: string): ServiceExtras {
  return EXTRAS[id] ?? { category: 'issues', icon: 'plug', actions: [] };
}

/** Every action template with the service it belongs to. */
export function actionTemplates(): Array<ActionTemplate & { serviceId: string }> {
  return SERVICES.flatMap((s) => serviceExtras(s.id).actions.map((a) => ({ ...a, serviceId: s.id })));
}

export function actionTemplate(id: string): (ActionTemplate & { serviceId: string }) | undefined {
  return actionTemplates().find((a) => a.id === id);
}

/** A catalog service as `/v1/capabilities/services` shows it. */
export function catalogService(s: ServiceSpec) {
  const x = serviceExtras(s.id);
  return {
    id: s.id,
    name: s.name,
    provider: s.provider,
    icon: x.icon,
    category: x.category,
    description: s.description,
    authKind: s.authKind,
    singleton: s.singleton,
    defaultScopes: [...s.defaultScopes],
    actions: x.actions,
  };
}
