/**
 * Write-time validation: everything the control plane must refuse with 400, as readable
 * messages prefixed with the JSON path of the offending value. Structural checks come from the
 * zod schemas in @vlt/contracts; this adds what needs the engine (RE2 syntax, canonicalisable
 * allowlists, parseable field paths, provider match).
 */
import {
  AllowlistEntry,
  ContactFieldSettings,
  PolicyDocument,
  PolicyRules,
  ProviderConstraints,
  TimeWindow,
  isContactsService,
} from '@vlt/contracts';
import { compileAllowlistEntry } from './allowlist.js';
import { parseJsonPath } from './json-path.js';
import { compileLinearRegex, linearRegexProblem, matchesEmptyString } from './regex.js';

function formatPath(prefix: string, path: ReadonlyArray<PropertyKey>): string {
  let out = prefix;
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out;
}

/** Structural view of a zod error, so this package needs no direct zod dependency. */
interface SchemaError {
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>;
}

function zodErrors(prefix: string, error: SchemaError): string[] {
  return error.issues.map((i) => {
    const where = formatPath(prefix, i.path);
    return where === '' ? i.message : `${where}: ${i.message}`;
  });
}

function regexError(where: string, source: string | undefined): string[] {
  if (source === undefined) return [];
  const problem = linearRegexProblem(source);
  return problem ? [`${where}: ${problem}`] : [];
}

function pathError(where: string, path: string): string[] {
  const parsed = parseJsonPath(path);
  return parsed.ok ? [] : [`${where}: invalid path "${path}": ${parsed.reason}`];
}

/** Semantic checks on already structurally valid rules. */
function checkRules(rules: PolicyRules, prefix: string): string[] {
  const errors: string[] = [];
  rules.request.forEach((rule, i) => {
    const at = `${prefix}request[${i}]`;
    errors.push(...regexError(`${at}.match.urlPattern`, rule.match.urlPattern));
    rule.match.body?.forEach((m, j) => {
      const mAt = `${at}.match.body[${j}]`;
      errors.push(...pathError(`${mAt}.path`, m.path));
      if (m.op === 'matches' && typeof m.value === 'string')
        errors.push(...regexError(`${mAt}.value`, m.value));
    });
  });
  rules.response.forEach((rule, i) => {
    const at = `${prefix}response[${i}]`;
    errors.push(...regexError(`${at}.match.urlPattern`, rule.match.urlPattern));
    rule.filter.allowFields?.forEach((f, j) =>
      errors.push(...pathError(`${at}.filter.allowFields[${j}]`, f)),
    );
    rule.filter.denyFields?.forEach((f, j) => errors.push(...pathError(`${at}.filter.denyFields[${j}]`, f)));
    rule.filter.redact?.forEach((r, j) => {
      if (r.type !== 'custom') return;
      const where = `${at}.filter.redact[${j}].pattern`;
      const problem = regexError(where, r.pattern);
      if (problem.length) errors.push(...problem);
      else if (matchesEmptyString(compileLinearRegex(r.pattern))) {
        errors.push(`${where}: pattern matches the empty string, so it would redact nothing`);
      }
    });
  });
  return errors;
}

/** Errors for a `rules` object as sent to PUT /v1/policies/:id/rules. Empty means valid. */
export function validatePolicyRules(rules: unknown): string[] {
  const parsed = PolicyRules.safeParse(rules);
  if (!parsed.success) return zodErrors('rules', parsed.error);
  return checkRules(parsed.data, 'rules.');
}

export function validateAllowlists(allowlists: unknown): string[] {
  const parsed = AllowlistEntry.array().safeParse(allowlists);
  if (!parsed.success) return zodErrors('allowlists', parsed.error);
  const errors: string[] = [];
  parsed.data.forEach((entry, i) => {
    try {
      compileAllowlistEntry(entry, i);
    } catch (err) {
      errors.push(`allowlists[${i}]: ${(err as Error).message}`);
    }
  });
  return errors;
}

export function validateTimeWindows(windows: unknown): string[] {
  const parsed = TimeWindow.array().safeParse(windows);
  return parsed.success ? [] : zodErrors('timeWindows', parsed.error);
}

/** `provider` is the connection's provider; a mismatch is the spec's 400. */
export function validateProviderConstraints(constraints: unknown, provider: string): string[] {
  if (constraints === null) return [];
  const parsed = ProviderConstraints.safeParse(constraints);
  if (!parsed.success) return zodErrors('providerConstraints', parsed.error);
  if (parsed.data.provider !== provider) {
    return [
      `providerConstraints.provider: "${parsed.data.provider}" does not match the connection's provider "${provider}"`,
    ];
  }
  return [];
}

/** `service` is the connection's service; contact field settings belong to contacts services only. */
export function validateContactFields(contactFields: unknown, service: string): string[] {
  if (contactFields === null || contactFields === undefined) return [];
  const parsed = ContactFieldSettings.safeParse(contactFields);
  if (!parsed.success) return zodErrors('contactFields', parsed.error);
  if (!isContactsService(service)) {
    return [`contactFields: only contacts connections have contact field settings, not "${service}"`];
  }
  return [];
}

/** Every problem with a whole stored policy. */
export function validatePolicyDocument(
  policy: unknown,
  connection?: { provider: string; service?: string },
): string[] {
  const parsed = PolicyDocument.safeParse(policy);
  if (!parsed.success) return zodErrors('', parsed.error);
  const doc = parsed.data;
  const errors = [...checkRules(doc.rules, 'rules.'), ...validateAllowlists(doc.allowlists)];
  if (connection) errors.push(...validateProviderConstraints(doc.providerConstraints, connection.provider));
  if (connection?.service !== undefined)
    errors.push(...validateContactFields(doc.contactFields, connection.service));
  return errors;
}
