/**
 * The vault plugin inside OpenClaw (ADR 0057): the seven tools through one tool factory bound
 * to the calling session, the approval wake as a system event plus a heartbeat request, and the
 * replay of decided model-call approvals on the session's next user turn.
 */
import type {
  OpenClawPluginApi,
  OpenClawPluginConfigSchema,
  OpenClawPluginToolContext,
} from 'openclaw/plugin-sdk/plugin-entry';
import type { ApprovalWakeEvent } from './approvals.js';
import { checkSourceConfig, manifestConfigSchema, parseConfig, watcherPollMsFrom } from './config.js';
import { createVaultPlugin, type VaultPlugin } from './plugin.js';
import type { SessionRef } from './session.js';
import { TOOL_NAMES, type VaultTool } from './tools.js';

export const PLUGIN_ID = 'vlt-vault';
export const PLUGIN_NAME = 'Credential vault';
export const PLUGIN_DESCRIPTION =
  'Calls connected providers through the credential vault: the agent never holds a provider credential, ' +
  'every call passes the vault policy, and write actions can wait for human approval.';

/** How long the next-turn hook may spend replaying approved model calls. */
const NEXT_TURN_TIMEOUT_MS = 120_000;

/**
 * The model providers the setup CLI points at the vault's LLM proxy (ADR 0058): their requests
 * carry the agent's access token as the API key, which only the plugin can supply.
 */
export const LLM_PROVIDER_IDS = ['vlt-llm_a', 'vlt-llm_b', 'vlt-llm_c', 'vlt-llm_d'] as const;
/** OpenClaw asks again after this; the SDK hands back its cached token until it nears expiry. */
const RUNTIME_TOKEN_TTL_MS = 60_000;

function sessionOf(
  ctx: { agentId?: string; sessionKey?: string; workspaceDir?: string } | undefined,
): SessionRef {
  return { agentId: ctx?.agentId, sessionKey: ctx?.sessionKey, workspaceDir: ctx?.workspaceDir };
}

/** A plugin tool as OpenClaw runs it: `execute(toolCallId, params, signal)`, result text plus details. */
function toAgentTool(t: VaultTool) {
  return {
    name: t.name,
    label: t.label,
    description: t.description,
    parameters: t.parameters,
    // Provider answers are external content: the host treats them as data, not instructions.
    ...(t.networkContent && { resultContentSource: 'network' as const }),
    async execute(_toolCallId: string, params: unknown, signal?: AbortSignal) {
      const details = await t.execute(params, signal);
      return { content: [{ type: 'text' as const, text: JSON.stringify(details, null, 2) }], details };
    },
  };
}

/** Approval ids named in a failed turn's error (the LLM proxy's 202 message names its approval). */
export function approvalIdsIn(text: string | undefined): string[] {
  if (!text) return [];
  const ids = new Set<string>();
  const uuid = '([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})';
  for (const re of [
    new RegExp(`x-vlt-approval-id:?\\s*${uuid}`, 'gi'),
    new RegExp(`approval required \\(request ${uuid}\\)`, 'gi'),
  ]) {
    for (const m of text.matchAll(re)) ids.add(m[1]!.toLowerCase());
  }
  return [...ids];
}

/** Puts the decision in front of the agent and asks the host to run it now. */
function wakeAgent(api: OpenClawPluginApi, event: ApprovalWakeEvent): void {
  const { agentId, sessionKey } = event.session;
  if (sessionKey) {
    api.runtime.system.enqueueSystemEvent(event.text, { sessionKey, ...(agentId && { agentId }) });
  }
  api.runtime.system.requestHeartbeat({
    source: 'other',
    intent: 'event',
    reason: `${PLUGIN_ID}:approval-${event.status}`,
    ...(agentId && { agentId }),
    ...(sessionKey && { sessionKey }),
  });
}

/** The entry's config validation: the plugin's own rules (SecretRefs allowed), messages without values. */
export function configSchema(): OpenClawPluginConfigSchema {
  return {
    safeParse(value: unknown) {
      const problem = checkSourceConfig(value);
      return problem === undefined
        ? { success: true, data: value }
        : { success: false, error: { issues: [{ path: [], message: problem }] } };
    },
    jsonSchema: manifestConfigSchema(),
  };
}

/** Registers the plugin with OpenClaw; throws a ConfigError naming every bad field. */
export function registerVaultPlugin(
  api: OpenClawPluginApi,
  env: Record<string, string | undefined> = process.env,
): VaultPlugin | undefined {
  // Metadata-only loads run no plugin runtime.
  if (api.registrationMode === 'cli-metadata' || api.registrationMode === 'setup-only') return undefined;
  const plugin = createVaultPlugin({
    config: parseConfig(api.pluginConfig),
    watcherPollMs: watcherPollMsFrom(env),
    log: api.logger,
    wake: (event) => wakeAgent(api, event),
  });
  api.registerTool((ctx: OpenClawPluginToolContext) => plugin.tools(sessionOf(ctx)).map(toAgentTool), {
    names: [...TOOL_NAMES],
  });
  for (const id of LLM_PROVIDER_IDS) {
    api.registerProvider({
      id,
      label: `Credential vault LLM proxy (${id.slice('vlt-'.length)})`,
      // The configured key is a placeholder: the real credential is the agent's short-lived token.
      auth: [],
      prepareRuntimeAuth: async () => ({
        apiKey: await plugin.accessToken(),
        expiresAt: Date.now() + RUNTIME_TOKEN_TTL_MS,
      }),
    });
  }
  if (api.registrationMode !== 'full') return plugin;

  // Model calls are not woken (that would start another model call): replayed when the user is back.
  api.on(
    'before_prompt_build',
    async (_event, ctx) => {
      // A user turn (some paths leave the trigger unset); never a heartbeat or a cron run.
      if (ctx.trigger === 'heartbeat' || ctx.trigger === 'cron') return undefined;
      const text = await plugin.nextUserTurn(sessionOf(ctx));
      return text ? { prependContext: text } : undefined;
    },
    { timeoutMs: NEXT_TURN_TIMEOUT_MS },
  );
  // A model call the vault paused ends the turn with the proxy's message naming the approval.
  api.on('agent_end', (event, ctx) => {
    if (event.success) return;
    for (const id of approvalIdsIn(event.error)) plugin.trackApproval(id, sessionOf(ctx));
  });
  api.registerService({
    id: `${PLUGIN_ID}-approval-watcher`,
    start: () => undefined,
    stop: () => plugin.close(),
  });
  return plugin;
}
