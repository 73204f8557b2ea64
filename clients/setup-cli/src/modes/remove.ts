/**
 * `remove`: takes out of the config everything vlt-setup put there (see
 * openclaw-config.ts `applyRemoval`) and deletes the agent's key file. Local only: the agent
 * stays in the vault, where a workspace admin can disable or delete it. Running it when there
 * is nothing to remove is not an error.
 */
import { pluginManifestId, resolvePluginDir, type Context } from '../context.js';
import { ConfigError, EXIT, type ExitCode } from '../errors.js';
import { defaultKeyPath, pathExists, removeKeyFile } from '../keys-store.js';
import {
  PLUGIN_ID,
  applyRemoval,
  pluginLoadPaths,
  readConfig,
  readInstall,
  writeConfig,
} from '../openclaw-config.js';

export async function runRemove(ctx: Context): Promise<ExitCode> {
  const file = await readConfig(ctx.configPath);
  let agentId: string | undefined;
  try {
    agentId = readInstall(file.data, file.path)?.agentId;
  } catch (err) {
    // A damaged entry is exactly what one may want to remove.
    if (!(err instanceof ConfigError)) throw err;
  }

  // The plugin's load paths: those whose manifest names the plugin, and this CLI's own plugin.
  const ours = new Set<string>();
  for (const p of pluginLoadPaths(file.data)) if ((await pluginManifestId(p)) === PLUGIN_ID) ours.add(p);
  const own = await resolvePluginDir(ctx).catch(() => undefined);
  if (own) ours.add(own);

  const data = structuredClone(file.data);
  const { keyPath: referenced } = applyRemoval(data, [...ours]);
  const keyPath = referenced ?? defaultKeyPath(ctx.openclawDir);
  const keyExists = await pathExists(keyPath);
  const configChanges = file.text !== undefined && JSON.stringify(data) !== JSON.stringify(file.data);
  if (!configChanges && !keyExists) {
    ctx.out.line(`Nothing to remove: ${file.path} has no vault setup and there is no key file.`);
    return EXIT.ok;
  }
  if (ctx.prompter) {
    const what = agentId ? `agent ${agentId}'s` : 'the';
    if (!(await ctx.prompter.confirm(`Remove ${what} vault setup from ${file.path} and delete its key?`))) {
      ctx.out.line('Nothing removed.');
      return EXIT.ok;
    }
  }
  if (configChanges) {
    await writeConfig(file, data);
    ctx.out.line(
      `Removed the vault plugin entry, its key reference and the vault model providers from ${file.path}.`,
    );
  }
  if (await removeKeyFile(keyPath)) ctx.out.line(`Deleted the key file ${keyPath}.`);
  if (agentId) {
    ctx.out.line(`Agent ${agentId} still exists in the vault: a workspace admin can disable or delete it.`);
  }
  return EXIT.ok;
}
