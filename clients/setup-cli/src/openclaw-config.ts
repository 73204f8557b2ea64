/**
 * OpenClaw's config file (`~/.openclaw/openclaw.json`, or `OPENCLAW_CONFIG_PATH`) and the
 * entries vlt-setup owns in it:
 *
 * - `plugins.entries.vlt-vault` — the plugin's entry: `enabled` and its `config` (baseUrl,
 *   auth, debugLevel, pollTimeoutMs, pollIntervalMs, connectedProviders);
 * - `secrets.providers.vlt-vault-agent-key` — a `file` SecretRef provider for the key file; the
 *   plugin entry's `auth.privateKey` is a SecretRef to it, so the config holds no key material;
 * - `models.providers.vlt-llm_a` … `vlt-llm_d` — one OpenClaw model provider per language-model
 *   provider the agent is connected to, pointed at the vault's LLM proxy;
 * - `plugins.load.paths` (the plugin's directory) and `plugins.allow` (when the user keeps an
 *   allowlist) — so OpenClaw loads the plugin;
 * - `agents.defaults.model` — only when asked to set a default model.
 *
 * Everything else in the file is the user's and is left exactly as it was (key order included):
 * edits are made on the parsed document itself. zod checks the shape of every section before
 * it is touched, so a config whose sections have unexpected types is reported, not clobbered.
 *
 * OpenClaw reads JSON5, but vlt-setup has no JSON5 writer: a file that is not plain JSON is
 * refused rather than rewritten without its comments. Writes are atomic (a temporary file
 * renamed over the config, as OpenClaw itself does) and refused when the file changed since
 * it was read.
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import {
  LLM_PROVIDER_IDS,
  LLM_ROUTES,
  openclawBaseUrl,
  routeByOpenClawId,
  type LlmRoute,
} from './llm-providers.js';

/** The plugin's id in OpenClaw (its manifest's `id`). */
export const PLUGIN_ID = 'vlt-vault';
/** The SecretRef provider alias that reads the key file. */
export const KEY_SECRET_PROVIDER = 'vlt-vault-agent-key';
/**
 * What `models.providers.vlt-llm_*.apiKey` holds. The agent has no provider key, and its access
 * token (which the vault's LLM proxy accepts where an SDK sends its key) lives two hours: a
 * static config value cannot carry it. The vlt-vault plugin owns these provider ids and supplies
 * a fresh agent token at request time (OpenClaw's `prepareRuntimeAuth` provider hook); this
 * marker is not a secret, only a placeholder OpenClaw's schema wants filled, and the vault
 * refuses it should it ever be sent as is.
 */
export const API_KEY_MARKER = 'vlt-agent-token-from-plugin';
export const PLUGIN_DEFAULTS = { pollTimeoutMs: 300_000, pollIntervalMs: 3_000 } as const;
const MAX_CONFIG_BYTES = 10 * 1024 * 1024;

export type JsonObject = Record<string, unknown>;

const strings = z.array(z.string());
const objectMap = z.record(z.string(), z.record(z.string(), z.unknown()));

/** The sections vlt-setup reads or edits, with the types it relies on; the rest is free. */
const ConfigShape = z.looseObject({
  plugins: z
    .looseObject({
      allow: strings.optional(),
      deny: strings.optional(),
      enabled: z.boolean().optional(),
      load: z.looseObject({ paths: strings.optional() }).optional(),
      entries: objectMap.optional(),
    })
    .optional(),
  models: z.looseObject({ providers: objectMap.optional() }).optional(),
  secrets: z.looseObject({ providers: objectMap.optional() }).optional(),
  agents: z
    .looseObject({
      defaults: z
        .looseObject({
          model: z
            .union([
              z.string(),
              z.looseObject({ primary: z.string().optional(), fallbacks: strings.optional() }),
            ])
            .optional(),
          models: z.record(z.string(), z.unknown()).optional(),
        })
        .optional(),
    })
    .optional(),
});

export const FileSecretRef = z.object({
  source: z.literal('file'),
  provider: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/),
  id: z.literal('value'),
});

const FileSecretProvider = z.looseObject({
  source: z.literal('file'),
  path: z.string().min(1),
  mode: z.literal('singleValue'),
});

