import { z } from 'zod';
import {
  AllowlistEntry,
  AllowedModel,
  ContactFieldSettings,
  DefaultMode,
  PolicyRules,
  ProviderConstraints,
  RateLimits,
  StepUpApproval,
  TimeWindow,
} from '../policy.js';

export const PolicyView = z.object({
  id: z.uuid(),
  agentId: z.uuid(),
  connectionId: z.uuid(),
  allowedModels: z.array(AllowedModel),
  defaultMode: DefaultMode,
  stepUpApproval: StepUpApproval,
  allowlists: z.array(AllowlistEntry),
  rateLimits: RateLimits.nullable(),
  timeWindows: z.array(TimeWindow),
  rules: PolicyRules,
  providerConstraints: ProviderConstraints.nullable(),
  /** What a contacts connection enforces (the default when none was set); null elsewhere. */
  contactFields: ContactFieldSettings.nullable(),
  version: z.number().int(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type PolicyView = z.infer<typeof PolicyView>;

export const CreatePolicyBody = z.object({
  agentId: z.uuid(),
  connectionId: z.uuid(),
  allowedModels: z.array(AllowedModel).min(1).optional(),
  defaultMode: DefaultMode.optional(),
  stepUpApproval: StepUpApproval.optional(),
});
export const PolicyResponse = z.object({ policy: PolicyView, auditId: z.string() });
export const PolicyListResponse = z.object({ policies: z.array(PolicyView) });

export const PutAllowlistsBody = z.object({ allowlists: z.array(AllowlistEntry).max(100) });

export const UpdatePolicyBody = z
  .object({
    allowedModels: z.array(AllowedModel).min(1).optional(),
    defaultMode: DefaultMode.optional(),
    stepUpApproval: StepUpApproval.optional(),
    /** Contacts connections only (400 elsewhere); null restores the default (ADR 0045). */
    contactFields: ContactFieldSettings.nullable().optional(),
  })
  .strict()
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    message: 'at least one of allowedModels, defaultMode, stepUpApproval, contactFields is required',
  });
export const PutRateLimitsBody = z.object({ rateLimits: RateLimits.nullable() });
export const PutTimeWindowsBody = z.object({ timeWindows: z.array(TimeWindow).max(50) });
export const PutRulesBody = z.object({ rules: PolicyRules });
export const RulesResponse = z.object({ rules: PolicyRules });
export const PutProviderConstraintsBody = z.object({ providerConstraints: ProviderConstraints.nullable() });
export const DeletePolicyResponse = z.object({ deleted: z.literal(true), id: z.uuid(), auditId: z.string() });
