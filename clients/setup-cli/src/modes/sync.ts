/**
 * `sync`: re-reads `GET /v1/capabilities/me` and rewrites what depends on it — the plugin's
 * `connectedProviders` and the vault model providers (one per connected LLM provider, at the
 * enrolment's base URL). Nothing else changes; when nothing differs, the file is not written.
 */
import { VaultAuthError } from '@vlt/sdk';
import { openAgentClient, requireInstall, type Context } from '../context.js';
import { EXIT, SetupCliError, type ExitCode } from '../errors.js';
import { applyConnections, readConfig, writeConfig } from '../openclaw-config.js';
import { vaultFailure } from '../vault.js';
import { describeChange, warnDanglingDefault } from './shared.js';

export const RECONNECT_HINT =
  'ask a workspace admin for a new bootstrap secret for this agent, then run: vlt-setup --mode reconnect --bootstrap-secret <vltb_...>';

/** The vault refusing the agent's own credentials: only re-enrolment fixes that. */
export function refusedAgent(err: unknown, baseUrl: string, what: string): SetupCliError {
  if (err instanceof VaultAuthError) return new SetupCliError(err.message, { hint: RECONNECT_HINT });
  return vaultFailure(err, baseUrl, what);
}

export async function runSync(ctx: Context): Promise<ExitCode> {
  const file = await readConfig(ctx.configPath);
  const install = requireInstall(file);
  const client = await openAgentClient(ctx, install);
  let caps;
  try {
    caps = await client.capabilities();
  } catch (err) {
    throw refusedAgent(err, install.baseUrl, "read the agent's capabilities");
  }
  if (caps.agentId !== install.agentId) {
    throw new SetupCliError(
      `the vault answered for agent ${caps.agentId}, but the config is for ${install.agentId}`,
    );
  }
  const data = structuredClone(file.data);
  const change = applyConnections(
    data,
    install.baseUrl,
    caps.activeConnections.map((c) => c.provider),
  );
  const written = await writeConfig(file, data);
  describeChange(ctx, change);
  ctx.out.line(written ? `Updated ${file.path}.` : `${file.path} is up to date.`);
  warnDanglingDefault(ctx, data);
  return EXIT.ok;
}