/** The plugin's config as vlt-setup writes it (the interface spec's plugin configuration). */
export const VaultPluginConfig = z.looseObject({
  baseUrl: z.url({ protocol: /^https?$/ }),
  auth: z.looseObject({
    mode: z.literal('agent'),
    agentId: z.uuid(),
    // A SecretRef as written by vlt-setup, or the key inline (the plugin accepts both).
    privateKey: z.union([FileSecretRef, z.string().min(1)]),
    tokenAudience: z.string().min(1).optional(),
  }),
  debugLevel: z.enum(['silent', 'error', 'warn', 'info', 'debug']).optional(),
  pollTimeoutMs: z.number().int().positive().optional(),
  pollIntervalMs: z.number().int().positive().optional(),
  connectedProviders: strings.optional(),
});

export interface ConfigFile {
  path: string;
  /** The text as read; undefined when the file does not exist yet. */
  text: string | undefined;
  data: JsonObject;
  /** Permission bits to keep on rewrite; undefined for a new file (written 0600). */
  mode: number | undefined;
}

/** The enrolment recorded in the config. */
export interface VaultInstall {
  baseUrl: string;
  agentId: string;
  tokenAudience: string | undefined;
  key: { kind: 'file'; path: string } | { kind: 'inline'; encoded: string };
  connectedProviders: string[];
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function errno(err: unknown): string | undefined {
  return err instanceof Error && 'code' in err ? String(err.code) : undefined;
}

function issuesOf(error: z.ZodError, prefix = ''): string {
  // Paths and zod's generic messages only: values in a config may be secrets.
  return error.issues
    .slice(0, 5)
    .map((i) => `${prefix}${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
    .join('; ');
}

export async function readConfig(path: string): Promise<ConfigFile> {
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    if (errno(err) === 'ENOENT') return { path, text: undefined, data: {}, mode: undefined };
    throw new ConfigError(`cannot read the OpenClaw config ${path} (${errno(err) ?? 'error'})`);
  }
  if (st.isSymbolicLink()) {
    throw new ConfigError(`the OpenClaw config ${path} is a symbolic link`, {
      hint: 'OpenClaw and vlt-setup replace the config atomically, which would replace the link: pass --config-path with the real file',
    });
  }
  if (!st.isFile()) throw new ConfigError(`the OpenClaw config ${path} is not a regular file`);
  if (st.size > MAX_CONFIG_BYTES) throw new ConfigError(`the OpenClaw config ${path} is larger than 10 MiB`);
  const text = await readFile(path, 'utf8');
  let data: unknown;
  try {
    data = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch {
    throw new ConfigError(`the OpenClaw config ${path} is not plain JSON`, {
      hint:
        'OpenClaw also reads JSON5 (comments, trailing commas), but vlt-setup edits only plain JSON so it never ' +
        'drops your comments: remove them, or let OpenClaw rewrite the file (`openclaw config set ...`), then retry',
    });
  }
  if (!isObject(data)) throw new ConfigError(`the OpenClaw config ${path} is not a JSON object`);
  if ('$include' in data) {
    throw new ConfigError(`the OpenClaw config ${path} is split with $include`, {
      hint: 'vlt-setup edits a single file: pass --config-path with the file that holds plugins, models and secrets',
    });
  }
  const shape = ConfigShape.safeParse(data);
  if (!shape.success) {
    throw new ConfigError(`the OpenClaw config ${path} has unexpected types: ${issuesOf(shape.error)}`);
  }
  return { path, text, data, mode: st.mode & 0o777 };
}

export function serialiseConfig(data: JsonObject): string {
  return `${JSON.stringify(data, null, 2)}\n`;
}

/**
 * Writes `data` over the config atomically. Returns false, writing nothing, when the result
 * equals the file as read. Refuses when the file changed on disk since `readConfig`, so a
 * concurrent edit (OpenClaw's own, or the user's) is never silently overwritten.
 */
export async function writeConfig(file: ConfigFile, data: JsonObject): Promise<boolean> {
  const text = serialiseConfig(data);
  if (text === file.text) return false;
  const dir = dirname(file.path);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `.${basename(file.path)}.${randomBytes(6).toString('hex')}.tmp`);
  const mode = file.mode ?? 0o600;
  const fh = await open(tmp, 'wx', mode);
  try {
    try {
      await fh.chmod(mode);
      await fh.writeFile(text, 'utf8');
      await fh.sync();
    } finally {
      await fh.close();
    }
    const now = await readFile(file.path, 'utf8').catch((err: unknown) => {
      if (errno(err) === 'ENOENT') return undefined;
      throw err;
    });
    if (now !== file.text) {
      throw new ConfigError(`the OpenClaw config ${file.path} changed while vlt-setup was running`, {
        hint: 'nothing was written; run the command again',
      });
    }
    await rename(tmp, file.path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Navigation on the parsed document (already checked by ConfigShape).

/** `parent[key]` as an object, created when absent. */
function child(parent: JsonObject, key: string): JsonObject {
  const v = parent[key];
  if (isObject(v)) return v;
  const created: JsonObject = {};
  parent[key] = created;
  return created;
}

function get(parent: unknown, ...keys: string[]): unknown {
  let v = parent;
  for (const k of keys) {
    if (!isObject(v)) return undefined;
    v = v[k];
  }
  return v;
}

function stringArray(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((s) => typeof s === 'string') ? (v as string[]) : undefined;
}

/** Deletes `keys` path's last member, then every container on the path left empty by it. */
function deletePath(root: JsonObject, ...keys: string[]): boolean {
  const chain: JsonObject[] = [root];
  for (const k of keys.slice(0, -1)) {
    const next = chain[chain.length - 1]![k];
    if (!isObject(next)) return false;
    chain.push(next);
  }
  const last = keys[keys.length - 1]!;
  const holder = chain[chain.length - 1]!;
  if (!(last in holder)) return false;
  delete holder[last];
  for (let i = chain.length - 1; i > 0; i--) {
    if (Object.keys(chain[i]!).length > 0) break;
    delete chain[i - 1]![keys[i - 1]!];
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// vlt-setup's entries.

export function pluginEntry(data: JsonObject): JsonObject | undefined {
  const e = get(data, 'plugins', 'entries', PLUGIN_ID);
  return isObject(e) ? e : undefined;
}

/**
 * The enrolment in the config: undefined when there is none; a ConfigError when the plugin
 * entry is there but unusable (hand-edited, or written by something else).
 */
export function readInstall(data: JsonObject, configPath: string): VaultInstall | undefined {
  const entry = pluginEntry(data);
  if (!entry || entry.config === undefined) return undefined;
  const parsed = VaultPluginConfig.safeParse(entry.config);
  if (!parsed.success) {
    throw new ConfigError(
      `the vault plugin's entry in ${configPath} is not usable: ${issuesOf(parsed.error, `plugins.entries.${PLUGIN_ID}.config.`)}`,
      { hint: 'fix it, or run `vlt-setup --mode remove` and set up again' },
    );
  }
  const c = parsed.data;
  let key: VaultInstall['key'];
  if (typeof c.auth.privateKey === 'string') {
    key = { kind: 'inline', encoded: c.auth.privateKey };
  } else {
    const alias = c.auth.privateKey.provider;
    const provider = FileSecretProvider.safeParse(get(data, 'secrets', 'providers', alias));
    if (!provider.success) {
      throw new ConfigError(
        `the vault plugin's key reference in ${configPath} names secrets.providers.${alias}, which is not a singleValue file provider`,
        {
          hint: 'run `vlt-setup --mode reconnect` with a new bootstrap secret to write a fresh key and reference',
        },
      );
    }
    key = { kind: 'file', path: provider.data.path };
  }
  return {
    baseUrl: c.baseUrl.replace(/\/+$/, ''),
    agentId: c.auth.agentId,
    tokenAudience: c.auth.tokenAudience,
    key,
    connectedProviders: c.connectedProviders ?? [],
  };
}

