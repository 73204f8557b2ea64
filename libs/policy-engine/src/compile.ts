/**
 * compilePolicy (control plane): stored policy → plain-JSON snapshot with everything
 * canonicalised and validated, ready to publish over NATS KV.
 * hydratePolicy (data plane): snapshot → PolicyRuntime with regexes, tries and time-zone
 * formatters built once; cache the runtime per policy id and version.
 */
import type {
  CompiledAllowlistEntry,
  CompiledPath,
  CompiledPolicy as CompiledPolicyType,
  CompiledRequestRule,
  CompiledResponseRule,
  ContactFieldSettings,
  HttpMethod,
  PolicyDocument as PolicyDocumentType,
  ProviderConstraints,
  RateLimits,
} from '@vlt/contracts';
import { CompiledPolicy, DEFAULT_CONTACT_FIELDS, PolicyDocument, isContactsService } from '@vlt/contracts';
import { compileAllowlistEntry } from './allowlist.js';
import { contactFieldPlan, keepsPii } from './contact-fields.js';
import { CompiledPolicyError, PolicyValidationError } from './errors.js';
import { parseJsonPath, protoJsonAliases } from './json-path.js';
import { inboundFilterFor } from './provider-constraints.js';
import { DEFAULT_REPLACEMENTS, createDetector } from './redaction.js';
import { compileLinearRegex } from './regex.js';
import type { RuntimeRequestRule } from './request-rules.js';
import type { ResponsePlan, ResponseRoute, RuntimeResponseRule } from './response-filter.js';
import { buildFieldTrie, buildResponsePlan, selectResponseRules } from './response-filter.js';
import type { TimeWindowSchedule } from './time-windows.js';
import { compileTimeWindows } from './time-windows.js';
import { validatePolicyDocument } from './validate.js';

export interface ConnectionInfo {
  provider: string;
  service: string;
}

function pathOf(path: string): CompiledPath {
  const parsed = parseJsonPath(path);
  if (!parsed.ok) throw new PolicyValidationError([`invalid path "${path}": ${parsed.reason}`]);
  return parsed.segments;
}

function methodsOrNull(methods: readonly HttpMethod[] | undefined): HttpMethod[] | null {
  return methods && methods.length > 0 ? [...new Set(methods)] : null;
}

/**
 * Validates and compiles a stored policy. Throws PolicyValidationError (400) listing every
 * problem; never returns a partially compiled policy.
 */
export function compilePolicy(policy: PolicyDocumentType, connection: ConnectionInfo): CompiledPolicyType {
  const errors = validatePolicyDocument(policy, connection);
  if (errors.length > 0) throw new PolicyValidationError(errors);
  const doc = PolicyDocument.parse(policy);
  const allowlists: CompiledAllowlistEntry[] = doc.allowlists.map((e, i) => compileAllowlistEntry(e, i));
  const requestRules: CompiledRequestRule[] = doc.rules.request.map((r, index) => ({
    index,
    label: r.label,
    action: r.action,
    methods: methodsOrNull(r.match.methods),
    urlPattern: r.match.urlPattern ?? null,
    body:
      r.match.body && r.match.body.length > 0
        ? r.match.body.map((m) => ({
            path: pathOf(m.path),
            op: m.op,
            ...(m.value === undefined ? {} : { value: m.value }),
          }))
        : null,
  }));
  const responseRules: CompiledResponseRule[] = doc.rules.response.map((r, index) => ({
    index,
    label: r.label,
    methods: methodsOrNull(r.match.methods),
    urlPattern: r.match.urlPattern ?? null,
    // An empty list means "not set", as empty lists do everywhere else in a policy.
    allowFields:
      r.filter.allowFields && r.filter.allowFields.length > 0 ? r.filter.allowFields.map(pathOf) : null,
    denyFields:
      r.filter.denyFields && r.filter.denyFields.length > 0 ? r.filter.denyFields.map(pathOf) : null,
    redact: (r.filter.redact ?? []).map((spec) => ({
      type: spec.type,
      pattern: spec.type === 'custom' ? spec.pattern : null,
      replacement: spec.replacement ?? DEFAULT_REPLACEMENTS[spec.type],
    })),
  }));
  // Contacts services always carry their effective settings; the snapshot is then format 2, which
  // data planes without contact stripping refuse (ADR 0045). Other policies stay format 1.
  const contactFields: ContactFieldSettings | null = isContactsService(connection.service)
    ? { ...(doc.contactFields ?? DEFAULT_CONTACT_FIELDS) }
    : null;
  const compiled: CompiledPolicyType = {
    format: contactFields ? 2 : 1,
    policyId: doc.id,
    workspaceId: doc.workspaceId,
    agentId: doc.agentId,
    connectionId: doc.connectionId,
    version: doc.version,
    provider: connection.provider,
    service: connection.service,
    allowedModels: [...new Set(doc.allowedModels)],
    defaultMode: doc.defaultMode,
    stepUpApproval: doc.stepUpApproval,
    timeWindows: doc.timeWindows,
    allowlists,
    rateLimits: doc.rateLimits,
    requestRules,
    responseRules,
    providerConstraints: doc.providerConstraints,
    contactFields,
  };
  // The snapshot travels as JSON; round-tripping here proves it survives that unchanged.
  return JSON.parse(JSON.stringify(compiled)) as CompiledPolicyType;
}

