/**
 * What every mode shares: the parsed flags, the resolved paths, the output and the prompter,
 * and the steps several modes take (reading the inputs, finding the enrolment and its key,
 * opening an agent client, locating the plugin).
 */
import { readFile, stat } from 'node:fs/promises';
import { isIPv4 } from 'node:net';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FetchLike } from '@vlt/sdk';
import { SetupCliError, UsageError } from './errors.js';
import type { CliIo, Out, Prompter } from './io.js';
import { readKeyFile, decodeAgentKey } from './keys-store.js';
import { LLM_ROUTES, parseModelRef, type LlmRoute } from './llm-providers.js';
import { PLUGIN_ID, readInstall, type ConfigFile, type VaultInstall } from './openclaw-config.js';
import { agentClient } from './vault.js';

export interface Flags {
  'base-url'?: string | undefined;
  'bootstrap-secret'?: string | undefined;
  'default-model'?: string | undefined;
  mode?: string | undefined;
  'config-path'?: string | undefined;
  'openclaw-dir'?: string | undefined;
  'non-interactive'?: boolean | undefined;
  'skip-onboard'?: boolean | undefined;
  'skip-plugin-install'?: boolean | undefined;
  sync?: boolean | undefined;
  verify?: boolean | undefined;
  help?: boolean | undefined;
}

export interface Context {
  io: CliIo;
  out: Out;
  flags: Flags;
  fetch: FetchLike;
  /** Undefined when the CLI may not prompt (--non-interactive, or stdin is not a terminal). */
  prompter: Prompter | undefined;
  openclawDir: string;
  configPath: string;
  /** Registers a secret so nothing the CLI prints can contain it. */
  addSecret(secret: string): void;
}

const BOOTSTRAP_PREFIX = 'vltb_';

function expandHome(p: string, home: string): string {
  return p === '~' ? home : p.startsWith('~/') ? join(home, p.slice(2)) : p;
}

/** The OpenClaw state directory and config path, from flags, then OpenClaw's own variables. */
export function resolvePaths(flags: Flags, io: CliIo): { openclawDir: string; configPath: string } {
  const abs = (p: string) => resolve(io.cwd, expandHome(p, io.homeDir));
  const envDir = io.env.OPENCLAW_STATE_DIR || undefined;
  const openclawDir = abs(flags['openclaw-dir'] ?? envDir ?? join(io.homeDir, '.openclaw'));
  // An explicit --openclaw-dir means "that installation": its config, not the environment's.
  const envConfig =
    flags['openclaw-dir'] === undefined ? io.env.OPENCLAW_CONFIG_PATH || undefined : undefined;
  const configPath = abs(flags['config-path'] ?? envConfig ?? join(openclawDir, 'openclaw.json'));
  return { openclawDir, configPath };
}

/** Hosts whose traffic never leaves the machine: `localhost`, `[::1]` and 127.0.0.0/8 literals. */
function isLoopback(hostname: string): boolean {
  return (
    hostname === 'localhost' || hostname === '[::1]' || (isIPv4(hostname) && hostname.startsWith('127.'))
  );
}

/** The vault's base URL, normalised (no trailing slash), or why it is not acceptable. */
export function checkBaseUrl(raw: string, env: CliIo['env']): { url: string } | { problem: string } {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    return { problem: 'the base URL must be an absolute URL such as https://vault.example.com' };
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return { problem: 'the base URL must use https' };
  if (u.username || u.password) return { problem: 'the base URL must not contain credentials' };
  if (u.search || u.hash) return { problem: 'the base URL must not have a query or a fragment' };
  // The bootstrap secret and the agent's tokens travel to this address: plain HTTP only where
  // it cannot leave the machine, unless the operator explicitly accepts it.
  if (u.protocol === 'http:' && !isLoopback(u.hostname) && env.VLT_SETUP_ALLOW_HTTP !== '1') {
    return {
      problem:
        'the base URL must use https (plain http is accepted for localhost only, or with VLT_SETUP_ALLOW_HTTP=1)',
    };
  }
  return { url: `${u.origin}${u.pathname}`.replace(/\/+$/, '') };
}

