/**
 * `runCli(argv, io)`: the whole CLI as a function of its arguments and its io, returning the
 * exit status. It parses the flags, resolves the mode and the paths, runs the mode (and
 * `--sync` / `--verify` after it), and turns every failure into a message and an exit code.
 * It never touches `process`: main.ts does that.
 */
import { parseArgs } from 'node:util';
import {
  bootstrapSecretProblem,
  checkBaseUrl,
  modelRefProblem,
  resolvePaths,
  type Context,
  type Flags,
} from './context.js';
import { CancelledError, EXIT, SetupCliError, UsageError, type ExitCode } from './errors.js';
import { Out, Prompter, type CliIo } from './io.js';
import { LLM_ROUTES } from './llm-providers.js';
import { runChangeModel } from './modes/change-model.js';
import { runConfigureConnections } from './modes/configure-connections.js';
import { runReconnect } from './modes/reconnect.js';
import { runRemove } from './modes/remove.js';
import { runSetup } from './modes/setup.js';
import { runSync } from './modes/sync.js';
import { runVerify } from './modes/verify.js';
import { readConfig, readInstall } from './openclaw-config.js';

export const MODES = [
  'setup',
  'configure-connections',
  'change-model',
  'reconnect',
  'sync',
  'verify',
  'remove',
] as const;
export type Mode = (typeof MODES)[number];

