/**
 * Policy wire shapes: the stored policy (what admins write through the API) and the compiled
 * snapshot the control plane publishes to the data plane over NATS KV.
 *
 * The schemas check structure and everything that needs no regex engine. RE2 validity of
 * admin-supplied patterns, allowlist canonicalisation and provider matching are checked by
 * `validatePolicyDocument` / `validatePolicyRules` in `@vlt/policy-engine` (this package stays
 * free of engine dependencies); the control plane runs both and answers 400 with the messages.
 *
 * Parts an admin writes are strict objects: a misspelt security setting (`allowedChatIDs`) must
 * fail loudly instead of being dropped and leaving the policy open.
 */
import { z } from 'zod';

/** Bounds keep the cost of one policy decision predictable whatever an admin stores. */
export const POLICY_LIMITS = {
  allowlistEntries: 200,
  pathPatternsPerEntry: 100,
  requestRules: 200,
  responseRules: 100,
  bodyMatchersPerRule: 32,
  fieldsPerFilter: 200,
  redactionsPerRule: 32,
  timeWindows: 100,
  constraintIds: 1000,
  patternLength: 1000,
  pathLength: 512,
  urlLength: 2048,
} as const;

export const HttpMethod = z.enum(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']);
export type HttpMethod = z.infer<typeof HttpMethod>;

export const AllowedModel = z.enum(['A', 'B']);
export type AllowedModel = z.infer<typeof AllowedModel>;

export const DefaultMode = z.enum(['read_only', 'read_write', 'custom']);
export type DefaultMode = z.infer<typeof DefaultMode>;

export const StepUpApproval = z.enum(['always', 'risk_based', 'never']);
export type StepUpApproval = z.infer<typeof StepUpApproval>;

/** True when `s` holds a C0 control character or DEL. */
function hasControlChar(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** Returns null when `raw` is an acceptable allowlist base URL, else the reason. */
export function baseUrlProblem(raw: string): string | null {
  if (!/^https:\/\//i.test(raw)) {
    return /^http:\/\//i.test(raw)
      ? 'baseUrl must use https; http is rejected'
      : 'baseUrl must be an absolute https:// URL';
  }
  if (/[\s\\]/.test(raw) || hasControlChar(raw))
    return 'baseUrl must not contain whitespace, control characters or "\\"';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'baseUrl is not a valid URL';
  }
  if (url.username !== '' || url.password !== '' || raw.slice(8).split(/[/?#]/, 1)[0]!.includes('@')) {
    return 'baseUrl must not contain user info';
  }
  if (url.search !== '' || url.hash !== '' || raw.includes('?') || raw.includes('#')) {
    return 'baseUrl must not contain a query or fragment';
  }
  if (url.hostname === '') return 'baseUrl has no host';
  return null;
}

export const AllowlistBaseUrl = z
  .string()
  .max(POLICY_LIMITS.urlLength)
  .superRefine((raw, ctx) => {
    const problem = baseUrlProblem(raw);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** Returns null when `pattern` is an acceptable path pattern, else the reason. */
export function pathPatternProblem(pattern: string): string | null {
  if (!pattern.startsWith('/')) return 'path pattern must start with "/"';
  if (/[?#\s]/.test(pattern)) return 'path pattern must not contain "?", "#" or whitespace';
  const star = pattern.indexOf('*');
  // Only a trailing "*" has a meaning (any suffix); a "*" elsewhere would silently be literal.
  if (star !== -1 && star !== pattern.length - 1) return '"*" is only allowed at the end of a path pattern';
  return null;
}

export const PathPattern = z
  .string()
  .min(1)
  .max(POLICY_LIMITS.pathLength)
  .superRefine((p, ctx) => {
    const problem = pathPatternProblem(p);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export const AllowlistEntry = z.strictObject({
  baseUrl: AllowlistBaseUrl,
  methods: z.array(HttpMethod).min(1).max(5),
  pathPatterns: z.array(PathPattern).min(1).max(POLICY_LIMITS.pathPatternsPerEntry),
});
export type AllowlistEntry = z.infer<typeof AllowlistEntry>;

export const RateLimits = z.strictObject({
  maxRequestsPerHour: z.number().int().min(0),
  maxPayloadSizeBytes: z.number().int().positive().optional(),
  maxResponseSizeBytes: z.number().int().positive().optional(),
});
export type RateLimits = z.infer<typeof RateLimits>;

export function isValidTimeZone(timeZone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
    return true;
  } catch {
    return false;
  }
}

export const TimeWindow = z.strictObject({
  dayOfWeek: z.number().int().min(0).max(6),
  startHour: z.number().int().min(0).max(23),
  endHour: z.number().int().min(0).max(23),
  timezone: z
    .string()
    .min(1)
    .max(64)
    .refine(isValidTimeZone, { message: 'timezone must be an IANA time zone name' }),
});
export type TimeWindow = z.infer<typeof TimeWindow>;

export const BodyMatcherOp = z.enum(['eq', 'neq', 'in', 'not_in', 'contains', 'matches', 'exists']);
export type BodyMatcherOp = z.infer<typeof BodyMatcherOp>;

export const BodyMatcher = z
  .strictObject({
    path: z.string().min(1).max(POLICY_LIMITS.pathLength),
    op: BodyMatcherOp,
    value: z.json().optional(),
  })
  .superRefine((m, ctx) => {
    const v = m.value;
    switch (m.op) {
      case 'in':
      case 'not_in':
        if (!Array.isArray(v))
          ctx.addIssue({ code: 'custom', path: ['value'], message: `"${m.op}" needs an array value` });
        break;
      case 'matches':
        if (typeof v !== 'string' || v.length > POLICY_LIMITS.patternLength) {
          ctx.addIssue({ code: 'custom', path: ['value'], message: '"matches" needs a regex string value' });
        }
        break;
      case 'exists':
        if (v !== undefined && typeof v !== 'boolean') {
          ctx.addIssue({
            code: 'custom',
            path: ['value'],
            message: '"exists" takes an optional boolean value',
          });
        }
        break;
      default:
        if (v === undefined)
          ctx.addIssue({ code: 'custom', path: ['value'], message: `"${m.op}" needs a value` });
    }
  });
export type BodyMatcher = z.infer<typeof BodyMatcher>;

const RegexSource = z.string().min(1).max(POLICY_LIMITS.patternLength);

export const RequestRule = z.strictObject({
  label: z.string().max(200),
  match: z.strictObject({
    methods: z.array(HttpMethod).max(5).optional(),
    urlPattern: RegexSource.optional(),
    body: z.array(BodyMatcher).max(POLICY_LIMITS.bodyMatchersPerRule).optional(),
  }),
  action: z.enum(['allow', 'deny', 'require_approval']),
});
export type RequestRule = z.infer<typeof RequestRule>;

export const BuiltInRedactionType = z.enum(['email', 'phone', 'ssn', 'credit_card', 'ip_address']);
export type BuiltInRedactionType = z.infer<typeof BuiltInRedactionType>;

// Control characters could break the framing of the stream they are written into (a CR ends
// an SSE line).
const Replacement = z
  .string()
  .max(200)
  .refine((s) => !hasControlChar(s), { message: 'replacement must not contain control characters' });

export const RedactionSpec = z.discriminatedUnion('type', [
  z.strictObject({ type: BuiltInRedactionType, replacement: Replacement.optional() }),
  z.strictObject({ type: z.literal('custom'), pattern: RegexSource, replacement: Replacement }),
]);
export type RedactionSpec = z.infer<typeof RedactionSpec>;

const FieldPath = z.string().min(1).max(POLICY_LIMITS.pathLength);

export const ResponseRule = z.strictObject({
  label: z.string().max(200),
  match: z
    .strictObject({
      urlPattern: RegexSource.optional(),
      methods: z.array(HttpMethod).max(5).optional(),
    })
    .default({}),
  filter: z.strictObject({
    allowFields: z.array(FieldPath).max(POLICY_LIMITS.fieldsPerFilter).optional(),
    denyFields: z.array(FieldPath).max(POLICY_LIMITS.fieldsPerFilter).optional(),
    redact: z.array(RedactionSpec).max(POLICY_LIMITS.redactionsPerRule).optional(),
  }),
});
export type ResponseRule = z.infer<typeof ResponseRule>;

export const PolicyRules = z.strictObject({
  request: z.array(RequestRule).max(POLICY_LIMITS.requestRules).default([]),
  response: z.array(ResponseRule).max(POLICY_LIMITS.responseRules).default([]),
});
export type PolicyRules = z.infer<typeof PolicyRules>;

const IdList = z.array(z.string().min(1).max(256)).max(POLICY_LIMITS.constraintIds).default([]);

/** Empty or omitted lists mean "no restriction on that dimension", as the spec says. */
export const ProviderConstraints = z.discriminatedUnion('provider', [
  z.strictObject({ provider: z.literal('chatbot_a'), allowedChatIds: IdList }),
  z.strictObject({
    provider: z.literal('suite_b'),
    allowedTenantIds: IdList,
    allowedChatIds: IdList,
    allowedChannelIds: IdList,
  }),
  z.strictObject({ provider: z.literal('chatbot_b'), allowedChannelIds: IdList, allowedUserIds: IdList }),
]);
export type ProviderConstraints = z.infer<typeof ProviderConstraints>;

/**
 * Contact field step-up (ADR 0045). On contacts services PII fields (phone numbers, addresses,
 * birthdays, ...) are stripped from every response, whatever the rules say; notes and
 * biographies always are. `balanced` with `fieldStepUpEnabled` lets an agent ask, for one
 * contact at a time, for the PII fields under a reviewer's approval; `strict` never returns them.
 */
export const CONTACT_SERVICES: readonly string[] = ['suite_a-contacts'];

export function isContactsService(service: string): boolean {
  return CONTACT_SERVICES.includes(service);
}

export const ContactFieldTier = z.enum(['strict', 'balanced']);
export type ContactFieldTier = z.infer<typeof ContactFieldTier>;

/** Both keys are required: a security setting is written out, never half-inherited. */
export const ContactFieldSettings = z
  .strictObject({ tier: ContactFieldTier, fieldStepUpEnabled: z.boolean() })
  .superRefine((s, ctx) => {
    if (s.tier === 'strict' && s.fieldStepUpEnabled) {
      ctx.addIssue({
        code: 'custom',
        path: ['fieldStepUpEnabled'],
        message: 'field step-up needs the balanced tier: the strict tier strips PII fields permanently',
      });
    }
  });
export type ContactFieldSettings = z.infer<typeof ContactFieldSettings>;

/** What a contacts policy enforces until an admin sets otherwise: PII stripped, no step-up. */
export const DEFAULT_CONTACT_FIELDS: Readonly<ContactFieldSettings> = Object.freeze({
  tier: 'balanced',
  fieldStepUpEnabled: false,
});

/** The stored policy binding one agent to one connection. Extra storage columns are stripped. */
export const PolicyDocument = z.object({
  id: z.uuid(),
  workspaceId: z.uuid(),
  agentId: z.uuid(),
  connectionId: z.uuid(),
  allowedModels: z.array(AllowedModel).max(2).default(['A', 'B']),
  defaultMode: DefaultMode.default('read_only'),
  stepUpApproval: StepUpApproval.default('risk_based'),
  allowlists: z.array(AllowlistEntry).max(POLICY_LIMITS.allowlistEntries).default([]),
  rateLimits: RateLimits.nullable().default(null),
  timeWindows: z.array(TimeWindow).max(POLICY_LIMITS.timeWindows).default([]),
  rules: PolicyRules.default({ request: [], response: [] }),
  providerConstraints: ProviderConstraints.nullable().default(null),
  /** Contacts services only; absent or null means DEFAULT_CONTACT_FIELDS there. */
  contactFields: ContactFieldSettings.nullable().optional(),
  version: z.number().int().min(0),
});
export type PolicyDocument = z.infer<typeof PolicyDocument>;

// ---------------------------------------------------------------------------------------------
// Compiled snapshot (control plane → NATS KV → data plane). Produced by `compilePolicy` and
// re-hydrated by `hydratePolicy` in @vlt/policy-engine; plain JSON so it can be published as is.
// ---------------------------------------------------------------------------------------------

/**
 * The newest snapshot format. A snapshot carries the oldest format whose readers enforce all of
 * it (ADR 0036, 0045): 1 for every policy without contact field settings, 2 for contacts
 * policies, so a data plane that predates contact stripping refuses those (fails closed) and
 * keeps serving the rest. Data planes read every format in COMPILED_POLICY_FORMATS.
 */
export const COMPILED_POLICY_FORMAT = 2;
export const COMPILED_POLICY_FORMATS = [1, 2] as const;

/** A field path split into segments; `null` is the `*` wildcard. */
export const CompiledPath = z.array(z.string().nullable()).min(1).max(64);
export type CompiledPath = z.infer<typeof CompiledPath>;

export const CompiledAllowlistEntry = z.object({
  index: z.number().int().min(0),
  host: z.string().min(1),
  port: z.number().int().min(1).max(65535),
  methods: z.array(HttpMethod),
  /** Canonical path patterns; `prefix` true means the stored pattern ended in `*`. */
  patterns: z.array(z.object({ value: z.string(), prefix: z.boolean() })),
});
export type CompiledAllowlistEntry = z.infer<typeof CompiledAllowlistEntry>;

export const CompiledBodyMatcher = z.object({
  path: CompiledPath,
  op: BodyMatcherOp,
  value: z.json().optional(),
});
export type CompiledBodyMatcher = z.infer<typeof CompiledBodyMatcher>;

export const CompiledRequestRule = z.object({
  index: z.number().int().min(0),
  label: z.string(),
  action: z.enum(['allow', 'deny', 'require_approval']),
  methods: z.array(HttpMethod).nullable(),
  urlPattern: z.string().nullable(),
  body: z.array(CompiledBodyMatcher).nullable(),
});
export type CompiledRequestRule = z.infer<typeof CompiledRequestRule>;

export const CompiledRedaction = z.object({
  type: z.enum(['email', 'phone', 'ssn', 'credit_card', 'ip_address', 'custom']),
  pattern: z.string().nullable(),
  replacement: z.string(),
});
export type CompiledRedaction = z.infer<typeof CompiledRedaction>;

export const CompiledResponseRule = z.object({
  index: z.number().int().min(0),
  label: z.string(),
  methods: z.array(HttpMethod).nullable(),
  urlPattern: z.string().nullable(),
  allowFields: z.array(CompiledPath).nullable(),
  denyFields: z.array(CompiledPath).nullable(),
  redact: z.array(CompiledRedaction),
});
export type CompiledResponseRule = z.infer<typeof CompiledResponseRule>;

export const CompiledPolicy = z.object({
  format: z.literal(COMPILED_POLICY_FORMATS),
  policyId: z.string(),
  workspaceId: z.string(),
  agentId: z.string(),
  connectionId: z.string(),
  version: z.number().int().min(0),
  provider: z.string(),
  service: z.string(),
  allowedModels: z.array(AllowedModel),
  defaultMode: DefaultMode,
  stepUpApproval: StepUpApproval,
  timeWindows: z.array(TimeWindow),
  allowlists: z.array(CompiledAllowlistEntry),
  rateLimits: RateLimits.nullable(),
  requestRules: z.array(CompiledRequestRule),
  responseRules: z.array(CompiledResponseRule),
  providerConstraints: ProviderConstraints.nullable(),
  /**
   * The effective contact field settings of a contacts service (format 2); null elsewhere.
   * Absent in format 1, where a contacts service gets DEFAULT_CONTACT_FIELDS.
   */
  contactFields: ContactFieldSettings.nullable().default(null),
});
export type CompiledPolicy = z.infer<typeof CompiledPolicy>;
