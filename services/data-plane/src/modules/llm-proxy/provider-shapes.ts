/**
 * What each LLM provider's official SDK expects to read. A refusal by the vault is answered in
 * the provider's own error shape so the SDK raises its API error with the vault's message
 * instead of failing to parse (ADR 0043); the vault's `code` and `auditId` ride along.
 */
export const LLM_PROVIDERS = ['llm_a', 'llm_b', 'llm_c', 'llm_d'] as const;
export type LlmProvider = (typeof LLM_PROVIDERS)[number];

export function isLlmProvider(p: string): p is LlmProvider {
  return (LLM_PROVIDERS as readonly string[]).includes(p);
}

function anthropicType(status: number): string {
  if (status === 400 || status === 409) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503) return 'overloaded_error';
  return 'api_error';
}

function openAiType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

function googleStatus(status: number): string {
  if (status === 400 || status === 413) return 'INVALID_ARGUMENT';
  if (status === 401) return 'UNAUTHENTICATED';
  if (status === 403) return 'PERMISSION_DENIED';
  if (status === 404) return 'NOT_FOUND';
  if (status === 409) return 'FAILED_PRECONDITION';
  if (status === 429) return 'RESOURCE_EXHAUSTED';
  if (status === 503) return 'UNAVAILABLE';
  return 'INTERNAL';
}

export interface VaultRefusal {
  status: number;
  code: string;
  message: string;
  auditId?: string | undefined;
  retryAfter?: number | undefined;
}

export function providerErrorBody(provider: LlmProvider, r: VaultRefusal): Record<string, unknown> {
  const vault = {
    code: r.code,
    ...(r.auditId && { auditId: r.auditId }),
    ...(r.retryAfter !== undefined && { retryAfter: r.retryAfter }),
  };
  const message = `vault: ${r.message}`;
  switch (provider) {
    case 'llm_a':
      return { type: 'error', error: { type: anthropicType(r.status), message }, ...vault };
    case 'llm_c':
      return { error: { code: r.status, message, status: googleStatus(r.status) }, ...vault };
    case 'llm_b':
    case 'llm_d':
      return {
        error: { message, type: openAiType(r.status), code: r.code.toLowerCase(), param: null },
        ...vault,
      };
  }
}