const OPTIONS = {
  'base-url': { type: 'string' },
  'bootstrap-secret': { type: 'string' },
  'default-model': { type: 'string' },
  mode: { type: 'string' },
  'config-path': { type: 'string' },
  'openclaw-dir': { type: 'string' },
  'non-interactive': { type: 'boolean' },
  'skip-onboard': { type: 'boolean' },
  'skip-plugin-install': { type: 'boolean' },
  sync: { type: 'boolean' },
  verify: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Flags every mode accepts. */
const COMMON = new Set<keyof Flags>(['mode', 'config-path', 'openclaw-dir', 'non-interactive', 'help']);
/** The flags each mode uses besides the common ones; any other is a usage error, not ignored. */
const MODE_FLAGS: Record<Mode, readonly (keyof Flags)[]> = {
  setup: [
    'base-url',
    'bootstrap-secret',
    'default-model',
    'skip-onboard',
    'skip-plugin-install',
    'sync',
    'verify',
  ],
  'configure-connections': ['verify'],
  'change-model': ['default-model', 'sync', 'verify'],
  reconnect: ['base-url', 'bootstrap-secret', 'sync', 'verify'],
  sync: ['verify'],
  verify: [],
  remove: [],
};

const RUN: Record<Mode, (ctx: Context) => Promise<ExitCode>> = {
  setup: runSetup,
  'configure-connections': runConfigureConnections,
  'change-model': runChangeModel,
  reconnect: runReconnect,
  sync: runSync,
  verify: runVerify,
  remove: runRemove,
};

export function helpText(): string {
  const providers = Object.values(LLM_ROUTES)
    .map((r) => `${r.openclawId} (${r.describe})`)
    .join(', ');
  return `vlt-setup: enrol this machine's agent with the vault and configure OpenClaw to use it.

Usage:
  vlt-setup [--base-url URL] [--bootstrap-secret vltb_...] [options]   (setup)
  vlt-setup --mode MODE [options]

Modes:
  setup                  Generate an ES256 key pair, enrol it (POST /v1/agents/bootstrap), read the
                         agent's capabilities (GET /v1/capabilities/me) and write OpenClaw's config: the
                         vlt-vault plugin entry, the private key in a 0600 file it references, and one
                         model provider per connected LLM provider, pointed at
                         <base-url>/v1/vault/llm/<provider>. The default mode when --base-url or
                         --bootstrap-secret is given. Refuses to replace an existing setup.
  configure-connections  Interactive only. Show the agent's connections, ask workspace admins for
                         access to more actions, revoke a connection; then sync.
  change-model           Set OpenClaw's default model (--default-model) to a model of a configured
                         vault LLM provider. Works offline.
  reconnect              Enrol again with a new bootstrap secret and a new key pair, e.g. after the
                         agent was disabled. Keeps the rest of the config; --base-url moves vaults.
  sync                   Re-read the agent's capabilities and rewrite connectedProviders and the LLM
                         provider entries. Nothing else changes.
  verify                 Check the config, the key file, the vault's health (GET /health, 5 s
                         deadline), the agent's credentials and connections. Changes nothing. Exit 0
                         when every check passes, 1 otherwise.
  remove                 Remove everything vlt-setup wrote from the config and delete the key file.
                         The agent itself stays in the vault.

Options:
  --base-url URL             The vault's address. https, or http for localhost only (or with
                             VLT_SETUP_ALLOW_HTTP=1).
  --bootstrap-secret SECRET  The one-time secret a workspace admin got when creating the agent; it
                             starts with vltb_. Prefer VLT_BOOTSTRAP_SECRET or the hidden prompt:
                             command lines are visible to other users of this machine.
  --default-model REF        OpenClaw's default model as <provider>/<model>, provider one of
                             ${providers}
                             (llm_a/<model> is accepted for vlt-llm_a/<model>).
  --mode MODE                One of the modes above.
  --config-path FILE         OpenClaw's config file. Default: $OPENCLAW_CONFIG_PATH, else
                             <openclaw-dir>/openclaw.json.
  --openclaw-dir DIR         OpenClaw's state directory; the key is kept in DIR/vlt-vault/.
                             Default: $OPENCLAW_STATE_DIR, else ~/.openclaw.
  --non-interactive          Never prompt: missing input is an error (exit 2). Also the behaviour
                             whenever stdin is not a terminal.
  --skip-onboard             After setup, do not offer to run \`openclaw onboard\` (OpenClaw's own
                             first-run setup, offered only when the config did not exist).
  --skip-plugin-install      Do not add the plugin's directory to plugins.load.paths (when the
                             plugin is installed another way, e.g. \`openclaw plugins install\`).
  --sync                     After the mode, run sync.
  --verify                   After the mode, run verify; its result is the exit status.
  -h, --help                 Show this help.

Environment:
  VLT_BOOTSTRAP_SECRET   The bootstrap secret, when --bootstrap-secret is not given.
  OPENCLAW_STATE_DIR     Default for --openclaw-dir.
  OPENCLAW_CONFIG_PATH   Default for --config-path (ignored when --openclaw-dir is given).
  VLT_AGENT_PLUGIN_DIR   The vlt-vault plugin's directory (default: the agent-plugin package
                         installed beside vlt-setup).
  VLT_SETUP_ALLOW_HTTP   Set to 1 to accept a plain-http base URL that is not localhost.

Exit status: 0 done; 1 failed (for verify: a check failed); 2 usage error or missing input;
130 cancelled at a prompt.
`;
}

/** Scrubs every registered secret from a string before it is printed. */
function scrubber(secrets: Set<string>): (s: string) => string {
  return (s) => {
    let out = s;
    for (const secret of secrets) if (secret.length >= 8) out = out.split(secret).join('[redacted]');
    return out;
  };
}

function parse(argv: readonly string[]): Flags {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: true });
  } catch (err) {
    // parseArgs quotes the offending token: withheld should it be a secret in the wrong place.
    const message = err instanceof Error ? err.message : String(err);
    throw new UsageError(message.includes('vltb_') ? 'invalid option' : message, 'see vlt-setup --help');
  }
  const [positional] = parsed.positionals;
  if (positional !== undefined) {
    const hint = (MODES as readonly string[]).includes(positional)
      ? `did you mean --mode ${positional}?`
      : 'see vlt-setup --help';
    // A stray positional may be a secret pasted in the wrong place: it is not repeated.
    throw new UsageError('unexpected argument (vlt-setup takes only options)', hint);
  }
  return parsed.values;
}

