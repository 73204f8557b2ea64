/**
 * Contact field step-up (ADR 0045): what leaves a contacts service, and when an agent may ask
 * for more.
 *
 * Every response of a contacts service goes through `stripContactFields`, whatever the policy's
 * rules say. Person fields fall into three classes:
 * - basic: identify the contact and are always returned (names, email addresses, organisations,
 *   group memberships, the resource name, etag and source metadata);
 * - PII: phone numbers, addresses, birthdays and the other personal details; stripped unless the
 *   request was a redeemed field step-up (`keepPii`);
 * - notes: free text written about the person (biographies, which hold the contact's notes,
 *   user-defined key/value fields, app client data, keywords); always stripped.
 *
 * Two layers, both on parsed JSON:
 * 1. Floor, on every object at any depth: a member whose key names a notes field, or a PII field
 *    when PII is not kept, is removed. Keys are compared case-insensitively and without `_` and
 *    `-` (`phone_numbers`, `PhoneNumbers`), so a spelling variant over-strips rather than leaks.
 * 2. Person allowlist: an object that is a person (its `resourceName` is `people/…` or
 *    `otherContacts/…`) keeps only basic fields (and PII ones when kept). A field the People API
 *    adds tomorrow is therefore stripped until it is classified here, not passed.
 *
 * The walk visits each value once, bounded by MAX_JSON_DEPTH like the other field filters, and
 * copies on write (an unchanged value is returned as itself).
 */
import type { ContactFieldSettings, HttpMethod } from '@vlt/contracts';
import { ResponseFilterLimitError } from './errors.js';
import { isPlainObject } from './json-path.js';
import { MAX_JSON_DEPTH } from './response-filter.js';

export type ContactFieldClass = 'basic' | 'pii' | 'notes';

/** People API person fields by class, as the API spells them. */
export const CONTACT_FIELD_CLASSES: Readonly<Record<ContactFieldClass, readonly string[]>> = {
  basic: [
    'resourceName',
    'etag',
    'metadata',
    'names',
    'nicknames',
    'fileAses',
    'emailAddresses',
    'organizations',
    'memberships',
  ],
  pii: [
    'phoneNumbers',
    'addresses',
    'birthdays',
    'events',
    'relations',
    'imClients',
    'sipAddresses',
    'externalIds',
    'genders',
    'ageRange',
    'ageRanges',
    'locations',
    'residences',
    'urls',
    'calendarUrls',
    'photos',
    'coverPhotos',
    'interests',
    'skills',
    'occupations',
    'locales',
    'relationshipInterests',
    'relationshipStatuses',
  ],
  notes: ['biographies', 'userDefined', 'clientData', 'miscKeywords', 'braggingRights', 'taglines'],
};

/** No field name is longer, even with a separator between every letter. */
const MAX_FIELD_NAME = 64;

/** Lower case without `_` and `-`: one spelling per field, whatever the provider writes. */
function normalise(key: string): string {
  let out = '';
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c === 0x5f /* _ */ || c === 0x2d /* - */) continue;
    out += c >= 0x41 && c <= 0x5a ? String.fromCharCode(c + 0x20) : key[i]!;
  }
  return out;
}

const CLASS_OF: ReadonlyMap<string, ContactFieldClass> = new Map(
  (Object.entries(CONTACT_FIELD_CLASSES) as Array<[ContactFieldClass, readonly string[]]>).flatMap(
    ([cls, keys]) => keys.map((k): [string, ContactFieldClass] => [normalise(k), cls]),
  ),
);

/** The class of a person field, or null for a key that is none of them. */
export function contactFieldClass(key: string): ContactFieldClass | null {
  // Longer than any field name: not one (and not worth normalising).
  if (key.length > MAX_FIELD_NAME) return null;
  return CLASS_OF.get(normalise(key)) ?? null;
}

const PERSON_PREFIXES = ['people/', 'otherContacts/'];

function isPerson(obj: Record<string, unknown>): boolean {
  const name = Object.hasOwn(obj, 'resourceName') ? obj.resourceName : undefined;
  return typeof name === 'string' && PERSON_PREFIXES.some((p) => name.startsWith(p));
}

/** Sets an own member; "__proto__" needs defineProperty, which plain assignment would not do. */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  } else obj[key] = value;
}

