/**
 * Provider-specific constraints (step 5 of the pipeline) and their inbound counterparts, which
 * the response filter applies.
 *
 * An empty list never restricts. A non-empty list is enforced fail-closed: when the request
 * carries an identifier of that kind that is not listed, or when the body cannot be inspected
 * (neither JSON nor an urlencoded form), the request is denied.
 *
 * - chatbot_a (bot chat): every `chat_id` / `from_chat_id` in the query or anywhere in the body
 *   (including `reply_parameters.chat_id`) must be allowed. Inbound, `getUpdates` results are
 *   reduced to updates whose chat is allowed; an update whose chat cannot be determined is
 *   dropped.
 * - chatbot_b (workspace chat): every `channel`, `channel_id` or `channels` (comma list or
 *   array) in query or body must be an allowed channel, except direct-message channels (ids
 *   `D…`): a channel list bounds where the agent works in public, the user list bounds whom it
 *   hears. Inbound, message lists keep only messages whose `user` is allowed (messages without
 *   a user are dropped) and channel lists keep only allowed and direct-message channels.
 * - suite_b (enterprise suite, opt-in): ids are taken from URL segments after `chats`,
 *   `channels` and `tenants` (also the `chats('id')` key form) and from `chatId`, `channelId`
 *   and `tenantId` keys anywhere in the body; `$batch` requests are checked per sub-request.
 *   `primaryChannel` names a channel without an id and is refused when channels are restricted.
 *   Inbound, `value` lists drop items whose chat, channel or tenant is not allowed.
 */
import type { ProviderConstraints } from '@vlt/contracts';
import { isPlainObject } from './json-path.js';
import { GRAPH_BATCH_PATH } from './batch.js';

/** The request body as the pipeline sees it. */
export type InspectedBody =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown }
  | { kind: 'form'; value: Record<string, string[]> }
  | { kind: 'opaque' };

export interface ConstraintTarget {
  /** The path as rules match it (no trailing slash). */
  matchPath: string;
  /** Canonical query string including `?`, or ''. */
  search: string;
}

export type ConstraintResult = { ok: true } | { ok: false; reason: string };

const OK: ConstraintResult = { ok: true };

/** Values of the given keys anywhere in a JSON value (keys compared case-insensitively). */
function collectKeys(value: unknown, keys: ReadonlySet<string>, out: unknown[], depth = 0): void {
  if (depth > 64) {
    out.push(undefined);
    return;
  }
  if (Array.isArray(value)) {
    for (const el of value) collectKeys(el, keys, out, depth + 1);
  } else if (isPlainObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (keys.has(k.toLowerCase())) out.push(v);
      collectKeys(v, keys, out, depth + 1);
    }
  }
}

function idsFromQuery(search: string, keys: ReadonlySet<string>): string[] {
  const out: string[] = [];
  if (search === '') return out;
  for (const [k, v] of new URLSearchParams(search.slice(1))) if (keys.has(k.toLowerCase())) out.push(v);
  return out;
}

/** Ids named by `keys` in body and query; null when the body cannot be inspected. */
function requestIds(
  target: ConstraintTarget,
  body: InspectedBody,
  keys: ReadonlySet<string>,
): unknown[] | null {
  const found: unknown[] = idsFromQuery(target.search, keys);
  switch (body.kind) {
    case 'none':
      break;
    case 'json':
      collectKeys(body.value, keys, found);
      break;
    case 'form':
      for (const [k, vs] of Object.entries(body.value)) if (keys.has(k.toLowerCase())) found.push(...vs);
      break;
    case 'opaque':
      return null;
  }
  return found;
}

/** String form of an id value, or null when it is not a plain id (objects, fractions...). */
function idString(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  return null;
}

function checkIds(
  values: unknown[],
  allowed: { has(id: string): boolean },
  what: string,
  split = false,
): ConstraintResult {
  for (const v of values) {
    const list =
      split && typeof v === 'string'
        ? v.split(',').map((s) => s.trim())
        : Array.isArray(v) && split
          ? v
          : [v];
    for (const item of list) {
      const id = idString(item);
      if (id === null)
        return { ok: false, reason: `${what} value cannot be checked against the allowed list` };
      if (!allowed.has(id))
        return { ok: false, reason: `${what} ${id} is not allowed by the provider constraints` };
    }
  }
  return OK;
}

const CHAT_KEYS = new Set(['chat_id', 'from_chat_id']);
const CHANNEL_KEYS = new Set(['channel', 'channel_id', 'channels']);

function checkChatbotA(
  pc: Extract<ProviderConstraints, { provider: 'chatbot_a' }>,
  t: ConstraintTarget,
  body: InspectedBody,
) {
  if (pc.allowedChatIds.length === 0) return OK;
  const ids = requestIds(t, body, CHAT_KEYS);
  if (ids === null) return { ok: false as const, reason: 'request body cannot be inspected for chat ids' };
  return checkIds(ids, new Set(pc.allowedChatIds), 'chat');
}