async function resolveMode(flags: Flags, ctx: Context): Promise<Mode> {
  if (flags.mode !== undefined) {
    if (!(MODES as readonly string[]).includes(flags.mode)) {
      throw new UsageError(`--mode must be one of ${MODES.join(', ')}`);
    }
    return flags.mode as Mode;
  }
  if (flags['base-url'] !== undefined || flags['bootstrap-secret'] !== undefined) return 'setup';
  if (!ctx.prompter) {
    throw new UsageError(
      'nothing to do: no --mode, --base-url or --bootstrap-secret',
      'pass --base-url and --bootstrap-secret to set up, or --mode (see vlt-setup --help)',
    );
  }
  // At a terminal with no instructions: set up when there is nothing yet, else ask.
  const file = await readConfig(ctx.configPath);
  const install = readInstall(file.data, file.path);
  if (!install) return 'setup';
  ctx.out.line(`${file.path} is set up for agent ${install.agentId} at ${install.baseUrl}.`);
  const listed = MODES.filter((m) => m !== 'setup');
  listed.forEach((m, i) => ctx.out.line(`  ${i + 1}. ${m}`));
  const answer = await ctx.prompter.askValid('What would you like to do? Enter a number', (a) => {
    const n = Number(a);
    return Number.isInteger(n) && n >= 1 && n <= listed.length
      ? undefined
      : `enter a number between 1 and ${listed.length}`;
  });
  return listed[Number(answer) - 1]!;
}

/**
 * Flags that do not apply to the mode, and values that cannot be right, are refused before the
 * mode does anything: a usage error must never cost a bootstrap secret or touch a file.
 */
function checkFlagsFor(mode: Mode, flags: Flags, env: CliIo['env']): void {
  const allowed = new Set<keyof Flags>([...COMMON, ...MODE_FLAGS[mode]]);
  for (const [name, value] of Object.entries(flags) as [keyof Flags, unknown][]) {
    if (value !== undefined && !allowed.has(name))
      throw new UsageError(`--${name} does not apply to --mode ${mode}`);
  }
  const baseUrl = flags['base-url'];
  if (baseUrl !== undefined) {
    const r = checkBaseUrl(baseUrl, env);
    if ('problem' in r) throw new UsageError(`--base-url: ${r.problem}`);
  }
  const secret = flags['bootstrap-secret'];
  const secretProblem = secret === undefined ? undefined : bootstrapSecretProblem(secret);
  if (secretProblem) throw new UsageError(`--bootstrap-secret: ${secretProblem}`);
  const model = flags['default-model'];
  const modelProblem = model === undefined ? undefined : modelRefProblem(model);
  if (modelProblem) throw new UsageError(`--default-model: ${modelProblem}`);
}

export async function runCli(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const secrets = new Set<string>();
  const scrub = scrubber(secrets);
  const out = new Out(io, scrub);
  let prompter: Prompter | undefined;
  try {
    const flags = parse(argv);
    if (flags.help) {
      io.stdout.write(helpText());
      return EXIT.ok;
    }
    // Prompts only at a terminal: a pipe or a CI job must never wait for an answer.
    if (!flags['non-interactive'] && io.stdin.isTTY === true) prompter = new Prompter(io);
    const paths = resolvePaths(flags, io);
    const ctx: Context = {
      io,
      out,
      flags,
      fetch: io.fetch ?? globalThis.fetch,
      prompter,
      ...paths,
      addSecret: (s) => {
        secrets.add(s);
      },
    };
    // Registered before anything can fail, so even a usage error cannot echo it.
    if (flags['bootstrap-secret'] !== undefined) ctx.addSecret(flags['bootstrap-secret']);
    if (io.env.VLT_BOOTSTRAP_SECRET) ctx.addSecret(io.env.VLT_BOOTSTRAP_SECRET);

    const mode = await resolveMode(flags, ctx);
    checkFlagsFor(mode, flags, io.env);
    const status = await RUN[mode](ctx);
    if (status !== EXIT.ok) return status;
    if (flags.sync && mode !== 'sync') {
      out.line('--sync:');
      const s = await runSync(ctx);
      if (s !== EXIT.ok) return s;
    }
    if (flags.verify && mode !== 'verify') {
      out.line('--verify:');
      return await runVerify(ctx);
    }
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CancelledError) {
      io.stderr.write('\n');
      out.error('cancelled');
      return EXIT.cancelled;
    }
    if (err instanceof SetupCliError) {
      out.error(err.message);
      if (err.hint) io.stderr.write(`${scrub(`hint: ${err.hint}`)}\n`);
      return err.exitCode;
    }
    // Unexpected: the message only (a stack would add nothing for the user and may quote data).
    out.error(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
    return EXIT.failed;
  } finally {
    prompter?.close();
  }
}
