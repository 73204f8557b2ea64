/**
 * Policy templates (`GET /v1/templates/:provider{,/rules,/guards}`): ready-made allowlists, rule
 * presets, individual rules and contextual security guards for the providers an admin most
 * often binds agents to. Every template is a valid body for the policy route it is meant for:
 *
 * - an allowlist template's `allowlists` for `PUT /v1/policies/:id/allowlists`;
 * - a preset's, a rule template's and a guard's `rules` for `PUT /v1/policies/:id/rules`;
 * - a preset's `suggestedSettings` for `PUT /v1/policies/:id`.
 *
 * The PUT routes replace what they set, so applying a template replaces the policy's list; a
 * client that wants several guards at once concatenates their `rules.request` (deny rules first:
 * the first matching rule decides, see docs/policy-engine.md).
 *
 * Allowlists are built on the API URL the deployment configured for the provider (the catalog's
 * default when none is), so they are correct for a proxied or regional endpoint too.
 *
 * How the rule patterns are written (request rules match the canonical path, unanchored, with
 * RE2; docs/decisions/0032):
 * - `deny` and `require_approval` rules are unanchored at the start (a base path in the API URL
 *   or an unusual prefix such as `/upload` still matches), case-insensitive (Graph, Telegram and
 *   others ignore case in method and segment names), and end a name at any character that
 *   cannot continue it, so `…/send`, `…/send()` and `…/send%28%29` all match. Reserved
 *   characters the canonicaliser leaves percent-encoded (`$`, `(`, `:`) are matched in both
 *   spellings. Matching more than intended only ever makes these rules stricter.
 * - `allow` rules, and the bot-chat method rules (the data plane sends a bot connection's
 *   requests nowhere else), are anchored at the start of the configured API URL's path, so an
 *   `allow` never opens more than it names.
 * - Conditions on the body only see JSON bodies. A body-conditioned `deny` is always followed,
 *   in the same guard, by a broader `require_approval` that catches what it cannot read.
 */
import { z } from 'zod';
import { SERVICES, defaultAllowlistFor, type ServiceSpec } from './catalog.js';
import {
  AllowlistEntry,
  DefaultMode,
  PolicyRules,
  StepUpApproval,
  type HttpMethod,
  type RequestRule,
  type ResponseRule,
} from './policy.js';

// ---------------------------------------------------------------------------------------------
// Providers and route parameters

export const TEMPLATE_PROVIDERS = ['suite_a', 'suite_b', 'chatbot_a', 'chatbot_b'] as const;
export const TemplateProvider = z.enum(TEMPLATE_PROVIDERS);
export type TemplateProvider = z.infer<typeof TemplateProvider>;

export function isTemplateProvider(p: string): p is TemplateProvider {
  return (TEMPLATE_PROVIDERS as readonly string[]).includes(p);
}

/** Any string: a provider without templates is a 404, not a 400. */
export const TemplateParams = z.object({
  provider: z.string().describe(`one of ${TEMPLATE_PROVIDERS.join(', ')}`),
});

// ---------------------------------------------------------------------------------------------
// Response schemas

export const TemplateAccess = z.enum(['read', 'write', 'read_write']);
export type TemplateAccess = z.infer<typeof TemplateAccess>;

export const AllowlistTemplate = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  serviceIds: z.array(z.string()).describe('catalog services the template covers'),
  access: TemplateAccess,
  suggestedDefaultMode: DefaultMode.describe(
    'the policy defaultMode the template is meant for (writes need read_write or custom)',
  ),
  allowlists: z
    .array(AllowlistEntry)
    .min(1)
    .describe('the body of PUT /v1/policies/:id/allowlists is { allowlists: <this> }'),
});
export type AllowlistTemplate = z.infer<typeof AllowlistTemplate>;

export const AllowlistTemplatesResponse = z.object({
  provider: TemplateProvider,
  apiUrl: z.string().describe("the provider's configured API URL, the base of every entry"),
  templates: z.array(AllowlistTemplate),
});
export type AllowlistTemplatesResponse = z.infer<typeof AllowlistTemplatesResponse>;

export const RuleTemplateKind = z.enum(['request', 'response']);
export type RuleTemplateKind = z.infer<typeof RuleTemplateKind>;

export const RuleTemplate = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  kind: RuleTemplateKind.describe('request rules decide, response rules filter and redact'),
  serviceIds: z.array(z.string()).describe('services the rule is written for; empty: any'),
  rules: PolicyRules.describe('the body of PUT /v1/policies/:id/rules is { rules: <this> }'),
});
export type RuleTemplate = z.infer<typeof RuleTemplate>;

export const RulePresetId = z.enum(['minimal', 'standard', 'strict']);
export type RulePresetId = z.infer<typeof RulePresetId>;

export const SuggestedPolicySettings = z
  .object({ defaultMode: DefaultMode, stepUpApproval: StepUpApproval })
  .describe('a valid body for PUT /v1/policies/:id; the preset is written for these settings');
export type SuggestedPolicySettings = z.infer<typeof SuggestedPolicySettings>;

export const RulePreset = z.object({
  id: RulePresetId,
  name: z.string(),
  description: z.string(),
  suggestedSettings: SuggestedPolicySettings,
  ruleIds: z.array(z.string()).describe('the rule templates it is made of, in order'),
  rules: PolicyRules.describe('the body of PUT /v1/policies/:id/rules is { rules: <this> }'),
});
export type RulePreset = z.infer<typeof RulePreset>;

export const RuleTemplatesResponse = z.object({
  provider: TemplateProvider,
  presets: z.array(RulePreset),
  rules: z.array(RuleTemplate),
});
export type RuleTemplatesResponse = z.infer<typeof RuleTemplatesResponse>;

export const GuardCategory = z.enum([
  'send_mail',
  'delete_mail',
  'mail_forwarding',
  'delete_files',
  'share_files',
  'calendar_events',
  'share_calendars',
  'delete_contacts',
  'post_messages',
  'edit_messages',
  'manage_members',
  'chat_settings',
  'bot_configuration',
  'external_sharing',
  'workspace_admin',
  'batch_requests',
]);
export type GuardCategory = z.infer<typeof GuardCategory>;

export const Guard = z.object({
  id: z.string(),
  category: GuardCategory,
  name: z.string(),
  description: z.string(),
  serviceIds: z.array(z.string()),
  ruleIds: z.array(z.string()).describe('the rule templates it is made of, in order'),
  rules: PolicyRules.describe(
    'request rules only (require_approval or deny); the body of PUT /v1/policies/:id/rules is { rules: <this> }',
  ),
});
export type Guard = z.infer<typeof Guard>;

export const GuardTemplatesResponse = z.object({
  provider: TemplateProvider,
  guards: z.array(Guard),
});
export type GuardTemplatesResponse = z.infer<typeof GuardTemplatesResponse>;

// ---------------------------------------------------------------------------------------------
// Pattern building blocks

const WRITES: HttpMethod[] = ['POST', 'PUT', 'PATCH', 'DELETE'];