function checkChatbotB(
  pc: Extract<ProviderConstraints, { provider: 'chatbot_b' }>,
  t: ConstraintTarget,
  body: InspectedBody,
) {
  if (pc.allowedChannelIds.length === 0) return OK;
  const ids = requestIds(t, body, CHANNEL_KEYS);
  if (ids === null) return { ok: false as const, reason: 'request body cannot be inspected for channel ids' };
  const allowed = new Set(pc.allowedChannelIds);
  return checkIds(
    ids,
    { has: (id: string) => allowed.has(id) || isDirectMessageChannel(id) },
    'channel',
    true,
  );
}

/** Workspace-chat direct-message channel ids (`D` + upper-case alphanumerics). */
export function isDirectMessageChannel(id: string): boolean {
  return /^D[A-Z0-9]{2,40}$/.test(id);
}

type SuiteBIds = { tenant: unknown[]; chat: unknown[]; channel: unknown[]; unnamedChannel: boolean };

const SEGMENT_KINDS: Record<string, keyof Omit<SuiteBIds, 'unnamedChannel'>> = {
  chats: 'chat',
  channels: 'channel',
  tenants: 'tenant',
};

function collectSuiteBPath(path: string, ids: SuiteBIds): boolean {
  const segs = path.split('/').filter((s) => s !== '');
  for (let i = 0; i < segs.length; i++) {
    let seg: string;
    try {
      seg = decodeURIComponent(segs[i]!);
    } catch {
      return false;
    }
    const keyed = /^([A-Za-z]+)\((?:'([^']*)'|([^)]*))\)$/.exec(seg);
    const name = (keyed ? keyed[1]! : seg).toLowerCase();
    if (name === 'primarychannel') ids.unnamedChannel = true;
    const kind = SEGMENT_KINDS[name];
    if (!kind) continue;
    if (keyed) {
      ids[kind].push(keyed[2] ?? keyed[3]);
    } else if (i + 1 < segs.length) {
      try {
        ids[kind].push(decodeURIComponent(segs[i + 1]!));
      } catch {
        return false;
      }
      i++;
    }
  }
  return true;
}

const SUITE_B_BODY_KEYS = { tenantid: 'tenant', chatid: 'chat', channelid: 'channel' } as const;

function collectSuiteBBody(value: unknown, ids: SuiteBIds): void {
  for (const [key, kind] of Object.entries(SUITE_B_BODY_KEYS)) {
    const found: unknown[] = [];
    collectKeys(value, new Set([key]), found);
    ids[kind].push(...found);
  }
}

function checkSuiteB(
  pc: Extract<ProviderConstraints, { provider: 'suite_b' }>,
  t: ConstraintTarget,
  body: InspectedBody,
) {
  const restricted = pc.allowedTenantIds.length + pc.allowedChatIds.length + pc.allowedChannelIds.length > 0;
  if (!restricted) return OK;
  const ids: SuiteBIds = { tenant: [], chat: [], channel: [], unnamedChannel: false };
  if (!collectSuiteBPath(t.matchPath, ids))
    return { ok: false as const, reason: 'request path cannot be inspected' };
  if (body.kind === 'opaque' || body.kind === 'form') {
    return { ok: false as const, reason: 'request body cannot be inspected for tenant, chat or channel ids' };
  }
  if (body.kind === 'json') {
    collectSuiteBBody(body.value, ids);
    // A batch carries whole requests in its body; each sub-request is checked like a request.
    if (GRAPH_BATCH_PATH.test(t.matchPath)) {
      const requests = isPlainObject(body.value) ? body.value.requests : undefined;
      if (!Array.isArray(requests)) return { ok: false as const, reason: 'batch body cannot be inspected' };
      for (const r of requests) {
        const url = isPlainObject(r) && typeof r.url === 'string' ? r.url : null;
        if (url === null) return { ok: false as const, reason: 'batch sub-request without a url' };
        const pathOnly = url.replace(/^https:\/\/[^/]+/i, '').split('?')[0]!;
        if (!collectSuiteBPath(pathOnly.startsWith('/') ? pathOnly : `/${pathOnly}`, ids)) {
          return { ok: false as const, reason: 'batch sub-request path cannot be inspected' };
        }
      }
    }
  }
  const checks: Array<[unknown[], string[], string]> = [
    [ids.tenant, pc.allowedTenantIds, 'tenant'],
    [ids.chat, pc.allowedChatIds, 'chat'],
    [ids.channel, pc.allowedChannelIds, 'channel'],
  ];
  for (const [values, allowed, what] of checks) {
    if (allowed.length === 0) continue;
    const r = checkIds(values, new Set(allowed), what);
    if (!r.ok) return r;
  }
  if (ids.unnamedChannel && pc.allowedChannelIds.length > 0) {
    return { ok: false as const, reason: 'primaryChannel cannot be checked against the allowed channels' };
  }
  return OK;
}

