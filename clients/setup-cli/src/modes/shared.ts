/** Output and small steps several modes share. */
import type { Capabilities } from '@vlt/sdk';
import type { Context } from '../context.js';
import { LLM_ROUTES, isLlmProvider, type LlmRoute } from '../llm-providers.js';
import {
  defaultModel,
  hasModelProvider,
  routeOfModelRef,
  type ConnectionsChange,
  type JsonObject,
} from '../openclaw-config.js';

/** The vault's LLM routes among `providers` (vault provider names), in a stable order. */
export function llmRoutesOf(providers: Iterable<string>): LlmRoute[] {
  const set = new Set(providers);
  return Object.values(LLM_ROUTES).filter((r) => set.has(r.vaultProvider));
}

export function describeConnections(ctx: Context, caps: Capabilities): void {
  if (caps.activeConnections.length === 0) {
    ctx.out.line('The agent has no connections yet (a workspace admin binds them with a policy).');
    return;
  }
  ctx.out.line('Connections available to the agent:');
  for (const c of caps.activeConnections) {
    const llm = isLlmProvider(c.provider) ? ` (LLM, via ${LLM_ROUTES[c.provider].openclawId})` : '';
    const name = c.label === c.displayName ? c.label : `${c.displayName} — ${c.label}`;
    ctx.out.line(`  ${name} [${c.provider}, ${c.status}]${llm}`);
  }
}

export function describeChange(ctx: Context, change: ConnectionsChange): void {
  ctx.out.line(`connectedProviders: ${change.connectedProviders.join(', ') || '(none)'}`);
  for (const r of change.added) ctx.out.line(`  added models.providers.${r.openclawId}`);
  for (const r of change.removed) ctx.out.line(`  removed models.providers.${r.openclawId}`);
}

/** Warns when the default model routes through a vault provider that is no longer configured. */
export function warnDanglingDefault(ctx: Context, data: JsonObject): void {
  const ref = defaultModel(data);
  const route = routeOfModelRef(ref);
  if (route && !hasModelProvider(data, route)) {
    ctx.out.warn(
      `the default model ${ref} uses ${route.openclawId}, which is no longer configured (no ${route.vaultProvider} ` +
        'connection): choose another with --mode change-model',
    );
  }
}
