/**
 * The vault's four language-model providers and how OpenClaw must be pointed at each one's LLM
 * proxy route (ADR 0043: `ALL /v1/vault/llm/<provider>/<rest>` forwards `<rest>` to the
 * provider's API).
 *
 * OpenClaw's request adapters append the provider's own path to `baseUrl`, and for three of the
 * four its convention is a base URL that already ends in the API version:
 * `anthropic-messages` appends `/v1/messages` (base `https://api.anthropic.com`),
 * `openai-completions` appends `/chat/completions` (base `https://api.openai.com/v1`) and
 * `google-generative-ai` appends `/models/<id>:streamGenerateContent` (base
 * `https://generativelanguage.googleapis.com/v1beta`). The proxy route is therefore followed by
 * that version segment, so what reaches the provider is exactly the path its official SDK
 * sends and the vault's allowlist for the provider's singleton service admits.
 */

export const LLM_PROVIDER_IDS = ['llm_a', 'llm_b', 'llm_c', 'llm_d'] as const;
export type LlmProviderId = (typeof LLM_PROVIDER_IDS)[number];

/** OpenClaw request adapters used here (`models.providers.<id>.api`). */
export type OpenClawApi = 'anthropic-messages' | 'openai-completions' | 'google-generative-ai';

export interface LlmRoute {
  vaultProvider: LlmProviderId;
  /** The provider id in OpenClaw's config, namespaced so vlt-setup never edits the user's own. */
  openclawId: string;
  api: OpenClawApi;
  /** Appended to `<baseUrl>/v1/vault/llm/<provider>`: the API version OpenClaw expects in baseUrl. */
  versionSuffix: '' | '/v1' | '/v1beta';
  /** What the provider speaks, for prompts and help. */
  describe: string;
}

export const LLM_ROUTES: Record<LlmProviderId, LlmRoute> = {
  // Anthropic Messages API (catalog: api.anthropic.com, key in x-api-key).
  llm_a: {
    vaultProvider: 'llm_a',
    openclawId: 'vlt-llm_a',
    api: 'anthropic-messages',
    versionSuffix: '',
    describe: 'Anthropic Messages API',
  },
  // OpenAI. Chat Completions rather than the Responses API: the vault's streamed-redaction stage
  // follows `choices[].delta.content` deltas (ADR 0043), which is the Chat Completions shape.
  llm_b: {
    vaultProvider: 'llm_b',
    openclawId: 'vlt-llm_b',
    api: 'openai-completions',
    versionSuffix: '/v1',
    describe: 'OpenAI Chat Completions API',
  },
  // Google Gemini (Generative Language API, key in x-goog-api-key).
  llm_c: {
    vaultProvider: 'llm_c',
    openclawId: 'vlt-llm_c',
    api: 'google-generative-ai',
    versionSuffix: '/v1beta',
    describe: 'Google Gemini API',
  },
  // Mistral: OpenAI-compatible chat completions (the vault allowlists /v1/chat/completions only).
  llm_d: {
    vaultProvider: 'llm_d',
    openclawId: 'vlt-llm_d',
    api: 'openai-completions',
    versionSuffix: '/v1',
    describe: 'Mistral chat completions (OpenAI-compatible)',
  },
};

export function isLlmProvider(p: string): p is LlmProviderId {
  return (LLM_PROVIDER_IDS as readonly string[]).includes(p);
}

/** The proxy root of a provider: what the SDK's base URL would be (`AgentClient.llmBaseUrl`). */
export function llmProxyRoot(vaultBaseUrl: string, p: LlmProviderId): string {
  return `${vaultBaseUrl}/v1/vault/llm/${p}`;
}

/** `models.providers.<id>.baseUrl` for OpenClaw: the proxy root plus the adapter's version. */
export function openclawBaseUrl(vaultBaseUrl: string, p: LlmProviderId): string {
  return llmProxyRoot(vaultBaseUrl, p) + LLM_ROUTES[p].versionSuffix;
}

export function routeByOpenClawId(id: string): LlmRoute | undefined {
  return Object.values(LLM_ROUTES).find((r) => r.openclawId === id);
}

/**
 * Parses a default-model reference. OpenClaw refs are `<provider>/<model>`; the vault's own
 * provider name is accepted too (`llm_a/claude-x` means `vlt-llm_a/claude-x`). Undefined when
 * the reference does not name one of the vault's providers.
 */
export function parseModelRef(ref: string): { route: LlmRoute; model: string; ref: string } | undefined {
  const m = /^(?:vlt-)?(llm_[a-d])\/(\S{1,200})$/.exec(ref.trim());
  if (!m || !isLlmProvider(m[1]!)) return undefined;
  const route = LLM_ROUTES[m[1]];
  return { route, model: m[2]!, ref: `${route.openclawId}/${m[2]!}` };
}