function tooDeep(): never {
  throw new ResponseFilterLimitError(`response JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
}

function keeps(cls: ContactFieldClass | null, person: boolean, keepPii: boolean): boolean {
  if (cls === 'notes') return false;
  if (cls === 'pii') return keepPii;
  // Unknown keys: kept on envelopes and nested values, dropped from a person.
  return cls === 'basic' || !person;
}

/**
 * One walk over one response. Keys repeat from object to object (every person has the same
 * few), so each distinct key is classified once per walk; the memo holds at most the keys of
 * this one response.
 */
class Stripper {
  private readonly memo = new Map<string, ContactFieldClass | null>();

  constructor(private readonly keepPii: boolean) {}

  private classOf(key: string): ContactFieldClass | null {
    if (key.length > MAX_FIELD_NAME) return null;
    let cls = this.memo.get(key);
    if (cls === undefined) {
      cls = contactFieldClass(key);
      this.memo.set(key, cls);
    }
    return cls;
  }

  walk(value: unknown, depth: number): unknown {
    if (depth > MAX_JSON_DEPTH) tooDeep();
    if (Array.isArray(value)) {
      let out: unknown[] | null = null;
      for (let i = 0; i < value.length; i++) {
        const r = this.walk(value[i], depth + 1);
        if (r !== value[i]) {
          out ??= value.slice();
          out[i] = r;
        }
      }
      return out ?? value;
    }
    if (!isPlainObject(value)) return value;
    const person = isPerson(value);
    let out: Record<string, unknown> | null = null;
    const keys = Object.keys(value);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const v = value[key];
      const keep = keeps(this.classOf(key), person, this.keepPii);
      const r = keep ? this.walk(v, depth + 1) : undefined;
      if (keep && r === v) {
        if (out) setOwn(out, key, v);
        continue;
      }
      if (!out) {
        // First change: copy the members before this one, in order.
        out = {};
        for (let j = 0; j < i; j++) setOwn(out, keys[j]!, value[keys[j]!]);
      }
      if (keep) setOwn(out, key, r);
    }
    return out ?? value;
  }
}

/**
 * Removes notes fields everywhere, PII fields unless `keepPii`, and unclassified fields of
 * person objects. Returns `value` itself when nothing was removed.
 */
export function stripContactFields(value: unknown, keepPii: boolean): unknown {
  return new Stripper(keepPii).walk(value, 0);
}

/** What the response path of a contacts service applies (part of the response plan). */
export interface ContactFieldPlan {
  readonly keepPii: boolean;
  /** stripContactFields with this plan's `keepPii`. */
  strip(value: unknown): unknown;
}

const STRIP_PII: ContactFieldPlan = Object.freeze({
  keepPii: false,
  strip: (value: unknown) => stripContactFields(value, false),
});
const KEEP_PII: ContactFieldPlan = Object.freeze({
  keepPii: true,
  strip: (value: unknown) => stripContactFields(value, true),
});

export function contactFieldPlan(keepPii: boolean): ContactFieldPlan {
  return keepPii ? KEEP_PII : STRIP_PII;
}

const SINGLE_CONTACT_PREFIX = '/v1/people/';
const MAX_ID = 256;

function isIdChar(c: number): boolean {
  return (
    (c >= 0x30 && c <= 0x39) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x61 && c <= 0x7a) ||
    c === 0x5f /* _ */ ||
    c === 0x2d /* - */
  );
}

/**
 * A read of exactly one contact: `GET /v1/people/{id}` on the canonical path (without a trailing
 * slash), the id one segment of letters, digits, `_` and `-`. Everything else — the connections
 * list, `people:searchContacts`, `people:batchGet`, `people/{id}:updateContact`, other
 * collections, a path under a prefix — is not. The API URL of a contacts service is the root of
 * its origin; a prefixed one makes the step-up unavailable (403), never wider.
 */
export function isSingleContactRead(method: string, matchPath: string): boolean {
  if (method.toUpperCase() !== 'GET' || !matchPath.startsWith(SINGLE_CONTACT_PREFIX)) return false;
  const n = matchPath.length - SINGLE_CONTACT_PREFIX.length;
  if (n < 1 || n > MAX_ID) return false;
  for (let i = SINGLE_CONTACT_PREFIX.length; i < matchPath.length; i++) {
    if (!isIdChar(matchPath.charCodeAt(i))) return false;
  }
  return true;
}

export type FieldStepUpRefusal =
  | 'full_fields_unsupported'
  | 'full_fields_strict'
  | 'full_fields_disabled'
  | 'full_fields_single_contact_only';

/**
 * Whether a request with `requestFullFields: true` may go to approval at all. `settings` is the
 * policy's effective contact field settings, null for a service without contact records.
 */
export function fieldStepUpRefusal(
  settings: ContactFieldSettings | null,
  method: HttpMethod | string,
  matchPath: string,
): { code: FieldStepUpRefusal; reason: string } | null {
  if (settings === null) {
    return {
      code: 'full_fields_unsupported',
      reason: 'requestFullFields is only available on contacts connections',
    };
  }
  if (settings.tier === 'strict') {
    return {
      code: 'full_fields_strict',
      reason: 'the policy strips contact PII fields permanently (strict tier)',
    };
  }
  if (!settings.fieldStepUpEnabled) {
    return { code: 'full_fields_disabled', reason: 'field step-up is not enabled on this policy' };
  }
  if (!isSingleContactRead(method, matchPath)) {
    return {
      code: 'full_fields_single_contact_only',
      reason:
        'full contact fields are only available for one contact at a time (GET /v1/people/{id}); ' +
        'list, search and batch endpoints never return them',
    };
  }
  return null;
}

/** Whether the response of a redeemed field step-up keeps PII fields: every condition again. */
export function keepsPii(
  settings: ContactFieldSettings,
  route: { method: string; path: string; fullFields?: boolean },
): boolean {
  return (
    route.fullFields === true &&
    settings.tier === 'balanced' &&
    settings.fieldStepUpEnabled &&
    isSingleContactRead(route.method, route.path)
  );
}