/** Case-insensitive RE2. */
const ci = (source: string) => `(?i)${source}`;
/** Where a name ends: the end of the path or a character that cannot continue it. */
const END = '([^a-z0-9_]|$)';
/** Reserved characters the canonical path may carry either raw or percent-encoded. */
const DOLLAR = '(\\$|%24)';
const LPAREN = '(\\(|%28)';
const COLON = '(:|%3a)';
/** A key segment: `/id` or the OData form `('id')`. */
const KEY = `(/|${LPAREN})[^/]+`;
/** Graph bound actions may be namespace-qualified (`/send` or `/microsoft.graph.send`). */
const GRAPH_NS = '(microsoft\\.graph\\.)?';

function escapeRegex(s: string): string {
  return s.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
}

/** The path of the API URL, without a trailing slash ('' for an origin). */
function basePathOf(apiUrl: string): string {
  return new URL(apiUrl).pathname.replace(/\/+$/, '');
}

function request(
  label: string,
  action: RequestRule['action'],
  match: RequestRule['match'] = {},
): RequestRule {
  return { label, match, action };
}

function response(
  label: string,
  filter: ResponseRule['filter'],
  match: ResponseRule['match'] = {},
): ResponseRule {
  return { label, match, filter };
}

/** Every `prefix + field` pair, for field filters over several response shapes. */
function fieldsUnder(prefixes: string[], fields: string[]): string[] {
  return prefixes.flatMap((p) => fields.map((f) => `${p}${f}`));
}

// ---------------------------------------------------------------------------------------------
// Rule library: every individual rule template; guards and presets are made of these.

interface RuleDef {
  id: string;
  name: string;
  description: string;
  serviceIds: string[];
  request?: RequestRule[];
  response?: ResponseRule[];
}

function redactionRules(provider: TemplateProvider): RuleDef[] {
  return [
    {
      id: `${provider}.redact.contact_details`,
      name: 'Redact e-mail addresses and phone numbers',
      description:
        'Replaces e-mail addresses and phone numbers in every response with [REDACTED_EMAIL] and [REDACTED_PHONE].',
      serviceIds: [],
      response: [
        response('Redact e-mail addresses and phone numbers', {
          redact: [{ type: 'email' }, { type: 'phone' }],
        }),
      ],
    },
    {
      id: `${provider}.redact.financial`,
      name: 'Redact payment card and social security numbers',
      description:
        'Replaces Luhn-valid payment card numbers and US social security numbers in every response.',
      serviceIds: [],
      response: [
        response('Redact payment card and social security numbers', {
          redact: [{ type: 'credit_card' }, { type: 'ssn' }],
        }),
      ],
    },
    {
      id: `${provider}.redact.ip_addresses`,
      name: 'Redact IP addresses',
      description: 'Replaces IPv4 and IPv6 addresses in every response with [REDACTED_IP].',
      serviceIds: [],
      response: [response('Redact IP addresses', { redact: [{ type: 'ip_address' }] })],
    },
  ];
}

function writesNeedApproval(provider: TemplateProvider): RuleDef {
  return {
    id: `${provider}.writes.approve`,
    name: 'Every change needs approval',
    description:
      'Sends every POST, PUT, PATCH and DELETE to approval. Put it last: rules before it still decide first.',
    serviceIds: [],
    request: [request('Every other change needs approval', 'require_approval', { methods: WRITES })],
  };
}

