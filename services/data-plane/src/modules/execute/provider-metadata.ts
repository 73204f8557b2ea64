/**
 * Provider metadata for an approval's reviewer (`requestDetails.emailMetadata`,
 * `chatBotMetadata`, `teamChatMetadata`): who a message goes to and what it says, read from the
 * request in the provider's own shape. A reviewer should not have to decode a base64url MIME
 * message, or find the recipients in a 10 MiB body that the approval keeps as a preview only
 * (ADR 0099), to know where an e-mail goes.
 *
 * Display only: nothing here decides anything, and a request this does not recognise simply
 * has no metadata. Bounded: a MIME message is read up to the end of its header block, at most
 * MAX_MIME_HEADER_BYTES; lists and strings are cut as the approval's preview cuts them.
 */
import PostalMime, { type Address } from 'postal-mime';
import { canonicalizeTarget, readBatch, type InspectedBody } from '@vlt/policy-engine';
import { cut, REVIEW_STRING_CHARS } from './review-copy.js';

/** The most of a MIME message read to find its header block. */
const MAX_MIME_HEADER_BYTES = 64 * 1024;
/** Recipients listed per field; more are counted. */
const MAX_RECIPIENTS = 100;
/** A message's text is shown up to this many characters. */
const MAX_TEXT_CHARS = 4 * 1024;

export interface EmailMetadata {
  to: string[];
  cc: string[];
  bcc: string[];
  subject: string | null;
}
export interface ChatBotMetadata {
  chatId: string;
  text: string | null;
}
export interface TeamChatMetadata {
  chatId: string | null;
  channelId: string | null;
  teamId: string | null;
  contentType: string;
  content: string | null;
}
export type ProviderMetadata =
  | { emailMetadata: EmailMetadata }
  | { chatBotMetadata: ChatBotMetadata }
  | { teamChatMetadata: TeamChatMetadata }
  | Record<string, never>;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown, max = REVIEW_STRING_CHARS): string | null =>
  typeof v === 'string' ? cut(v, max) : typeof v === 'number' ? String(v) : null;

const GMAIL_SEND = /\/gmail\/v1\/users\/[^/]+\/messages\/send$/;
const GMAIL_DRAFT = /\/gmail\/v1\/users\/[^/]+\/drafts(?:\/send)?$/;
const GRAPH_MAIL =
  /\/(?:me|users\/[^/]+)\/(?:sendMail|messages|messages\/[^/]+\/(?:reply|replyAll|forward))$/;
const TEAMS_CHANNEL = /\/teams\/([^/]+)\/channels\/([^/]+)\/messages(?:\/[^/]+\/replies)?$/;
const TEAMS_CHAT = /\/chats\/([^/]+)\/messages$/;

/** The providers whose requests can be messages this recognises (the cases below). */
const MESSAGE_PROVIDERS: ReadonlySet<string> = new Set(['suite_a', 'suite_b', 'chatbot_a', 'chatbot_b']);

/**
 * The metadata of a request to `provider`, sent to `href` with `body` (as the pipeline read it),
 * or nothing when the request is not a message this recognises. For a batch, the metadata of
 * its operation `batchOperation` (the one that needs the reviewer, ADR 0101), or of its first
 * operation that has some.
 */