/** Only the verdict: the message never repeats any part of what was given. */
export function bootstrapSecretProblem(secret: string): string | undefined {
  if (!secret.startsWith(BOOTSTRAP_PREFIX)) {
    return 'the bootstrap secret must start with vltb_ (a workspace admin gets it when creating the agent)';
  }
  if (!/^[\x21-\x7e]{6,200}$/.test(secret))
    return 'the bootstrap secret has characters or a length a bootstrap secret never has';
  return undefined;
}

export function modelRefProblem(ref: string): string | undefined {
  if (parseModelRef(ref)) return undefined;
  const ids = Object.values(LLM_ROUTES)
    .map((r) => r.openclawId)
    .join(', ');
  return `the default model must be <provider>/<model> with a provider among ${ids} (for example ${LLM_ROUTES.llm_a.openclawId}/<model-id>)`;
}

function missing(what: string, flag: string): UsageError {
  return new UsageError(
    `${what} is required`,
    `pass ${flag}, or run in a terminal without --non-interactive to be asked`,
  );
}

/** --base-url, else `fallback` (the current enrolment's, for reconnect), else a prompt. */
export async function inputBaseUrl(ctx: Context, fallback?: string): Promise<string> {
  const given = ctx.flags['base-url'];
  if (given !== undefined) {
    const r = checkBaseUrl(given, ctx.io.env);
    if ('problem' in r) throw new UsageError(`--base-url: ${r.problem}`);
    return r.url;
  }
  if (fallback !== undefined) return fallback;
  if (!ctx.prompter) throw missing('the vault base URL', '--base-url');
  const answer = await ctx.prompter.askValid('Vault base URL (e.g. https://vault.example.com)', (a) => {
    const r = checkBaseUrl(a, ctx.io.env);
    return 'problem' in r ? r.problem : undefined;
  });
  const r = checkBaseUrl(answer, ctx.io.env);
  return 'url' in r ? r.url : answer;
}

/** --bootstrap-secret, else VLT_BOOTSTRAP_SECRET, else a hidden prompt. */
export async function inputBootstrapSecret(ctx: Context): Promise<string> {
  const given = ctx.flags['bootstrap-secret'] ?? (ctx.io.env.VLT_BOOTSTRAP_SECRET || undefined);
  if (given !== undefined) {
    ctx.addSecret(given);
    const problem = bootstrapSecretProblem(given);
    if (problem) throw new UsageError(`--bootstrap-secret: ${problem}`);
    return given;
  }
  if (!ctx.prompter) throw missing('a bootstrap secret', '--bootstrap-secret (or set VLT_BOOTSTRAP_SECRET)');
  const secret = await ctx.prompter.askValid(
    'Bootstrap secret from your workspace admin (starts with vltb_; input is hidden)',
    (a) => {
      ctx.addSecret(a);
      return bootstrapSecretProblem(a);
    },
    { hidden: true },
  );
  return secret;
}

/**
 * --default-model, else (when `ask`) a prompt where an empty answer means "leave it". Returns
 * the parsed reference or undefined.
 */
export async function inputDefaultModel(
  ctx: Context,
  o: { ask: boolean; routes: readonly LlmRoute[]; current?: string | undefined },
): Promise<{ route: LlmRoute; model: string; ref: string } | undefined> {
  const given = ctx.flags['default-model'];
  if (given !== undefined) {
    const problem = modelRefProblem(given);
    if (problem) throw new UsageError(`--default-model: ${problem}`);
    return parseModelRef(given);
  }
  if (!o.ask || !ctx.prompter) return undefined;
  ctx.out.line('LLM providers through the vault (only those connected to the agent are configured):');
  for (const r of o.routes)
    ctx.out.line(`  ${r.openclawId.padEnd(10)} ${r.describe} (vault provider ${r.vaultProvider})`);
  if (o.current) ctx.out.line(`Current default model: ${o.current}`);
  const answer = await ctx.prompter.askValid(
    'Default model as <provider>/<model> (empty: leave unchanged)',
    (a) => (a === '' ? undefined : modelRefProblem(a)),
  );
  return answer === '' ? undefined : parseModelRef(answer);
}