function suiteARules(): RuleDef[] {
  const mail = ['suite_a-mail'];
  const drive = ['suite_a-drive'];
  const calendar = ['suite_a-calendar'];
  const gmail = '/gmail/v1/users/[^/]+';
  const files = '/drive/v[0-9]+';
  const cal = '/calendar/v3/calendars/[^/]+';
  const gmailContent = ['raw', 'snippet', 'data'].concat(
    ['payload', 'payload.parts', 'payload.parts.parts', 'payload.parts.parts.parts'].map(
      (p) => `${p}.body.data`,
    ),
  );
  return [
    {
      id: 'suite_a-mail.send.approve',
      name: 'Sending mail needs approval',
      description: 'Sending a message or a draft (also through the upload endpoint) needs approval.',
      serviceIds: mail,
      request: [
        request('Sending mail needs approval', 'require_approval', {
          urlPattern: ci(`${gmail}/(messages|drafts)/send${END}`),
        }),
      ],
    },
    {
      id: 'suite_a-mail.delete.deny',
      name: 'Permanently deleting mail is blocked',
      description:
        'Blocks deleting messages and threads for good, one by one or in bulk; moving them to the trash stays possible.',
      serviceIds: mail,
      request: [
        request('Permanently deleting mail is blocked', 'deny', {
          methods: ['DELETE'],
          urlPattern: ci(`${gmail}/(messages|threads)/[^/]+$`),
        }),
        request('Deleting mail in bulk is blocked', 'deny', {
          urlPattern: ci(`${gmail}/messages/batchdelete${END}`),
        }),
      ],
    },
    {
      id: 'suite_a-mail.trash.approve',
      name: 'Moving mail to the trash needs approval',
      description: 'Trashing a message or a thread needs approval.',
      serviceIds: mail,
      request: [
        request('Moving mail to the trash needs approval', 'require_approval', {
          urlPattern: ci(`${gmail}/(messages|threads)/[^/]+/trash${END}`),
        }),
      ],
    },
    {
      id: 'suite_a-mail.settings.deny',
      name: 'Changing mail settings is blocked',
      description:
        'Blocks changes to forwarding addresses, auto-forwarding, filters, delegates, send-as aliases and the other mail settings, and push-notification watches: each could send mail somewhere else for good.',
      serviceIds: mail,
      request: [
        request('Changing mail settings (forwarding, filters, delegates, send-as) is blocked', 'deny', {
          methods: WRITES,
          urlPattern: ci(`${gmail}/(settings|watch)${END}`),
        }),
      ],
    },
    {
      id: 'suite_a-mail.hide_content',
      name: 'Mail: hide message bodies and attachments',
      description:
        'Removes raw messages, snippets, body parts and attachment data from mail responses; headers, labels and ids stay.',
      serviceIds: mail,
      response: [
        response(
          'Hide message bodies and attachments',
          {
            denyFields: fieldsUnder(
              ['', 'messages.', 'message.', 'threads.', 'drafts.message.'],
              gmailContent,
            ),
          },
          { urlPattern: ci(`${gmail}/(messages|threads|drafts)${END}`) },
        ),
      ],
    },
    {
      id: 'suite_a-drive.delete.deny',
      name: 'Permanently deleting files is blocked',
      description:
        'Blocks deleting files and shared drives for good and emptying the trash; moving files to the trash stays possible.',
      serviceIds: drive,
      request: [
        request('Permanently deleting files or emptying the trash is blocked', 'deny', {
          methods: ['DELETE'],
          urlPattern: ci(`${files}/(files|drives|teamdrives)/[^/]+$`),
        }),
      ],
    },
    {
      id: 'suite_a-drive.trash.approve',
      name: 'Moving files to the trash needs approval',
      description: 'Setting `trashed` on a file (or the v2 trash call) needs approval.',
      serviceIds: drive,
      request: [
        request('Moving a file to the trash needs approval', 'require_approval', {
          methods: ['PATCH', 'PUT'],
          urlPattern: ci(`${files}/files/[^/]+$`),
          body: [{ path: 'trashed', op: 'matches', value: '(?i)^true$' }],
        }),
        request('Moving a file to the trash needs approval', 'require_approval', {
          urlPattern: ci(`${files}/files/[^/]+/trash${END}`),
        }),
      ],
    },
    {
      id: 'suite_a-drive.overwrite.approve',
      name: "Replacing a file's content needs approval",
      description:
        'Uploading new content over an existing file needs approval (its metadata, trashed included, travels in a body the rules cannot read).',
      serviceIds: drive,
      request: [
        request("Replacing a file's content needs approval", 'require_approval', {
          methods: ['PATCH', 'PUT'],
          urlPattern: ci(`/upload${files}/files/[^/]+$`),
        }),
      ],
    },
    {
      id: 'suite_a-drive.share.public.deny',
      name: 'Making files public is blocked',
      description: 'Blocks permissions for "anyone" (public or anyone-with-the-link sharing).',
      serviceIds: drive,
      request: [
        request('Making files public is blocked', 'deny', {
          methods: ['POST', 'PATCH', 'PUT'],
          urlPattern: ci(`${files}/(files|drives|teamdrives)/[^/]+/permissions${END}`),
          body: [{ path: 'type', op: 'matches', value: '(?i)^anyone$' }],
        }),
      ],
    },
    {
      id: 'suite_a-drive.share.owner.deny',
      name: 'Transferring file ownership is blocked',
      description: 'Blocks permissions that make someone else the owner of a file.',
      serviceIds: drive,
      request: [
        request('Transferring file ownership is blocked', 'deny', {
          methods: ['POST', 'PATCH', 'PUT'],
          urlPattern: ci(`${files}/(files|drives|teamdrives)/[^/]+/permissions${END}`),
          body: [{ path: 'role', op: 'matches', value: '(?i)^owner$' }],
        }),
      ],
    },
    {
      id: 'suite_a-drive.share.approve',
      name: 'Sharing files needs approval',
      description: 'Adding, changing or removing permissions and publishing a revision need approval.',
      serviceIds: drive,
      request: [
        request('Sharing files needs approval', 'require_approval', {
          methods: WRITES,
          urlPattern: ci(`${files}/(files|drives|teamdrives)/[^/]+/permissions${END}`),
        }),
        request('Publishing a document revision needs approval', 'require_approval', {
          methods: ['PATCH', 'PUT'],
          urlPattern: ci(`${files}/files/[^/]+/revisions/[^/]+$`),
        }),
      ],
    },
    {
      id: 'suite_a-calendar.events.approve',
      name: 'Creating or changing events needs approval',
      description: 'Creating, importing, moving or changing events needs approval: guests are e-mailed.',
      serviceIds: calendar,
      request: [
        request('Creating or changing events needs approval (guests are e-mailed)', 'require_approval', {
          methods: ['POST', 'PUT', 'PATCH'],
          urlPattern: ci(`${cal}/events${END}`),
        }),
      ],
    },
    {
      id: 'suite_a-calendar.events.delete.approve',
      name: 'Cancelling events needs approval',
      description: 'Deleting an event (which cancels it for every guest) needs approval.',
      serviceIds: calendar,
      request: [
        request('Cancelling or deleting events needs approval', 'require_approval', {
          methods: ['DELETE'],
          urlPattern: ci(`${cal}/events/[^/]+$`),
        }),
      ],
    },
    {
      id: 'suite_a-calendar.delete.deny',
      name: 'Deleting or clearing calendars is blocked',
      description: 'Blocks deleting a calendar and removing every event of it at once.',
      serviceIds: calendar,
      request: [
        request('Deleting a calendar is blocked', 'deny', {
          methods: ['DELETE'],
          urlPattern: ci(`${cal}$`),
        }),
        request('Clearing a calendar is blocked', 'deny', { urlPattern: ci(`${cal}/clear${END}`) }),
      ],
    },
    {
      id: 'suite_a-calendar.acl.deny',
      name: 'Sharing calendars is blocked',
      description: "Blocks changes to a calendar's access control list.",
      serviceIds: calendar,
      request: [
        request('Sharing calendars is blocked', 'deny', {
          methods: WRITES,
          urlPattern: ci(`${cal}/acl${END}`),
        }),
      ],
    },
    {
      id: 'suite_a-contacts.delete.approve',
      name: 'Deleting contacts needs approval',
      description: 'Deleting contacts, one by one or in bulk, and deleting contact groups need approval.',
      serviceIds: ['suite_a-contacts'],
      request: [
        request('Deleting contacts needs approval', 'require_approval', {
          urlPattern: ci(`/v1/people(/[^/]+)?${COLON}(deletecontact|batchdeletecontacts)${END}`),
        }),
        request('Deleting contact groups needs approval', 'require_approval', {
          methods: ['DELETE'],
          urlPattern: ci('/v1/contactgroups/[^/]+$'),
        }),
      ],
    },
    {
      id: 'suite_a-contacts.names_emails_only',
      name: 'Contacts: names and e-mail addresses only',
      description:
        'Keeps only names and e-mail addresses (and paging fields) in contact responses; phone numbers, addresses, birthdays and notes are dropped.',
      serviceIds: ['suite_a-contacts'],
      response: [
        response(
          'Contacts: names and e-mail addresses only',
          {
            allowFields: [
              ...fieldsUnder(
                ['', 'connections.', 'results.person.', 'responses.person.'],
                ['resourceName', 'etag', 'names', 'emailAddresses'],
              ),
              'nextPageToken',
              'nextSyncToken',
              'totalPeople',
              'totalItems',
            ],
          },
          { urlPattern: ci(`/v1/people${END}`) },
        ),
      ],
    },
    {
      id: 'suite_a.batch.deny',
      name: 'Batch requests are blocked',
      description:
        'Blocks the batch endpoint: a batch carries many requests in one body, which the vault does not read one by one (it refuses Google batches in any case).',
      serviceIds: [],
      request: [
        request('Batch requests are blocked (they hide each operation from the rules)', 'deny', {
          urlPattern: ci(`/batch${END}`),
        }),
      ],
    },
    writesNeedApproval('suite_a'),
    ...redactionRules('suite_a'),
  ];
}

