/**
 * `setup`: first enrolment of this machine's agent and OpenClaw's config for it.
 *
 * Order matters. Everything that can be checked locally is checked before the bootstrap secret
 * is spent (flags, the config's readability, an existing setup, a stray key file, the plugin's
 * directory); a refused secret leaves nothing behind. Once the vault has enrolled the key, the
 * key is written first (without it the enrolment is lost), then the config in one atomic write.
 * If reading the capabilities fails, the config is still written with the enrolment so `sync`
 * can finish the job later.
 */
import { dirname } from 'node:path';
import {
  inputBaseUrl,
  inputBootstrapSecret,
  inputDefaultModel,
  resolvePluginDir,
  type Context,
} from '../context.js';
import { EXIT, SetupCliError, UsageError, type ExitCode } from '../errors.js';
import { defaultKeyPath, pathExists, writableDirProblem, writeKeyFile } from '../keys-store.js';
import { LLM_ROUTES, openclawBaseUrl } from '../llm-providers.js';
import {
  applyConnections,
  applyDefaultModel,
  applyEnrolment,
  defaultModel,
  hasModelProvider,
  readConfig,
  readInstall,
  writeConfig,
} from '../openclaw-config.js';
import { agentClient, enrol, vaultFailure } from '../vault.js';
import { describeConnections, llmRoutesOf } from './shared.js';

export async function runSetup(ctx: Context): Promise<ExitCode> {
  const file = await readConfig(ctx.configPath);
  const existing = readInstall(file.data, file.path);
  if (existing) {
    throw new UsageError(
      `${file.path} is already set up for agent ${existing.agentId} at ${existing.baseUrl}`,
      'to enrol again with a new bootstrap secret use --mode reconnect; to start over use --mode remove first',
    );
  }
  const keyPath = defaultKeyPath(ctx.openclawDir);
  if (await pathExists(keyPath)) {
    throw new UsageError(
      `a key file already exists at ${keyPath}, but ${file.path} does not reference it`,
      'another config may use it (pass that --config-path), or delete it if it is left over from an earlier setup',
    );
  }
  for (const dir of new Set([dirname(keyPath), dirname(file.path)])) {
    const problem = await writableDirProblem(dir);
    if (problem) throw new SetupCliError(`cannot write to ${dir}: ${problem}`);
  }
  const pluginDir = ctx.flags['skip-plugin-install'] ? undefined : await resolvePluginDir(ctx);

  const baseUrl = await inputBaseUrl(ctx);
  const bootstrapSecret = await inputBootstrapSecret(ctx);
  const model = await inputDefaultModel(ctx, {
    ask: true,
    routes: Object.values(LLM_ROUTES),
    current: defaultModel(file.data),
  });

  ctx.out.line(`Enrolling a new key with the vault at ${baseUrl} ...`);
  const enrolled = await enrol({ baseUrl, bootstrapSecret, fetch: ctx.fetch });
  ctx.addSecret(enrolled.encodedKey);
  ctx.addSecret(enrolled.privateKeyPem);
  try {
    await writeKeyFile(keyPath, enrolled.encodedKey);
  } catch (err) {
    throw new SetupCliError(
      `agent ${enrolled.agentId} was enrolled, but its key could not be saved to ${keyPath}: ${err instanceof Error ? err.message : String(err)}`,
      {
        hint: 'fix the directory, then ask a workspace admin for a new bootstrap secret and run setup again',
      },
    );
  }
  ctx.out.line(`Enrolled as agent "${enrolled.agentName}" (${enrolled.agentId}).`);
  ctx.out.line(`Private key saved to ${keyPath} (mode 0600).`);

  const client = agentClient({
    baseUrl,
    agentId: enrolled.agentId,
    privateKeyPem: enrolled.privateKeyPem,
    tokenAudience: undefined,
    fetch: ctx.fetch,
  });
  let capsFailure: SetupCliError | undefined;
  let providers: string[] | undefined;
  try {
    const caps = await client.capabilities();
    providers = caps.activeConnections.map((c) => c.provider);
    describeConnections(ctx, caps);
  } catch (err) {
    capsFailure = vaultFailure(err, baseUrl, "read the agent's capabilities");
  }

  const data = structuredClone(file.data);
  applyEnrolment(data, { baseUrl, agentId: enrolled.agentId, keyPath, pluginDir });
  let modelFailure: string | undefined;
  if (providers) {
    applyConnections(data, baseUrl, providers);
    if (model && hasModelProvider(data, model.route)) applyDefaultModel(data, model.route, model.model);
    else if (model) {
      modelFailure =
        `the default model was not set: the agent has no ${model.route.vaultProvider} connection, so ` +
        `${model.route.openclawId} is not configured`;
    }
  }
  try {
    await writeConfig(file, data);
  } catch (err) {
    // Enrolled, key saved, config not written: setup would now refuse (stray key file) and
    // reconnect needs the config, so say exactly how to start over.
    throw new SetupCliError(
      `agent ${enrolled.agentId} was enrolled and its key saved to ${keyPath}, but ${file.path} could not be written: ${err instanceof Error ? err.message : String(err)}`,
      {
        hint: `fix that, delete ${keyPath}, then run setup again with a new bootstrap secret from a workspace admin`,
      },
    );
  }
  ctx.out.line(`Wrote ${file.path}:`);
  ctx.out.line(
    `  plugins.entries.vlt-vault for agent ${enrolled.agentId}${pluginDir ? `, loaded from ${pluginDir}` : ''}`,
  );
  const llm = providers ? llmRoutesOf(providers) : [];
  for (const r of llm)
    ctx.out.line(`  models.providers.${r.openclawId} -> ${openclawBaseUrl(baseUrl, r.vaultProvider)}`);
  if (providers && llm.length === 0) ctx.out.line('  no LLM provider is connected to this agent yet');
  if (model && !modelFailure && providers) ctx.out.line(`  default model: ${model.ref}`);

  if (capsFailure) {
    ctx.out.error(capsFailure.message);
    ctx.out.line(
      'The agent is enrolled and its plugin entry written; run `vlt-setup --mode sync` once the vault answers.',
    );
    return EXIT.failed;
  }
  if (modelFailure) {
    ctx.out.error(modelFailure);
    ctx.out.line(
      'Ask a workspace admin to connect it to the agent, then run `vlt-setup --mode sync` and `--mode change-model`.',
    );
    return EXIT.failed;
  }
  return onboard(ctx, file.text === undefined);
}