export async function providerMetadata(
  provider: string,
  method: string,
  href: string,
  body: InspectedBody | undefined,
  batchOperation?: string,
): Promise<ProviderMetadata> {
  // Only messages carry metadata; an LLM batch of thousands of calls is not read again for none.
  if (!MESSAGE_PROVIDERS.has(provider)) return {};
  const target = canonicalizeTarget(href);
  const batch = target.ok && body ? readBatch(provider, method, target, body) : null;
  if (batch?.kind === 'batch') {
    const ops = batch.operations;
    const first = (op: { id: string }) => (op.id === batchOperation ? 0 : 1);
    for (const op of [...ops].sort((a, b) => first(a) - first(b))) {
      const found = await providerMetadata(provider, op.method, op.target.href, op.body);
      if (Object.keys(found).length > 0) return found;
    }
    return {};
  }
  // Reads carry no message; Telegram alone also sends with GET and its query (below).
  const write = method !== 'GET' && method !== 'DELETE';
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    return {};
  }
  const path = url.pathname;
  const fields = bodyFields(body);
  switch (provider) {
    case 'suite_a': {
      const raw = !write
        ? undefined
        : GMAIL_SEND.test(path)
          ? fields?.raw
          : GMAIL_DRAFT.test(path) && isObject(fields?.message)
            ? fields.message.raw
            : undefined;
      if (typeof raw !== 'string') return {};
      const emailMetadata = await mimeHeaders(raw);
      return emailMetadata ? { emailMetadata } : {};
    }
    case 'suite_b': {
      const team = TEAMS_CHANNEL.exec(path);
      const chat = TEAMS_CHAT.exec(path);
      if ((team || chat) && write) {
        const message = isObject(fields?.body) ? fields.body : {};
        return {
          teamChatMetadata: {
            teamId: team ? segment(team[1]!) : null,
            channelId: team ? segment(team[2]!) : null,
            chatId: chat ? segment(chat[1]!) : null,
            contentType: text(message.contentType) ?? 'text',
            content: text(message.content, MAX_TEXT_CHARS),
          },
        };
      }
      if (!GRAPH_MAIL.test(path) || !fields || !write) return {};
      const message = isObject(fields.message) ? fields.message : fields;
      return {
        emailMetadata: {
          // A forward may carry its recipients beside the message rather than in it.
          to: graphRecipients(message.toRecipients, message === fields ? undefined : fields.toRecipients),
          cc: graphRecipients(message.ccRecipients),
          bcc: graphRecipients(message.bccRecipients),
          subject: text(message.subject),
        },
      };
    }
    case 'chatbot_a': {
      // Telegram takes its parameters in the query as well as in the body.
      const chatId = text(fields?.chat_id) ?? url.searchParams.get('chat_id');
      if (chatId === null) return {};
      const said = fields?.text ?? fields?.caption ?? url.searchParams.get('text');
      return {
        chatBotMetadata: { chatId: cut(chatId, REVIEW_STRING_CHARS), text: text(said, MAX_TEXT_CHARS) },
      };
    }
    case 'chatbot_b': {
      const channel = text(fields?.channel) ?? url.searchParams.get('channel');
      if (channel === null || !write) return {};
      const said = fields?.text ?? url.searchParams.get('text');
      return {
        chatBotMetadata: { chatId: cut(channel, REVIEW_STRING_CHARS), text: text(said, MAX_TEXT_CHARS) },
      };
    }
    default:
      return {};
  }
}

/** A JSON object body, or a form's fields (first value of each). */
function bodyFields(body: InspectedBody | undefined): Json | null {
  if (body?.kind === 'json') return isObject(body.value) ? body.value : null;
  if (body?.kind === 'form') {
    const out: Json = {};
    for (const [name, values] of Object.entries(body.value)) {
      if (values[0] !== undefined) Object.defineProperty(out, name, { value: values[0], enumerable: true });
    }
    return out;
  }
  return null;
}

function segment(s: string): string {
  try {
    return cut(decodeURIComponent(s), REVIEW_STRING_CHARS);
  } catch {
    return cut(s, REVIEW_STRING_CHARS);
  }
}

/** Graph's `[{ emailAddress: { address } }]`, from each list given, bounded. */
function graphRecipients(...lists: unknown[]): string[] {
  const out: string[] = [];
  for (const list of lists) {
    if (!Array.isArray(list)) continue;
    for (const r of list) {
      const address = isObject(r) && isObject(r.emailAddress) ? text(r.emailAddress.address) : null;
      if (address !== null) out.push(address);
    }
  }
  return bounded(out);
}

function bounded(addresses: string[]): string[] {
  if (addresses.length <= MAX_RECIPIENTS) return addresses;
  return [...addresses.slice(0, MAX_RECIPIENTS), `… [${addresses.length - MAX_RECIPIENTS} more]`];
}

/**
 * To, Cc, Bcc and Subject of a base64url MIME message, read by postal-mime from the header
 * block alone: only as much of the message is decoded as reaches its first blank line.
 */
async function mimeHeaders(raw: string): Promise<EmailMetadata | null> {
  // Four base64 characters carry three bytes: decode just past the most a header block may be.
  const prefix = raw.slice(0, Math.ceil(((MAX_MIME_HEADER_BYTES + 4) * 4) / 3 / 4) * 4);
  const bytes = Buffer.from(prefix, 'base64url');
  const crlf = bytes.indexOf('\r\n\r\n');
  const lf = bytes.indexOf('\n\n');
  const end = crlf === -1 ? lf : lf === -1 ? crlf : Math.min(crlf, lf);
  if (end === -1 || end > MAX_MIME_HEADER_BYTES) return null;
  try {
    const email = await PostalMime.parse(Buffer.concat([bytes.subarray(0, end), Buffer.from('\r\n\r\n')]));
    return {
      to: mailboxes(email.to),
      cc: mailboxes(email.cc),
      bcc: mailboxes(email.bcc),
      subject: email.subject === undefined ? null : cut(email.subject, REVIEW_STRING_CHARS),
    };
  } catch {
    return null;
  }
}

function mailboxes(list: Address[] | undefined): string[] {
  const out: string[] = [];
  for (const a of list ?? []) {
    if ('group' in a && Array.isArray(a.group)) {
      for (const m of a.group) if (m.address) out.push(cut(m.address, REVIEW_STRING_CHARS));
    } else if ('address' in a && a.address) out.push(cut(a.address, REVIEW_STRING_CHARS));
  }
  return bounded(out);
}