function suiteBRules(): RuleDef[] {
  const mail = ['suite_b-mail'];
  const teams = ['suite_b-teams'];
  const drive = ['suite_b-drive'];
  const action = (names: string) => `/${GRAPH_NS}(${names})${END}`;
  const message = `/messages${KEY}`;
  const drives = '/drives?(/|\\(|%28|$)';
  const mailContent = ['body', 'uniqueBody', 'bodyPreview', 'contentBytes'];
  return [
    {
      id: 'suite_b-mail.send.approve',
      name: 'Sending mail needs approval',
      description: 'Sending mail, sending a draft, replying and forwarding need approval.',
      serviceIds: mail,
      request: [
        request('Sending, replying to or forwarding mail needs approval', 'require_approval', {
          urlPattern: ci(`(${action('sendmail')}|${message}${action('send|reply|replyall|forward')})`),
        }),
      ],
    },
    {
      id: 'suite_b-mail.delete.deny',
      name: 'Permanently deleting mail is blocked',
      description: 'Blocks deleting messages and mail folders for good.',
      serviceIds: mail,
      request: [
        request('Permanently deleting mail is blocked', 'deny', {
          urlPattern: ci(`/(messages|mailfolders|childfolders)${KEY}${action('permanentdelete')}`),
        }),
      ],
    },
    {
      id: 'suite_b-mail.delete.approve',
      name: 'Deleting mail needs approval',
      description: 'Deleting messages or folders and moving messages to Deleted Items need approval.',
      serviceIds: mail,
      request: [
        request('Deleting mail or mail folders needs approval', 'require_approval', {
          methods: ['DELETE'],
          urlPattern: ci(`/(messages|mailfolders|childfolders)${KEY}$`),
        }),
        request('Moving mail to Deleted Items needs approval', 'require_approval', {
          urlPattern: ci(`${message}${action('move')}`),
          body: [{ path: 'destinationId', op: 'matches', value: '(?i)^deleteditems$' }],
        }),
      ],
    },
    {
      id: 'suite_b-mail.settings.deny',
      name: 'Changing inbox rules and mailbox settings is blocked',
      description:
        'Blocks inbox rules (which can forward mail elsewhere for good), mailbox settings and the focused-inbox overrides.',
      serviceIds: mail,
      request: [
        request('Changing inbox rules, forwarding or mailbox settings is blocked', 'deny', {
          methods: WRITES,
          urlPattern: ci(`/(messagerules|mailboxsettings|inferenceclassification)${END}`),
        }),
      ],
    },
    {
      id: 'suite_b-mail.hide_content',
      name: 'Mail: hide message bodies and attachments',
      description:
        'Removes message bodies, previews and attachment content from mail responses; subjects, senders and ids stay.',
      serviceIds: mail,
      response: [
        response(
          'Hide message bodies and attachments',
          { denyFields: fieldsUnder(['', 'value.'], mailContent) },
          { urlPattern: ci(`/(me|users${KEY})/(mailfolders${KEY}/.*)?(messages|attachments)${END}`) },
        ),
      ],
    },
    {
      id: 'suite_b-teams.post.approve',
      name: 'Posting to a chat or channel needs approval',
      description:
        'Posting messages and replies in chats and channels and sending activity notifications need approval.',
      serviceIds: teams,
      request: [
        request('Posting to a chat or channel needs approval', 'require_approval', {
          methods: ['POST'],
          urlPattern: ci(`/(chats|teams)(/|\\(|%28).*/messages${END}`),
        }),
        request('Sending activity notifications needs approval', 'require_approval', {
          urlPattern: ci(action('sendactivitynotification')),
        }),
      ],
    },
    {
      id: 'suite_b-teams.edit.approve',
      name: 'Editing or deleting posted messages needs approval',
      description: 'Changing or deleting a message that was already posted needs approval.',
      serviceIds: teams,
      request: [
        request('Editing or deleting a posted message needs approval', 'require_approval', {
          methods: ['PUT', 'PATCH', 'DELETE'],
          urlPattern: ci(`/(chats|teams)(/|\\(|%28).*${message}`),
        }),
        request('Deleting a posted message needs approval', 'require_approval', {
          urlPattern: ci(`${message}${action('softdelete|undosoftdelete')}`),
        }),
      ],
    },
    {
      id: 'suite_b-teams.members.approve',
      name: 'Managing chats, channels and members needs approval',
      description:
        'Adding or removing members, starting chats and creating, changing or deleting channels need approval.',
      serviceIds: teams,
      request: [
        request('Adding or removing chat and team members needs approval', 'require_approval', {
          methods: WRITES,
          urlPattern: ci(`/(chats|teams|channels)${KEY}/members${END}`),
        }),
        request('Starting a new chat needs approval', 'require_approval', {
          methods: ['POST'],
          urlPattern: ci('/chats$'),
        }),
        request('Creating, changing or deleting channels needs approval', 'require_approval', {
          methods: WRITES,
          urlPattern: ci(`/teams${KEY}/channels(${KEY})?$`),
        }),
      ],
    },
    {
      id: 'suite_b-drive.delete.deny',
      name: 'Permanently deleting files is blocked',
      description: 'Blocks deleting files for good; deleting to the recycle bin is a separate rule.',
      serviceIds: drive,
      request: [
        request('Permanently deleting files is blocked', 'deny', {
          urlPattern: ci(`${drives}.*${action('permanentdelete')}`),
        }),
      ],
    },
    {
      id: 'suite_b-drive.delete.approve',
      name: 'Deleting files needs approval',
      description: 'Every DELETE on the drive (files go to the recycle bin) needs approval.',
      serviceIds: drive,
      request: [
        request('Deleting files needs approval', 'require_approval', {
          methods: ['DELETE'],
          urlPattern: ci(drives),
        }),
      ],
    },
    {
      id: 'suite_b-drive.share.public.deny',
      name: 'Anonymous sharing links are blocked',
      description: 'Blocks sharing links that work for anyone without signing in.',
      serviceIds: drive,
      request: [
        request('Anonymous sharing links are blocked', 'deny', {
          urlPattern: ci(`${drives}.*${action('createlink')}`),
          body: [{ path: 'scope', op: 'matches', value: '(?i)^anonymous$' }],
        }),
      ],
    },
    {
      id: 'suite_b-drive.share.approve',
      name: 'Sharing files needs approval',
      description: 'Inviting people, creating sharing links and changing permissions need approval.',
      serviceIds: drive,
      request: [
        request('Sharing files needs approval', 'require_approval', {
          urlPattern: ci(`${drives}.*${action('invite|createlink|grant')}`),
        }),
        request('Changing file permissions needs approval', 'require_approval', {
          methods: WRITES,
          urlPattern: ci(`${drives}.*/permissions${END}`),
        }),
      ],
    },
    {
      id: 'suite_b.batch.deny',
      name: 'Batch requests are blocked',
      description:
        'Blocks JSON batching ($batch): the vault judges each operation of a batch, but one blocked batch keeps every operation a request of its own, audited apart.',
      serviceIds: [],
      request: [
        request('Batch requests are blocked (each operation goes as a request of its own)', 'deny', {
          urlPattern: ci(`/${DOLLAR}batch${END}`),
        }),
      ],
    },
    writesNeedApproval('suite_b'),
    ...redactionRules('suite_b'),
  ];
}