export interface Enrolment {
  baseUrl: string;
  agentId: string;
  keyPath: string;
  /** The plugin's directory to add to `plugins.load.paths`; undefined to leave them alone. */
  pluginDir: string | undefined;
}

/**
 * Writes the plugin entry for an enrolment (new or renewed). Fields the user may have tuned
 * (debugLevel, poll intervals, tokenAudience, other entry settings) are kept.
 */
export function applyEnrolment(data: JsonObject, e: Enrolment): void {
  const plugins = child(data, 'plugins');
  const entry = child(child(plugins, 'entries'), PLUGIN_ID);
  entry.enabled = true;
  const config = child(entry, 'config');
  // baseUrl first in a new entry, as the plugin documents its fields; kept in place otherwise.
  config.baseUrl = e.baseUrl;
  const auth = child(config, 'auth');
  const { tokenAudience } = auth;
  for (const k of Object.keys(auth)) delete auth[k];
  Object.assign(auth, {
    mode: 'agent',
    agentId: e.agentId,
    privateKey: { source: 'file', provider: KEY_SECRET_PROVIDER, id: 'value' },
    ...(typeof tokenAudience === 'string' ? { tokenAudience } : {}),
  });
  config.pollTimeoutMs ??= PLUGIN_DEFAULTS.pollTimeoutMs;
  config.pollIntervalMs ??= PLUGIN_DEFAULTS.pollIntervalMs;
  config.connectedProviders ??= [];

  child(child(data, 'secrets'), 'providers')[KEY_SECRET_PROVIDER] = {
    source: 'file',
    path: e.keyPath,
    mode: 'singleValue',
  };

  if (e.pluginDir !== undefined) {
    const load = child(plugins, 'load');
    const paths = stringArray(load.paths) ?? [];
    if (!paths.includes(e.pluginDir)) load.paths = [...paths, e.pluginDir];
  }
  // An allowlist loads only the plugins it names: without ours there, the entry would be inert.
  const allow = stringArray(plugins.allow);
  if (allow && !allow.includes(PLUGIN_ID)) plugins.allow = [...allow, PLUGIN_ID];
}