/** Step 5: outbound enforcement. `pc` must already belong to the connection's provider. */
export function checkProviderConstraints(
  pc: ProviderConstraints | null,
  target: ConstraintTarget,
  body: InspectedBody,
): ConstraintResult {
  if (!pc) return OK;
  switch (pc.provider) {
    case 'chatbot_a':
      return checkChatbotA(pc, target, body);
    case 'chatbot_b':
      return checkChatbotB(pc, target, body);
    case 'suite_b':
      return checkSuiteB(pc, target, body);
  }
}

// ------------------------------------------------------------------------------------ inbound

/** A pure transformation of a parsed JSON response; returns the input itself when unchanged. */
export type InboundFilter = (value: unknown) => unknown;

function filterArrayField(value: unknown, field: string, keep: (item: unknown) => boolean): unknown {
  if (!isPlainObject(value)) return value;
  const list = value[field];
  if (!Array.isArray(list)) return value;
  const kept = list.filter(keep);
  return kept.length === list.length ? value : { ...value, [field]: kept };
}

function get(value: unknown, ...path: string[]): unknown {
  let cur = value;
  for (const key of path) {
    if (!isPlainObject(cur) || !Object.hasOwn(cur, key)) return undefined;
    cur = cur[key];
  }
  return cur;
}

function lastSegment(path: string): string {
  const segs = path.split('/').filter((s) => s !== '');
  return segs.length ? segs[segs.length - 1]! : '';
}

/** The chat an update belongs to; a private chat's id equals its user's id. */
export function chatIdOfUpdate(update: unknown): string | null {
  if (!isPlainObject(update)) return null;
  for (const [key, v] of Object.entries(update)) {
    if (key === 'update_id' || !isPlainObject(v)) continue;
    const candidates = [
      get(v, 'chat', 'id'),
      get(v, 'message', 'chat', 'id'),
      get(v, 'voter_chat', 'id'),
      get(v, 'from', 'id'),
      get(v, 'user', 'id'),
    ];
    for (const c of candidates) {
      const id = idString(c);
      if (id !== null) return id;
    }
    return null;
  }
  return null;
}

function suiteBItemAllowed(
  item: unknown,
  pc: Extract<ProviderConstraints, { provider: 'suite_b' }>,
  listKind: 'chat' | 'channel' | null,
): boolean {
  const checks: Array<[unknown, string[]]> = [
    [get(item, 'tenantId'), pc.allowedTenantIds],
    [get(item, 'channelIdentity', 'tenantId'), pc.allowedTenantIds],
    [get(item, 'chatId'), pc.allowedChatIds],
    [get(item, 'channelIdentity', 'channelId'), pc.allowedChannelIds],
  ];
  if (listKind === 'chat') checks.push([get(item, 'id'), pc.allowedChatIds]);
  if (listKind === 'channel') checks.push([get(item, 'id'), pc.allowedChannelIds]);
  for (const [v, allowed] of checks) {
    if (v === undefined || allowed.length === 0) continue;
    const id = idString(v);
    if (id === null || !allowed.includes(id)) return false;
  }
  return true;
}

/** The inbound filter for a response on `path`, or null when the constraints need none. */
export function inboundFilterFor(pc: ProviderConstraints | null, path: string): InboundFilter | null {
  if (!pc) return null;
  const method = lastSegment(path);
  switch (pc.provider) {
    case 'chatbot_a': {
      if (pc.allowedChatIds.length === 0 || method !== 'getUpdates') return null;
      const allowed = new Set(pc.allowedChatIds);
      return (value) =>
        filterArrayField(value, 'result', (u) => {
          const id = chatIdOfUpdate(u);
          return id !== null && allowed.has(id);
        });
    }
    case 'chatbot_b': {
      const users = new Set(pc.allowedUserIds);
      const channels = new Set(pc.allowedChannelIds);
      if (users.size === 0 && channels.size === 0) return null;
      const userOk = (m: unknown): boolean => {
        if (users.size === 0) return true;
        const u = idString(get(m, 'user'));
        return u !== null && users.has(u);
      };
      const channelOk = (id: unknown): boolean => {
        if (channels.size === 0) return true;
        const c = idString(id);
        return c !== null && (channels.has(c) || isDirectMessageChannel(c));
      };
      return (value) => {
        let out = filterArrayField(value, 'messages', userOk);
        const search = get(out, 'messages');
        if (isPlainObject(search) && Array.isArray(search.matches)) {
          const filtered = filterArrayField(
            search,
            'matches',
            (m) => userOk(m) && channelOk(get(m, 'channel', 'id')),
          );
          if (filtered !== search && isPlainObject(out)) out = { ...out, messages: filtered };
        }
        return filterArrayField(out, 'channels', (c) => channelOk(get(c, 'id')));
      };
    }
    case 'suite_b': {
      if (pc.allowedTenantIds.length + pc.allowedChatIds.length + pc.allowedChannelIds.length === 0)
        return null;
      const lower = method.toLowerCase();
      const listKind =
        lower === 'chats' ? 'chat' : lower === 'channels' || lower === 'allchannels' ? 'channel' : null;
      return (value) => filterArrayField(value, 'value', (item) => suiteBItemAllowed(item, pc, listKind));
    }
  }
}