function chatbotARules(apiUrl: string): RuleDef[] {
  const svc = ['chatbot_a'];
  const base = escapeRegex(basePathOf(apiUrl));
  // The method is the first segment under the API URL's path: the data plane refuses any other
  // target of a bot connection, so these rules are anchored there.
  const method = (names: string) => ci(`^${base}/(${names})${END}`);
  return [
    {
      id: 'chatbot_a.send.approve',
      name: 'Sending messages needs approval',
      description:
        'Every send… method (messages, media, polls, the typing indicator), forwarding, copying, inline answers and stories need approval, whatever the HTTP method.',
      serviceIds: svc,
      request: [
        request('Sending, forwarding or copying messages needs approval', 'require_approval', {
          urlPattern: method('(send|forward|copy)[a-z]*|answer(inlinequery|webappquery)|poststory'),
        }),
      ],
    },
    {
      id: 'chatbot_a.edit.approve',
      name: 'Editing or deleting messages needs approval',
      description:
        'Editing or deleting messages and stories and stopping live locations or polls need approval.',
      serviceIds: svc,
      request: [
        request('Editing or deleting messages needs approval', 'require_approval', {
          urlPattern: method('(edit|delete)(message|story)[a-z]*|stopmessagelivelocation|stoppoll'),
        }),
      ],
    },
    {
      id: 'chatbot_a.members.deny',
      name: 'Moderating members and invite links is blocked',
      description:
        'Blocks banning, restricting or promoting members, changing chat permissions, handling join requests and every invite-link method.',
      serviceIds: svc,
      request: [
        request('Banning, restricting or promoting members is blocked', 'deny', {
          urlPattern: method(
            '(ban|unban|restrict|promote|kick)chat[a-z]*|setchatpermissions|setchatadministratorcustomtitle|(approve|decline)chatjoinrequest',
          ),
        }),
        request('Creating or changing invite links is blocked', 'deny', {
          urlPattern: method('[a-z]*invitelink'),
        }),
      ],
    },
    {
      id: 'chatbot_a.chat_settings.approve',
      name: 'Changing chats needs approval',
      description: "Changing a chat's title, photo, description or pins, and leaving it, need approval.",
      serviceIds: svc,
      request: [
        request(
          'Changing a chat (title, photo, description, pins) or leaving it needs approval',
          'require_approval',
          {
            urlPattern: method('(set|delete)chat[a-z]*|(un)?pin[a-z]*|leavechat'),
          },
        ),
      ],
    },
    {
      id: 'chatbot_a.bot_config.deny',
      name: "Changing the bot's configuration is blocked",
      description:
        "Blocks setting or deleting the webhook (which would send every update elsewhere), changing the bot's commands, name, description or rights, and logging it out.",
      serviceIds: svc,
      request: [
        request("Changing the bot's webhook, profile or commands, or logging it out, is blocked", 'deny', {
          urlPattern: method('setwebhook|deletewebhook|logout|close|(set|delete|remove)my[a-z]*'),
        }),
      ],
    },
    {
      id: 'chatbot_a.reads.allow',
      name: 'Reading needs no approval',
      description:
        'Allows the get… methods (getMe, getUpdates, getChat, …) with any HTTP method, so polling with POST works under risk-based step-up.',
      serviceIds: svc,
      request: [
        request('Reading (get… methods) is allowed', 'allow', { urlPattern: ci(`^${base}/get[a-z]*$`) }),
      ],
    },
    {
      id: 'chatbot_a.everything_else.approve',
      name: 'Every other bot method needs approval',
      description: 'Sends every request no earlier rule decided to approval, reads included. Put it last.',
      serviceIds: svc,
      request: [request('Every other bot method needs approval', 'require_approval')],
    },
    {
      id: 'chatbot_a.updates.hide_shared_details',
      name: 'Updates: drop shared contacts and locations',
      description: 'Removes contacts, locations and venues users shared from getUpdates results.',
      serviceIds: svc,
      response: [
        response(
          'Drop shared contacts and locations from updates',
          { denyFields: fieldsUnder(['result.*.'], ['contact', 'location', 'venue']) },
          { urlPattern: method('getupdates') },
        ),
      ],
    },
    ...redactionRules('chatbot_a'),
  ];
}

function chatbotBRules(apiUrl: string): RuleDef[] {
  const svc = ['chatbot_b'];
  const base = escapeRegex(basePathOf(apiUrl));
  const method = (names: string) => ci(`/api/(${names})${END}`);
  return [
    {
      id: 'chatbot_b.post.approve',
      name: 'Posting to a channel needs approval',
      description:
        'Posting, scheduling and ephemeral messages and sharing files to channels need approval, whatever the HTTP method.',
      serviceIds: svc,
      request: [
        request('Posting messages or files needs approval', 'require_approval', {
          urlPattern: method(
            'chat\\.(postmessage|postephemeral|schedulemessage|memessage)|files\\.(upload|uploadv2|completeuploadexternal|share|remote\\.share)',
          ),
        }),
      ],
    },
    {
      id: 'chatbot_b.edit.approve',
      name: 'Editing or deleting messages and files needs approval',
      description: 'Updating or deleting messages, scheduled messages and files need approval.',
      serviceIds: svc,
      request: [
        request('Editing or deleting messages and files needs approval', 'require_approval', {
          urlPattern: method(
            'chat\\.(update|delete|deletescheduledmessage)|files\\.(delete|remote\\.remove)',
          ),
        }),
      ],
    },
    {
      id: 'chatbot_b.channels.approve',
      name: 'Managing channels and members needs approval',
      description:
        'Creating, renaming, archiving, joining or leaving channels, opening direct messages and inviting or removing members need approval.',
      serviceIds: svc,
      request: [
        request('Managing channels or their members needs approval', 'require_approval', {
          urlPattern: method(
            'conversations\\.(create|archive|unarchive|rename|settopic|setpurpose|invite|kick|join|leave|open|close)',
          ),
        }),
      ],
    },
    {
      id: 'chatbot_b.external.deny',
      name: 'Sharing outside the workspace is blocked',
      description: 'Blocks shared-channel invitations (Slack Connect) and public file links.',
      serviceIds: svc,
      request: [
        request('Sharing channels or files outside the workspace is blocked', 'deny', {
          urlPattern: method(
            'conversations\\.(inviteshared|acceptsharedinvite|approvesharedinvite)|files\\.sharedpublicurl',
          ),
        }),
      ],
    },
    {
      id: 'chatbot_b.admin.deny',
      name: 'Workspace administration is blocked',
      description:
        "Blocks admin methods, revoking the bot's token, uninstalling the app, OAuth methods, user-group changes and profile changes.",
      serviceIds: svc,
      request: [
        request('Workspace administration, app and token changes are blocked', 'deny', {
          urlPattern: method(
            'admin\\.[a-z.]*|auth\\.revoke|apps\\.uninstall|oauth\\.[a-z.]*|usergroups\\.(create|update|disable|enable|users\\.update)|users\\.(profile\\.set|setphoto|deletephoto)',
          ),
        }),
      ],
    },
    {
      id: 'chatbot_b.reads.allow',
      name: 'Reading needs no approval',
      description:
        'Allows the list, history, replies, info, members and test methods with any HTTP method, so reads sent as POST work under risk-based step-up.',
      serviceIds: svc,
      request: [
        request('Reading (list, history, info… methods) is allowed', 'allow', {
          urlPattern: ci(`^${base}/api/[a-z.]*\\.(list|history|replies|info|members|test)$`),
        }),
      ],
    },
    {
      id: 'chatbot_b.everything_else.approve',
      name: 'Every other method needs approval',
      description: 'Sends every request no earlier rule decided to approval, reads included. Put it last.',
      serviceIds: svc,
      request: [request('Every other method needs approval', 'require_approval')],
    },
    {
      id: 'chatbot_b.users.hide_contact_fields',
      name: 'User profiles: hide e-mail addresses and phone numbers',
      description: 'Removes e-mail addresses and phone numbers from user and profile responses.',
      serviceIds: svc,
      response: [
        response(
          'Hide e-mail addresses and phone numbers in user profiles',
          {
            denyFields: fieldsUnder(['profile.', 'user.profile.', 'members.profile.'], ['email', 'phone']),
          },
          { urlPattern: method('users\\.[a-z.]*') },
        ),
      ],
    },
    ...redactionRules('chatbot_b'),
  ];
}

