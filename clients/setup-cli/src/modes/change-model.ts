/**
 * `change-model`: makes a model of a configured vault provider OpenClaw's default
 * (`agents.defaults.model`) and lists it under its provider. Offline: the provider must
 * already be configured, i.e. connected at the last setup or sync.
 */
import { inputDefaultModel, requireInstall, type Context } from '../context.js';
import { EXIT, SetupCliError, UsageError, type ExitCode } from '../errors.js';
import {
  applyDefaultModel,
  configuredRoutes,
  defaultModel,
  hasModelProvider,
  readConfig,
  writeConfig,
} from '../openclaw-config.js';

export async function runChangeModel(ctx: Context): Promise<ExitCode> {
  const file = await readConfig(ctx.configPath);
  requireInstall(file);
  const routes = configuredRoutes(file.data);
  if (routes.length === 0) {
    throw new SetupCliError(
      'no LLM provider is configured: the agent had no LLM connection at the last sync',
      {
        hint: 'ask a workspace admin to connect one to the agent, run vlt-setup --mode sync, then retry',
      },
    );
  }
  const model = await inputDefaultModel(ctx, { ask: true, routes, current: defaultModel(file.data) });
  if (!model) {
    if (!ctx.prompter) throw new UsageError('--default-model is required for --mode change-model');
    ctx.out.line('Default model left unchanged.');
    return EXIT.ok;
  }
  if (!hasModelProvider(file.data, model.route)) {
    throw new SetupCliError(
      `${model.route.openclawId} is not configured: the agent had no ${model.route.vaultProvider} connection at the last sync`,
      { hint: 'ask a workspace admin to connect it to the agent, run vlt-setup --mode sync, then retry' },
    );
  }
  const data = structuredClone(file.data);
  applyDefaultModel(data, model.route, model.model);
  const written = await writeConfig(file, data);
  ctx.out.line(
    written ? `Default model set to ${model.ref} in ${file.path}.` : `Default model is already ${model.ref}.`,
  );
  return EXIT.ok;
}