export interface ConnectionsChange {
  connectedProviders: string[];
  added: LlmRoute[];
  removed: LlmRoute[];
}

/**
 * Records what the agent is connected to: the plugin's `connectedProviders`, and one model
 * provider per connected language-model provider (added, updated to the current base URL, or
 * removed when no longer connected). A provider entry's models and any setting the user added
 * are kept.
 */
export function applyConnections(
  data: JsonObject,
  baseUrl: string,
  providers: Iterable<string>,
): ConnectionsChange {
  const connected = [...new Set(providers)].sort();
  const entry = pluginEntry(data);
  if (!entry) throw new ConfigError(`there is no plugins.entries.${PLUGIN_ID} entry to update`);
  child(entry, 'config').connectedProviders = connected;

  const change: ConnectionsChange = { connectedProviders: connected, added: [], removed: [] };
  for (const p of LLM_PROVIDER_IDS) {
    const route = LLM_ROUTES[p];
    const existing = get(data, 'models', 'providers', route.openclawId);
    if (connected.includes(p)) {
      const providersMap = child(child(data, 'models'), 'providers');
      const entryNow = isObject(existing) ? existing : {};
      if (!isObject(existing)) change.added.push(route);
      providersMap[route.openclawId] = Object.assign(entryNow, {
        baseUrl: openclawBaseUrl(baseUrl, p),
        api: route.api,
        apiKey: API_KEY_MARKER,
        models: Array.isArray(entryNow.models) ? entryNow.models : [],
      });
    } else if (existing !== undefined) {
      deletePath(data, 'models', 'providers', route.openclawId);
      change.removed.push(route);
    }
  }
  return change;
}

/** The configured default model (`agents.defaults.model`, string or `{primary}`), if any. */
export function defaultModel(data: JsonObject): string | undefined {
  const m = get(data, 'agents', 'defaults', 'model');
  if (typeof m === 'string') return m;
  const primary = get(m, 'primary');
  return typeof primary === 'string' ? primary : undefined;
}

/** The vault provider a model ref routes through, when it is one of vlt-setup's. */
export function routeOfModelRef(ref: string | undefined): LlmRoute | undefined {
  if (ref === undefined) return undefined;
  const slash = ref.indexOf('/');
  return slash > 0 ? routeByOpenClawId(ref.slice(0, slash)) : undefined;
}

export function hasModelProvider(data: JsonObject, route: LlmRoute): boolean {
  return isObject(get(data, 'models', 'providers', route.openclawId));
}

/**
 * Makes `route`/`model` the default model: `agents.defaults.model` (its fallbacks kept when it
 * is the object form), and the model listed under its provider (OpenClaw resolves a custom
 * provider's models from that list). The provider entry must exist.
 */
export function applyDefaultModel(data: JsonObject, route: LlmRoute, model: string): void {
  const provider = get(data, 'models', 'providers', route.openclawId);
  if (!isObject(provider)) {
    throw new ConfigError(`models.providers.${route.openclawId} is not configured`);
  }
  const models = Array.isArray(provider.models) ? provider.models : [];
  if (!models.some((m) => isObject(m) && m.id === model)) models.push({ id: model, name: model });
  provider.models = models;

  const ref = `${route.openclawId}/${model}`;
  const defaults = child(child(data, 'agents'), 'defaults');
  if (isObject(defaults.model)) defaults.model.primary = ref;
  else defaults.model = ref;
}