function ruleLibrary(provider: TemplateProvider, apiUrl: string): RuleDef[] {
  switch (provider) {
    case 'suite_a':
      return suiteARules();
    case 'suite_b':
      return suiteBRules();
    case 'chatbot_a':
      return chatbotARules(apiUrl);
    case 'chatbot_b':
      return chatbotBRules(apiUrl);
  }
}

// ---------------------------------------------------------------------------------------------
// Guards and presets: lists of rule template ids, in evaluation order.

interface GuardDef {
  category: GuardCategory;
  name: string;
  description: string;
  ruleIds: string[];
}

const GUARDS: Record<TemplateProvider, GuardDef[]> = {
  suite_a: [
    {
      category: 'send_mail',
      name: 'Sending mail',
      description: 'Every message or draft sent needs approval.',
      ruleIds: ['suite_a-mail.send.approve'],
    },
    {
      category: 'delete_mail',
      name: 'Deleting mail',
      description: 'Permanent deletion is blocked; moving mail to the trash needs approval.',
      ruleIds: ['suite_a-mail.delete.deny', 'suite_a-mail.trash.approve'],
    },
    {
      category: 'mail_forwarding',
      name: 'Mail forwarding and settings',
      description:
        'Forwarding, filters, delegates, send-as aliases and other mail settings cannot be changed.',
      ruleIds: ['suite_a-mail.settings.deny'],
    },
    {
      category: 'delete_files',
      name: 'Deleting files',
      description:
        'Permanent deletion and emptying the trash are blocked; trashing a file or replacing its content needs approval.',
      ruleIds: [
        'suite_a-drive.delete.deny',
        'suite_a-drive.trash.approve',
        'suite_a-drive.overwrite.approve',
      ],
    },
    {
      category: 'share_files',
      name: 'Sharing files',
      description:
        'Public sharing and ownership transfers are blocked; every other permission change needs approval.',
      ruleIds: [
        'suite_a-drive.share.public.deny',
        'suite_a-drive.share.owner.deny',
        'suite_a-drive.share.approve',
      ],
    },
    {
      category: 'calendar_events',
      name: 'Changing calendar events',
      description: 'Creating, changing and cancelling events need approval.',
      ruleIds: ['suite_a-calendar.events.approve', 'suite_a-calendar.events.delete.approve'],
    },
    {
      category: 'share_calendars',
      name: 'Sharing and deleting calendars',
      description: 'Calendar sharing, deleting a calendar and clearing it are blocked.',
      ruleIds: ['suite_a-calendar.acl.deny', 'suite_a-calendar.delete.deny'],
    },
    {
      category: 'delete_contacts',
      name: 'Deleting contacts',
      description: 'Deleting contacts and contact groups needs approval.',
      ruleIds: ['suite_a-contacts.delete.approve'],
    },
    {
      category: 'batch_requests',
      name: 'Batch requests',
      description: 'The batch endpoint is blocked, so every operation passes the rules on its own.',
      ruleIds: ['suite_a.batch.deny'],
    },
  ],
  suite_b: [
    {
      category: 'send_mail',
      name: 'Sending mail',
      description: 'Sending, replying and forwarding need approval.',
      ruleIds: ['suite_b-mail.send.approve'],
    },
    {
      category: 'delete_mail',
      name: 'Deleting mail',
      description: 'Permanent deletion is blocked; deleting and moving to Deleted Items need approval.',
      ruleIds: ['suite_b-mail.delete.deny', 'suite_b-mail.delete.approve'],
    },
    {
      category: 'mail_forwarding',
      name: 'Inbox rules and mailbox settings',
      description: 'Inbox rules (forwarding) and mailbox settings cannot be changed.',
      ruleIds: ['suite_b-mail.settings.deny'],
    },
    {
      category: 'post_messages',
      name: 'Posting to a chat or channel',
      description: 'Every message, reply and activity notification needs approval.',
      ruleIds: ['suite_b-teams.post.approve'],
    },
    {
      category: 'edit_messages',
      name: 'Editing and deleting messages',
      description: 'Changing or deleting posted messages needs approval.',
      ruleIds: ['suite_b-teams.edit.approve'],
    },
    {
      category: 'manage_members',
      name: 'Managing chats, channels and members',
      description: 'Adding or removing members, starting chats and managing channels need approval.',
      ruleIds: ['suite_b-teams.members.approve'],
    },
    {
      category: 'delete_files',
      name: 'Deleting files',
      description: 'Permanent deletion is blocked; deleting to the recycle bin needs approval.',
      ruleIds: ['suite_b-drive.delete.deny', 'suite_b-drive.delete.approve'],
    },
    {
      category: 'share_files',
      name: 'Sharing files',
      description: 'Anonymous links are blocked; every other sharing change needs approval.',
      ruleIds: ['suite_b-drive.share.public.deny', 'suite_b-drive.share.approve'],
    },
    {
      category: 'batch_requests',
      name: 'Batch requests',
      description: 'JSON batching is blocked, so every operation passes the rules on its own.',
      ruleIds: ['suite_b.batch.deny'],
    },
  ],
  chatbot_a: [
    {
      category: 'post_messages',
      name: 'Sending messages',
      description: 'Every message the bot sends, forwards or copies needs approval.',
      ruleIds: ['chatbot_a.send.approve'],
    },
    {
      category: 'edit_messages',
      name: 'Editing and deleting messages',
      description: 'Editing or deleting messages needs approval.',
      ruleIds: ['chatbot_a.edit.approve'],
    },
    {
      category: 'manage_members',
      name: 'Moderating members',
      description: 'Bans, restrictions, promotions, join requests and invite links are blocked.',
      ruleIds: ['chatbot_a.members.deny'],
    },
    {
      category: 'chat_settings',
      name: 'Changing chats',
      description: 'Changing titles, photos, descriptions and pins, and leaving chats, need approval.',
      ruleIds: ['chatbot_a.chat_settings.approve'],
    },
    {
      category: 'bot_configuration',
      name: "Changing the bot's configuration",
      description: 'The webhook, commands, profile and log-out methods are blocked.',
      ruleIds: ['chatbot_a.bot_config.deny'],
    },
  ],
  chatbot_b: [
    {
      category: 'post_messages',
      name: 'Posting to a channel',
      description: 'Every message and file shared to a channel needs approval.',
      ruleIds: ['chatbot_b.post.approve'],
    },
    {
      category: 'edit_messages',
      name: 'Editing and deleting messages',
      description: 'Updating or deleting messages and files needs approval.',
      ruleIds: ['chatbot_b.edit.approve'],
    },
    {
      category: 'manage_members',
      name: 'Managing channels and members',
      description:
        'Creating, archiving, joining or leaving channels and inviting or removing members need approval.',
      ruleIds: ['chatbot_b.channels.approve'],
    },
    {
      category: 'external_sharing',
      name: 'Sharing outside the workspace',
      description: 'Shared-channel invitations and public file links are blocked.',
      ruleIds: ['chatbot_b.external.deny'],
    },
    {
      category: 'workspace_admin',
      name: 'Workspace administration',
      description: 'Admin methods, token revocation, app removal and profile or group changes are blocked.',
      ruleIds: ['chatbot_b.admin.deny'],
    },
  ],
};