/** A hydrated policy: what evaluateExecution and the response filters take. */
export interface PolicyRuntime {
  readonly compiled: CompiledPolicyType;
  readonly allowedModels: ReadonlySet<string>;
  readonly allowlists: readonly CompiledAllowlistEntry[];
  readonly requestRules: readonly RuntimeRequestRule[];
  readonly responseRules: readonly RuntimeResponseRule[];
  readonly timeWindows: TimeWindowSchedule;
  readonly rateLimits: RateLimits | null;
  /** Same object as `rateLimits` (the data plane reads `maxResponseSizeBytes` from here). */
  readonly limits: RateLimits | null;
  readonly providerConstraints: ProviderConstraints | null;
  /**
   * Effective contact field settings of a contacts service (every response is stripped); null
   * for any other service.
   */
  readonly contactFields: Readonly<ContactFieldSettings> | null;
  /** Some rule or provider constraint reads the request body: JSON bodies must then be strict. */
  readonly readsBody: boolean;
}

function regexOrFail(source: string, where: string) {
  try {
    return compileLinearRegex(source);
  } catch (err) {
    throw new CompiledPolicyError(`${where}: ${(err as Error).message}`);
  }
}

/**
 * Re-hydrates a published snapshot. Throws CompiledPolicyError on anything unexpected; the data
 * plane must then treat the policy as missing (deny), never as permissive.
 */
/**
 * Providers whose APIs read request bodies as proto3 JSON (Google's), where a field may be sent
 * by its JSON name or its proto name: body matchers look under both.
 */
const PROTO_JSON_PROVIDERS: ReadonlySet<string> = new Set(['suite_a', 'llm_c']);

export function hydratePolicy(json: unknown): PolicyRuntime {
  const parsed = CompiledPolicy.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new CompiledPolicyError(
      `compiled policy rejected: ${first ? `${first.path.join('.')}: ${first.message}` : 'invalid'}`,
    );
  }
  const c = parsed.data;
  if (c.providerConstraints && c.providerConstraints.provider !== c.provider) {
    throw new CompiledPolicyError('compiled policy rejected: provider constraints do not match the provider');
  }
  let contactFields: Readonly<ContactFieldSettings> | null = null;
  if (isContactsService(c.service)) {
    // Format 1 predates the setting: the default, which strips and allows no step-up.
    contactFields = Object.freeze({ ...(c.contactFields ?? DEFAULT_CONTACT_FIELDS) });
  } else if (c.contactFields !== null) {
    throw new CompiledPolicyError(
      'compiled policy rejected: contact field settings on a non-contacts service',
    );
  }
  const requestRules: RuntimeRequestRule[] = c.requestRules.map((r) => ({
    index: r.index,
    label: r.label,
    action: r.action,
    methods: r.methods ? new Set(r.methods) : null,
    urlPattern:
      r.urlPattern === null ? null : regexOrFail(r.urlPattern, `requestRules[${r.index}].urlPattern`),
    body: r.body
      ? r.body.map((m, j) => {
          if ((m.op === 'in' || m.op === 'not_in') && !Array.isArray(m.value)) {
            throw new CompiledPolicyError(`requestRules[${r.index}].body[${j}]: "${m.op}" needs an array`);
          }
          if (m.op === 'matches' && typeof m.value !== 'string') {
            throw new CompiledPolicyError(`requestRules[${r.index}].body[${j}]: "matches" needs a pattern`);
          }
          return {
            path: m.path,
            aliases: PROTO_JSON_PROVIDERS.has(c.provider) ? protoJsonAliases(m.path) : null,
            op: m.op,
            value: m.value,
            regex:
              m.op === 'matches'
                ? regexOrFail(m.value as string, `requestRules[${r.index}].body[${j}]`)
                : null,
          };
        })
      : null,
  }));
  const responseRules: RuntimeResponseRule[] = c.responseRules.map((r) => ({
    index: r.index,
    label: r.label,
    methods: r.methods ? new Set(r.methods) : null,
    urlPattern:
      r.urlPattern === null ? null : regexOrFail(r.urlPattern, `responseRules[${r.index}].urlPattern`),
    allowFields: r.allowFields ? buildFieldTrie(r.allowFields) : null,
    denyFields: r.denyFields ? buildFieldTrie(r.denyFields) : null,
    detectors: r.redact.map((spec, j) => {
      if (spec.type === 'custom') {
        if (spec.pattern === null)
          throw new CompiledPolicyError(`responseRules[${r.index}].redact[${j}]: no pattern`);
        return createDetector(spec, regexOrFail(spec.pattern, `responseRules[${r.index}].redact[${j}]`));
      }
      return createDetector(spec);
    }),
  }));
  let timeWindows: TimeWindowSchedule;
  try {
    timeWindows = compileTimeWindows(c.timeWindows);
  } catch (err) {
    throw new CompiledPolicyError(`timeWindows: ${(err as Error).message}`);
  }
  return Object.freeze({
    compiled: c,
    allowedModels: new Set(c.allowedModels),
    allowlists: c.allowlists,
    requestRules,
    responseRules,
    timeWindows,
    rateLimits: c.rateLimits,
    limits: c.rateLimits,
    providerConstraints: c.providerConstraints,
    contactFields,
    readsBody: requestRules.some((r) => r.body !== null) || c.providerConstraints !== null,
  });
}

/**
 * What applies to the response of `route` ({method, canonical path, fullFields}): null means no
 * rule, no provider filter and no contact stripping applies, so the body passes through unchanged.
 * A contacts service always strips; PII fields are kept only for a redeemed field step-up on a
 * route and policy that allow one.
 */
export function planResponse(policy: PolicyRuntime, route: ResponseRoute): ResponsePlan | null {
  const contacts = policy.contactFields;
  return buildResponsePlan(
    selectResponseRules(policy.responseRules, route),
    inboundFilterFor(policy.providerConstraints, route.path),
    contacts ? contactFieldPlan(keepsPii(contacts, route)) : null,
  );
}