/**
 * Takes out everything vlt-setup wrote: the plugin entry, the key's SecretRef provider, the
 * vault model providers, the plugin's load paths (`pluginPaths`, found by the caller from their
 * manifests) and allowlist entry, and default/fallback models and aliases routed through the
 * vault. Returns the key file path the config referenced, for the caller to delete.
 */
export function applyRemoval(
  data: JsonObject,
  pluginPaths: readonly string[],
): { keyPath: string | undefined } {
  const keyPath = get(data, 'secrets', 'providers', KEY_SECRET_PROVIDER, 'path');
  deletePath(data, 'plugins', 'entries', PLUGIN_ID);
  deletePath(data, 'secrets', 'providers', KEY_SECRET_PROVIDER);
  for (const route of Object.values(LLM_ROUTES)) deletePath(data, 'models', 'providers', route.openclawId);

  const paths = stringArray(get(data, 'plugins', 'load', 'paths'));
  if (paths) {
    const kept = paths.filter((p) => !pluginPaths.includes(p));
    if (kept.length === 0) deletePath(data, 'plugins', 'load', 'paths');
    else child(child(data, 'plugins'), 'load').paths = kept;
  }
  const allow = stringArray(get(data, 'plugins', 'allow'));
  // An emptied allowlist stays empty: removing it would let every plugin load.
  if (allow?.includes(PLUGIN_ID)) child(data, 'plugins').allow = allow.filter((id) => id !== PLUGIN_ID);

  const ours = (ref: unknown) => typeof ref === 'string' && routeOfModelRef(ref) !== undefined;
  const model = get(data, 'agents', 'defaults', 'model');
  if (ours(model)) {
    deletePath(data, 'agents', 'defaults', 'model');
  } else if (isObject(model)) {
    if (ours(model.primary)) delete model.primary;
    const fallbacks = stringArray(model.fallbacks);
    if (fallbacks) model.fallbacks = fallbacks.filter((f) => !ours(f));
    // Nothing left but an empty fallback list: the whole setting was vlt-setup's.
    const left = Object.keys(model).filter(
      (k) => !(k === 'fallbacks' && stringArray(model.fallbacks)?.length === 0),
    );
    if (left.length === 0) deletePath(data, 'agents', 'defaults', 'model');
  }
  const aliases = get(data, 'agents', 'defaults', 'models');
  if (isObject(aliases)) {
    for (const ref of Object.keys(aliases))
      if (ours(ref)) deletePath(data, 'agents', 'defaults', 'models', ref);
  }
  return { keyPath: typeof keyPath === 'string' ? keyPath : undefined };
}

/** `plugins.load.paths`, for the callers that look for the plugin there. */
export function pluginLoadPaths(data: JsonObject): string[] {
  return stringArray(get(data, 'plugins', 'load', 'paths')) ?? [];
}

/** Why OpenClaw would not load the plugin as configured, if it would not. */
export function pluginPolicyProblem(data: JsonObject): string | undefined {
  if (get(data, 'plugins', 'enabled') === false) return 'plugins.enabled is false: OpenClaw loads no plugin';
  if (stringArray(get(data, 'plugins', 'deny'))?.includes(PLUGIN_ID))
    return `plugins.deny lists ${PLUGIN_ID}`;
  const allow = stringArray(get(data, 'plugins', 'allow'));
  if (allow && !allow.includes(PLUGIN_ID)) return `plugins.allow does not list ${PLUGIN_ID}`;
  if (pluginEntry(data)?.enabled === false) return `plugins.entries.${PLUGIN_ID}.enabled is false`;
  return undefined;
}

/** Provider entries that disagree with the enrolment (wrong base URL or adapter), by id. */
export function providerEntryProblems(data: JsonObject, baseUrl: string): string[] {
  const problems: string[] = [];
  for (const p of LLM_PROVIDER_IDS) {
    const route = LLM_ROUTES[p];
    const e = get(data, 'models', 'providers', route.openclawId);
    if (!isObject(e)) continue;
    const want = openclawBaseUrl(baseUrl, p);
    if (e.baseUrl !== want) problems.push(`models.providers.${route.openclawId}.baseUrl is not ${want}`);
    if (e.api !== route.api) problems.push(`models.providers.${route.openclawId}.api is not ${route.api}`);
  }
  return problems;
}

/** The vault model providers present in the config. */
export function configuredRoutes(data: JsonObject): LlmRoute[] {
  return Object.values(LLM_ROUTES).filter((r) => hasModelProvider(data, r));
}