/** The enrolment, or a failure telling the user to set up first. */
export function requireInstall(file: ConfigFile): VaultInstall {
  const install = readInstall(file.data, file.path);
  if (!install) {
    throw new SetupCliError(`${file.path} has no vault setup (no plugins.entries.${PLUGIN_ID})`, {
      hint: 'run vlt-setup --base-url <url> --bootstrap-secret <vltb_...> first (or pass --config-path)',
    });
  }
  return install;
}

/** The agent's private key (PKCS8 PEM), from its key file or, if hand-inlined, the config. */
export async function loadAgentKey(ctx: Context, install: VaultInstall): Promise<string> {
  const pem =
    install.key.kind === 'file'
      ? await readKeyFile(install.key.path)
      : decodeAgentKey(install.key.encoded, 'the private key inlined in the config');
  ctx.addSecret(pem);
  return pem;
}

export async function openAgentClient(ctx: Context, install: VaultInstall, timeoutMs?: number) {
  const privateKeyPem = await loadAgentKey(ctx, install);
  return agentClient({
    baseUrl: install.baseUrl,
    agentId: install.agentId,
    privateKeyPem,
    tokenAudience: install.tokenAudience,
    fetch: ctx.fetch,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  });
}

// ---------------------------------------------------------------------------------------------
// The plugin's directory.

const MANIFEST = 'openclaw.plugin.json';

/** The `id` in `<dir>/openclaw.plugin.json`, or undefined when there is no readable manifest. */
export async function pluginManifestId(dir: string): Promise<string | undefined> {
  try {
    const manifest: unknown = JSON.parse(await readFile(join(dir, MANIFEST), 'utf8'));
    const id =
      typeof manifest === 'object' && manifest !== null ? (manifest as { id?: unknown }).id : undefined;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The agent-plugin package beside this one (`clients/setup-cli` → `clients/agent-plugin`). */
async function siblingPluginDir(): Promise<string | undefined> {
  let dir = dirname(fileURLToPath(import.meta.url));
  // src/ or dist/ under the package, at most a few levels up.
  for (let i = 0; i < 4; i++) {
    try {
      const pkg: unknown = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8'));
      if ((pkg as { name?: unknown }).name === '@vlt/setup-cli') return join(dirname(dir), 'agent-plugin');
    } catch {
      // not the package root; keep climbing
    }
    dir = dirname(dir);
  }
  return undefined;
}

/**
 * The plugin's directory for `plugins.load.paths`: VLT_AGENT_PLUGIN_DIR, else the io's, else the
 * agent-plugin package next to this CLI. It must hold the plugin's manifest with the expected
 * id; checked before enrolment so a missing plugin never costs a bootstrap secret.
 */
export async function resolvePluginDir(ctx: Context): Promise<string> {
  const configured = ctx.io.env.VLT_AGENT_PLUGIN_DIR || ctx.io.pluginDir;
  const dir = configured ? resolve(ctx.io.cwd, configured) : await siblingPluginDir();
  const hint =
    'install the plugin (its directory must hold openclaw.plugin.json), set VLT_AGENT_PLUGIN_DIR to it, ' +
    'or pass --skip-plugin-install to leave plugins.load.paths alone';
  if (!dir || !isAbsolute(dir))
    throw new SetupCliError('cannot find the vlt-vault OpenClaw plugin', { hint });
  const isDir = await stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  const id = isDir ? await pluginManifestId(dir) : undefined;
  if (id === undefined) throw new SetupCliError(`no OpenClaw plugin manifest in ${dir}`, { hint });
  if (id !== PLUGIN_ID) {
    throw new SetupCliError(`the plugin in ${dir} is "${id}", not ${PLUGIN_ID}`, { hint });
  }
  return dir;
}
