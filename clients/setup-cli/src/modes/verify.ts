/**
 * `verify`: checks the setup end to end and changes nothing — it only reads the config and
 * the key file and calls the vault (health, token exchange, capabilities). Each check prints
 * one line; exit 0 when none fails, 1 otherwise. Warnings (a stale connection list, a plugin
 * path not registered by vlt-setup) do not fail the run.
 *
 * Deadlines: the health check gives the vault five seconds; when it fails, the checks that
 * need the vault are skipped rather than each waiting out its own deadline, so an unreachable
 * or silent vault is reported in about five seconds.
 */
import { VaultAuthError } from '@vlt/sdk';
import { loadAgentKey, pluginManifestId, requireInstall, type Context } from '../context.js';
import { EXIT, SetupCliError, type ExitCode } from '../errors.js';
import { keyDirProblem } from '../keys-store.js';
import {
  PLUGIN_ID,
  defaultModel,
  hasModelProvider,
  pluginLoadPaths,
  pluginPolicyProblem,
  providerEntryProblems,
  readConfig,
  routeOfModelRef,
} from '../openclaw-config.js';
import { HEALTH_TIMEOUT_MS, agentClient, healthProblem, networkReason } from '../vault.js';
import { RECONNECT_HINT } from './sync.js';

type Verdict = 'ok' | 'warn' | 'fail' | 'skip';

export async function runVerify(ctx: Context): Promise<ExitCode> {
  let failed = false;
  const report = (verdict: Verdict, what: string, detail: string, hint?: string) => {
    if (verdict === 'fail') failed = true;
    ctx.out.line(`${verdict.toUpperCase().padEnd(4)}  ${what}: ${detail}`);
    if (hint) ctx.out.line(`      ${hint}`);
  };
  const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

  // 1. The config and the plugin entry: without them nothing else can be checked.
  let file;
  let install;
  try {
    file = await readConfig(ctx.configPath);
    install = requireInstall(file);
  } catch (err) {
    report('fail', 'config', message(err), err instanceof SetupCliError ? err.hint : undefined);
    return EXIT.failed;
  }
  report('ok', 'config', `${file.path}: agent ${install.agentId} at ${install.baseUrl}`);

  // The vault's health is checked while the local checks run: it may take its full deadline.
  const health = healthProblem(install.baseUrl, ctx.fetch);

  // 2. The key.
  let privateKeyPem: string | undefined;
  try {
    privateKeyPem = await loadAgentKey(ctx, install);
    if (install.key.kind === 'inline') {
      report(
        'warn',
        'key',
        'the private key is inlined in the config',
        'run --mode reconnect to move it to a 0600 key file',
      );
    } else {
      const dirProblem = await keyDirProblem(install.key.path);
      if (dirProblem) report('fail', 'key', dirProblem);
      else report('ok', 'key', `${install.key.path} is private (0600) and holds an ES256 key`);
    }
  } catch (err) {
    report(
      'fail',
      'key',
      message(err),
      err instanceof SetupCliError ? (err.hint ?? RECONNECT_HINT) : undefined,
    );
  }

  // 3. Whether OpenClaw would load the plugin.
  const policy = pluginPolicyProblem(file.data);
  if (policy) report('fail', 'plugin', `OpenClaw would not load ${PLUGIN_ID}: ${policy}`);
  else {
    const paths = pluginLoadPaths(file.data);
    const ids = await Promise.all(paths.map((p) => pluginManifestId(p)));
    const path = paths.find((_, i) => ids[i] === PLUGIN_ID);
    if (path) report('ok', 'plugin', `${PLUGIN_ID} is enabled and loaded from ${path}`);
    else {
      report(
        'warn',
        'plugin',
        `${PLUGIN_ID} is enabled, but no plugins.load.paths entry holds it`,
        'fine if it was installed with `openclaw plugins install`; otherwise run setup without --skip-plugin-install',
      );
    }
  }

  // 4. The model providers and the default model.
  const problems = providerEntryProblems(file.data, install.baseUrl);
  if (problems.length > 0) report('fail', 'models', problems.join('; '), 'run vlt-setup --mode sync');
  else report('ok', 'models', 'every vault model provider points at the LLM proxy');
  const ref = defaultModel(file.data);
  const route = routeOfModelRef(ref);
  if (route && !hasModelProvider(file.data, route)) {
    report(
      'fail',
      'default model',
      `${ref} uses ${route.openclawId}, which is not configured`,
      'run --mode change-model',
    );
  }

  // 5. The vault itself.
  const healthIssue = await health;
  if (healthIssue) {
    report(
      'fail',
      'vault',
      `${install.baseUrl} is not healthy: ${healthIssue} (deadline ${HEALTH_TIMEOUT_MS / 1000} s)`,
      'check the URL and that the vault is running',
    );
    report('skip', 'agent', 'not checked: the vault is not answering');
    return EXIT.failed;
  }
  report('ok', 'vault', `${install.baseUrl}/health answers`);

  // 6. The agent's credentials and capabilities.
  if (!privateKeyPem) {
    report('skip', 'agent', 'not checked: no usable key');
    return EXIT.failed;
  }
  const client = agentClient({
    baseUrl: install.baseUrl,
    agentId: install.agentId,
    privateKeyPem,
    tokenAudience: install.tokenAudience,
    fetch: ctx.fetch,
    timeoutMs: HEALTH_TIMEOUT_MS,
  });
  try {
    const caps = await client.capabilities();
    if (caps.agentId !== install.agentId) {
      report('fail', 'agent', `the vault answered for agent ${caps.agentId}, not ${install.agentId}`);
    } else {
      report('ok', 'agent', `the vault accepts agent ${install.agentId}'s key`);
      const now = [...new Set(caps.activeConnections.map((c) => c.provider))].sort();
      const recorded = [...install.connectedProviders].sort();
      if (now.join(',') === recorded.join(',')) {
        report('ok', 'connections', now.length > 0 ? now.join(', ') : 'none yet');
      } else {
        report(
          'warn',
          'connections',
          `the vault lists ${now.join(', ') || 'none'}, the config ${recorded.join(', ') || 'none'}`,
          'run vlt-setup --mode sync',
        );
      }
    }
  } catch (err) {
    if (err instanceof VaultAuthError) report('fail', 'agent', err.message, RECONNECT_HINT);
    else report('fail', 'agent', networkReason(err) ?? message(err));
  }
  return failed ? EXIT.failed : EXIT.ok;
}