interface PresetDef {
  ruleIds: string[];
  settings: SuggestedPolicySettings;
}

const UNATTENDED: SuggestedPolicySettings = { defaultMode: 'read_write', stepUpApproval: 'never' };
const RISK_BASED: SuggestedPolicySettings = { defaultMode: 'read_write', stepUpApproval: 'risk_based' };

const PRESET_TEXT: Record<RulePresetId, { name: string; description: string }> = {
  minimal: {
    name: 'Minimal',
    description:
      'Blocks only what no agent should do (settings that redirect data elsewhere for good, public sharing, administration). Everything else follows the policy settings.',
  },
  standard: {
    name: 'Standard',
    description:
      'Minimal, plus: permanent deletion blocked, and sending, sharing and deleting need approval while other changes run unattended. Payment card and social security numbers are redacted.',
  },
  strict: {
    name: 'Strict',
    description:
      'Standard, plus: every other change needs approval, and e-mail addresses, phone numbers and IP addresses are redacted from responses.',
  },
};

function presets(provider: TemplateProvider): Record<RulePresetId, PresetDef> {
  const p = provider;
  const redactStrict = [`${p}.redact.contact_details`, `${p}.redact.financial`, `${p}.redact.ip_addresses`];
  switch (provider) {
    case 'suite_a': {
      const minimal = [
        'suite_a-mail.settings.deny',
        'suite_a-drive.share.public.deny',
        'suite_a-drive.share.owner.deny',
        'suite_a-calendar.acl.deny',
        'suite_a.batch.deny',
      ];
      const standard = [
        ...minimal,
        'suite_a-mail.delete.deny',
        'suite_a-drive.delete.deny',
        'suite_a-calendar.delete.deny',
        'suite_a-mail.send.approve',
        'suite_a-mail.trash.approve',
        'suite_a-drive.trash.approve',
        'suite_a-drive.overwrite.approve',
        'suite_a-drive.share.approve',
        'suite_a-calendar.events.approve',
        'suite_a-calendar.events.delete.approve',
        'suite_a-contacts.delete.approve',
      ];
      return {
        minimal: { ruleIds: minimal, settings: UNATTENDED },
        standard: { ruleIds: [...standard, 'suite_a.redact.financial'], settings: UNATTENDED },
        strict: { ruleIds: [...standard, 'suite_a.writes.approve', ...redactStrict], settings: RISK_BASED },
      };
    }
    case 'suite_b': {
      const minimal = ['suite_b-mail.settings.deny', 'suite_b-drive.share.public.deny', 'suite_b.batch.deny'];
      const standard = [
        ...minimal,
        'suite_b-mail.delete.deny',
        'suite_b-drive.delete.deny',
        'suite_b-mail.send.approve',
        'suite_b-mail.delete.approve',
        'suite_b-teams.post.approve',
        'suite_b-teams.edit.approve',
        'suite_b-teams.members.approve',
        'suite_b-drive.delete.approve',
        'suite_b-drive.share.approve',
      ];
      return {
        minimal: { ruleIds: minimal, settings: UNATTENDED },
        standard: { ruleIds: [...standard, 'suite_b.redact.financial'], settings: UNATTENDED },
        strict: { ruleIds: [...standard, 'suite_b.writes.approve', ...redactStrict], settings: RISK_BASED },
      };
    }
    case 'chatbot_a': {
      const minimal = ['chatbot_a.bot_config.deny', 'chatbot_a.members.deny'];
      // Sending stays unattended in `standard`: the chat ids are what to restrict
      // (provider constraints), as the catalog's action says.
      const standard = [...minimal, 'chatbot_a.edit.approve', 'chatbot_a.chat_settings.approve'];
      return {
        minimal: { ruleIds: minimal, settings: UNATTENDED },
        standard: { ruleIds: [...standard, 'chatbot_a.redact.financial'], settings: UNATTENDED },
        strict: {
          ruleIds: [
            ...minimal,
            'chatbot_a.send.approve',
            'chatbot_a.edit.approve',
            'chatbot_a.chat_settings.approve',
            'chatbot_a.reads.allow',
            'chatbot_a.everything_else.approve',
            'chatbot_a.updates.hide_shared_details',
            ...redactStrict,
          ],
          settings: RISK_BASED,
        },
      };
    }
    case 'chatbot_b': {
      const minimal = ['chatbot_b.admin.deny', 'chatbot_b.external.deny'];
      const standard = [
        ...minimal,
        'chatbot_b.post.approve',
        'chatbot_b.edit.approve',
        'chatbot_b.channels.approve',
      ];
      return {
        minimal: { ruleIds: minimal, settings: UNATTENDED },
        standard: { ruleIds: [...standard, 'chatbot_b.redact.financial'], settings: UNATTENDED },
        strict: {
          ruleIds: [
            ...standard,
            'chatbot_b.reads.allow',
            'chatbot_b.everything_else.approve',
            'chatbot_b.users.hide_contact_fields',
            ...redactStrict,
          ],
          settings: RISK_BASED,
        },
      };
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Builders

function toTemplate(d: RuleDef): RuleTemplate {
  const requestRules = d.request ?? [];
  return {
    id: d.id,
    name: d.name,
    description: d.description,
    kind: requestRules.length > 0 ? 'request' : 'response',
    serviceIds: [...d.serviceIds],
    rules: { request: structuredClone(requestRules), response: structuredClone(d.response ?? []) },
  };
}

function combine(library: Map<string, RuleTemplate>, ids: string[]): PolicyRules {
  const out: PolicyRules = { request: [], response: [] };
  for (const id of ids) {
    const t = library.get(id);
    if (!t) throw new Error(`template ${id} is not in the rule library`);
    out.request.push(...structuredClone(t.rules.request));
    out.response.push(...structuredClone(t.rules.response));
  }
  return out;
}

function servicesOf(library: Map<string, RuleTemplate>, ids: string[]): string[] {
  return [...new Set(ids.flatMap((id) => library.get(id)?.serviceIds ?? []))];
}

/** The individual rule templates and the three presets for `provider`. */
export function ruleTemplates(
  provider: TemplateProvider,
  apiUrl: string,
): { presets: RulePreset[]; rules: RuleTemplate[] } {
  const rules = ruleLibrary(provider, apiUrl).map(toTemplate);
  const library = new Map(rules.map((r) => [r.id, r]));
  const defs = presets(provider);
  return {
    presets: RulePresetId.options.map((id) => ({
      id,
      ...PRESET_TEXT[id],
      suggestedSettings: { ...defs[id].settings },
      ruleIds: [...defs[id].ruleIds],
      rules: combine(library, defs[id].ruleIds),
    })),
    rules,
  };
}

/** The contextual security guards for `provider`, one per action category. */
export function guardTemplates(provider: TemplateProvider, apiUrl: string): Guard[] {
  const library = new Map(ruleLibrary(provider, apiUrl).map((d) => [d.id, toTemplate(d)]));
  return GUARDS[provider].map((g) => ({
    id: `${provider}.${g.category}`,
    category: g.category,
    name: g.name,
    description: g.description,
    serviceIds: servicesOf(library, g.ruleIds),
    ruleIds: [...g.ruleIds],
    rules: combine(library, g.ruleIds),
  }));
}

// ---------------------------------------------------------------------------------------------
// Allowlist templates

const SERVICE_NAMES: Record<string, string> = {
  'suite_a-mail': 'Mail',
  'suite_a-drive': 'Drive',
  'suite_a-calendar': 'Calendar',
  'suite_a-contacts': 'Contacts',
  'suite_b-mail': 'Mail',
  'suite_b-teams': 'Teams',
  'suite_b-drive': 'Drive',
  chatbot_a: 'Bot chat',
  chatbot_b: 'Team chat bot',
};

/** The catalog entries reduced to GET. */
function readOnly(entries: AllowlistEntry[]): AllowlistEntry[] {
  return entries
    .map((e) => ({ ...e, methods: e.methods.filter((m) => m === 'GET') }))
    .filter((e) => e.methods.length > 0);
}

function serviceTemplates(s: ServiceSpec, apiUrl: string): AllowlistTemplate[] {
  const name = SERVICE_NAMES[s.id] ?? s.name;
  const all = defaultAllowlistFor(s, apiUrl);
  return [
    {
      id: `${s.id}.read`,
      name: `${name}: read only`,
      description: `${s.description}: reading only (GET).`,
      serviceIds: [s.id],
      access: 'read',
      suggestedDefaultMode: 'read_only',
      allowlists: readOnly(all),
    },
    {
      id: `${s.id}.read_write`,
      name: `${name}: read and write`,
      description: `${s.description}: the catalog's default allowlist, reads and writes.`,
      serviceIds: [s.id],
      access: 'read_write',
      suggestedDefaultMode: 'read_write',
      allowlists: all,
    },
  ];
}

function extraTemplates(provider: TemplateProvider, apiUrl: string): AllowlistTemplate[] {
  const baseUrl = apiUrl.replace(/\/+$/, '');
  const entry = (methods: HttpMethod[], pathPatterns: string[]): AllowlistEntry => ({
    baseUrl,
    methods,
    pathPatterns,
  });
  const readAll = (): AllowlistTemplate => {
    const services = SERVICES.filter((s) => s.provider === provider);
    return {
      id: `${provider}.read_all`,
      name: 'Every service: read only',
      description: `Reading (GET) in ${services.map((s) => SERVICE_NAMES[s.id] ?? s.name).join(', ')}.`,
      serviceIds: services.map((s) => s.id),
      access: 'read',
      suggestedDefaultMode: 'read_only',
      allowlists: services.flatMap((s) => readOnly(defaultAllowlistFor(s, apiUrl))),
    };
  };
  switch (provider) {
    case 'suite_a':
      return [
        readAll(),
        {
          id: 'suite_a-mail.send_only',
          name: 'Mail: send only',
          description: 'Sending messages and reading the profile, without access to the mailbox.',
          serviceIds: ['suite_a-mail'],
          access: 'write',
          suggestedDefaultMode: 'read_write',
          allowlists: [
            entry(['GET'], ['/gmail/v1/users/me/profile']),
            entry(['POST'], ['/gmail/v1/users/me/messages/send']),
          ],
        },
      ];
    case 'suite_b':
      return [
        readAll(),
        {
          id: 'suite_b-mail.send_only',
          name: 'Mail: send only',
          description: 'Sending new messages, without access to the mailbox.',
          serviceIds: ['suite_b-mail'],
          access: 'write',
          suggestedDefaultMode: 'read_write',
          allowlists: [entry(['POST'], ['/v1.0/me/sendMail'])],
        },
      ];
    case 'chatbot_a':
      return [
        {
          id: 'chatbot_a.media',
          name: 'Bot chat: messages and media',
          description: 'The default allowlist plus sending and editing photos, documents, audio and video.',
          serviceIds: ['chatbot_a'],
          access: 'read_write',
          suggestedDefaultMode: 'read_write',
          allowlists: [
            entry(['GET', 'POST'], ['/getMe', '/getUpdates', '/getChat', '/getFile']),
            entry(
              ['POST'],
              [
                '/sendMessage',
                '/editMessageText',
                '/sendPhoto',
                '/sendDocument',
                '/sendAudio',
                '/sendVideo',
                '/sendVoice',
                '/sendAnimation',
                '/sendMediaGroup',
                '/editMessageCaption',
                '/editMessageMedia',
              ],
            ),
          ],
        },
      ];
    case 'chatbot_b':
      return [
        {
          id: 'chatbot_b.post_only',
          name: 'Team chat bot: post only',
          description: 'Posting messages as the bot, without reading channels.',
          serviceIds: ['chatbot_b'],
          access: 'write',
          suggestedDefaultMode: 'read_write',
          allowlists: [entry(['GET'], ['/api/auth.test']), entry(['POST'], ['/api/chat.postMessage'])],
        },
      ];
  }
}

/** Allowlist templates for `provider`, every entry on `apiUrl` (its configured API URL). */
export function allowlistTemplates(provider: TemplateProvider, apiUrl: string): AllowlistTemplate[] {
  const perService = SERVICES.filter((s) => s.provider === provider).flatMap((s) =>
    serviceTemplates(s, apiUrl),
  );
  return [...perService, ...extraTemplates(provider, apiUrl)];
}