/**
 * OpenClaw's own onboarding (`openclaw onboard`) is offered after a setup that created the
 * config, i.e. on an OpenClaw that was never configured. It asks for consent and risk
 * acknowledgements of its own, so it is only ever run at the user's terminal, after asking;
 * without a terminal the next step is printed instead.
 */
async function onboard(ctx: Context, freshConfig: boolean): Promise<ExitCode> {
  if (ctx.flags['skip-onboard'] || !freshConfig) return EXIT.ok;
  const env = { ...ctx.io.env, OPENCLAW_STATE_DIR: ctx.openclawDir, OPENCLAW_CONFIG_PATH: ctx.configPath };
  const how = `OPENCLAW_STATE_DIR='${ctx.openclawDir}' OPENCLAW_CONFIG_PATH='${ctx.configPath}' openclaw onboard`;
  if (!ctx.prompter || !ctx.io.runCommand) {
    ctx.out.line(`Next: finish OpenClaw's own setup with: ${how}`);
    return EXIT.ok;
  }
  if (
    !(await ctx.prompter.confirm(
      'OpenClaw had no config before. Run `openclaw onboard` now to finish its setup?',
      true,
    ))
  ) {
    ctx.out.line(`Skipped. Later: ${how}`);
    return EXIT.ok;
  }
  try {
    const status = await ctx.io.runCommand('openclaw', ['onboard'], env);
    if (status === 0) return EXIT.ok;
    ctx.out.error(`openclaw onboard exited with status ${status}; the vault setup itself is complete`);
  } catch (err) {
    ctx.out.error(
      `could not run openclaw onboard (${err instanceof Error ? err.message : String(err)}); the vault setup itself is complete`,
    );
  }
  ctx.out.line(`Run it yourself: ${how} (or pass --skip-onboard)`);
  return EXIT.failed;
}
