/**
 * vlt-setup (clients/setup-cli, ADR 0058) against the real all-in-one gateway, whose four LLM
 * providers are API-key connections on the mock LLM. End-to-end cases run the CLI as a real
 * process; the fine-grained ones call `runCli` in this process; the interactive ones run it on
 * a pseudo-terminal (util-linux `script`). Admin-side setup (agents, policies, disabling, new
 * bootstrap secrets) uses the test helpers and the SDK's admin client. OpenClaw itself is never
 * run: every setup passes --skip-onboard.
 */
import { createPrivateKey, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VaultAuthError, createAdminClient, createAgentClient, type AdminClient } from '@vlt/sdk';
import { createAgent, createPat, createPolicy, expectStatus, http } from '../support/api-client.js';
import { startLlmGateway, type LlmGateway, type LlmProviderId } from '../support/mock-llm.js';
import { MODES } from '../../clients/setup-cli/src/index.js';
import { LLM_ROUTES } from '../../clients/setup-cli/src/llm-providers.js';
import {
  applyConnections,
  applyDefaultModel,
  applyEnrolment,
  applyRemoval,
  serialiseConfig,
} from '../../clients/setup-cli/src/openclaw-config.js';
import {
  changedPaths,
  cleanEnv,
  runBin,
  runInProcess,
  startPty,
  type RunResult,
} from './setup-cli/harness.js';

let llm: LlmGateway;
let adminSdk: AdminClient;
let base: string;
const dirs: string[] = [];

interface Home {
  home: string;
  openclawDir: string;
  configPath: string;
  keyPath: string;
  env: Record<string, string>;
}

/** A fresh HOME with an OpenClaw directory path (not created: setup creates it). */
async function newHome(): Promise<Home> {
  const home = await mkdtemp(join(tmpdir(), 'vlt-setup-'));
  dirs.push(home);
  const openclawDir = join(home, '.openclaw');
  return {
    home,
    openclawDir,
    configPath: join(openclawDir, 'openclaw.json'),
    keyPath: join(openclawDir, 'vlt-vault', 'agent-key'),
    env: cleanEnv(home),
  };
}

/** An agent bound to the given LLM providers' connections, with its one-time secret. */
async function newAgent(providers: LlmProviderId[]): Promise<{ agentId: string; bootstrapSecret: string }> {
  const created = await createAgent(llm.admin, `setup-cli-${randomBytes(3).toString('hex')}`);
  for (const p of providers) await createPolicy(llm.admin, created.agent.id, llm.connections[p]);
  return { agentId: created.agent.id, bootstrapSecret: created.bootstrapSecret };
}

interface ProviderEntry {
  baseUrl: string;
  api: string;
  apiKey: string;
  models: { id: string; name: string }[];
}

/** The parts of a written config the tests look at. */
interface WrittenConfig {
  plugins: {
    entries: {
      'vlt-vault': {
        enabled: boolean;
        config: { baseUrl: string; auth: { agentId: string }; connectedProviders: string[] };
      };
    };
    load?: { paths: string[] };
    allow?: string[];
  };
  secrets: { providers: Record<string, unknown> };
  models: { providers: Record<string, ProviderEntry> };
  agents: { defaults: { model: string } };
}

async function readJson(path: string): Promise<WrittenConfig> {
  return JSON.parse(await readFile(path, 'utf8'));
}

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

const setupArgs = (h: Home, secret: string, extra: string[] = []) => [
  '--base-url',
  base,
  '--bootstrap-secret',
  secret,
  '--non-interactive',
  '--skip-onboard',
  '--skip-plugin-install',
  '--openclaw-dir',
  h.openclawDir,
  ...extra,
];

/** A set-up home for tests that start from a working enrolment. */
async function setUp(providers: LlmProviderId[], extra: string[] = []) {
  const h = await newHome();
  const agent = await newAgent(providers);
  const r = await runBin(setupArgs(h, agent.bootstrapSecret, extra), h.env);
  expect(r.code, r.stderr).toBe(0);
  return { h, agent, r };
}

function expectNoSecrets(texts: string[], secrets: string[]) {
  for (const t of texts) for (const s of secrets) expect(t).not.toContain(s);
}

beforeAll(async () => {
  llm = await startLlmGateway({ shape: 'services' });
  base = llm.base;
  adminSdk = createAdminClient({
    baseUrl: base,
    token: (await createPat(llm.admin, 'setup-cli')).plainToken,
  });
});
afterAll(async () => {
  await llm?.close();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe.concurrent('help', () => {
  it('-h documents every mode and flag', async () => {
    const r = await runBin(['-h'], cleanEnv(tmpdir()));
    expect(r.code).toBe(0);
    for (const mode of MODES) expect(r.stdout).toContain(mode);
    for (const flag of [
      '--base-url',
      '--bootstrap-secret',
      '--default-model',
      '--mode',
      '--config-path',
      '--openclaw-dir',
      '--non-interactive',
      '--skip-onboard',
      '--skip-plugin-install',
      '--sync',
      '--verify',
      '-h, --help',
    ]) {
      expect(r.stdout).toContain(flag);
    }
    expect(r.stdout).toMatch(/Exit status/);
  });
});

describe.concurrent('setup', () => {
  it('enrols, writes the plugin entry with a key reference and the LLM proxy routes, and leaks no secret', async () => {
    const h = await newHome();
    const agent = await newAgent(['llm_a', 'llm_c']);
    const r = await runBin(
      setupArgs(h, agent.bootstrapSecret, ['--default-model', 'vlt-llm_a/mock-model']),
      h.env,
    );
    expect(r.code, r.stderr).toBe(0);

    const text = await readFile(h.configPath, 'utf8');
    const config: WrittenConfig = JSON.parse(text);
    const entry = config.plugins.entries['vlt-vault'];
    expect(entry.enabled).toBe(true);
    expect(entry.config).toEqual({
      baseUrl: base,
      auth: {
        mode: 'agent',
        agentId: agent.agentId,
        privateKey: { source: 'file', provider: 'vlt-vault-agent-key', id: 'value' },
      },
      pollTimeoutMs: 300000,
      pollIntervalMs: 3000,
      connectedProviders: ['llm_a', 'llm_c'],
    });
    expect(config.secrets.providers['vlt-vault-agent-key']).toEqual({
      source: 'file',
      path: h.keyPath,
      mode: 'singleValue',
    });
    // --skip-plugin-install: no load path.
    expect(config.plugins.load).toBeUndefined();

    // Every connected LLM provider at <base>/v1/vault/llm/<provider>, followed by the API
    // version OpenClaw's adapter expects in its base URL (none for the messages API).
    const providers = config.models.providers;
    expect(Object.keys(providers).sort()).toEqual(['vlt-llm_a', 'vlt-llm_c']);
    expect(providers['vlt-llm_a']).toMatchObject({
      baseUrl: `${base}/v1/vault/llm/llm_a`,
      api: 'anthropic-messages',
    });
    expect(providers['vlt-llm_c']).toMatchObject({
      baseUrl: `${base}/v1/vault/llm/llm_c/v1beta`,
      api: 'google-generative-ai',
    });
    for (const [id, p] of Object.entries(providers)) {
      expect(p.baseUrl.startsWith(`${base}/v1/vault/llm/${id.slice('vlt-'.length)}`)).toBe(true);
    }
    expect(providers['vlt-llm_a']!.models).toEqual([{ id: 'mock-model', name: 'mock-model' }]);
    expect(config.agents.defaults.model).toBe('vlt-llm_a/mock-model');

    // The key: 0600 in a 0700 directory, the plugin's encoding (base64 ES256 JWK).
    expect((await stat(h.keyPath)).mode & 0o777).toBe(0o600);
    expect((await stat(join(h.openclawDir, 'vlt-vault'))).mode & 0o777).toBe(0o700);
    const jwk = JSON.parse(Buffer.from(await readFile(h.keyPath, 'utf8'), 'base64').toString('utf8'));
    expect(jwk).toMatchObject({ kty: 'EC', crv: 'P-256' });
    expect(jwk.d).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const pem = createPrivateKey({ key: jwk, format: 'jwk' })
      .export({ type: 'pkcs8', format: 'pem' })
      .toString();
    // The enrolled key is the one on disk: it gets this agent's capabilities.
    const client = createAgentClient({ baseUrl: base, agentId: agent.agentId, privateKey: pem });
    expect((await client.capabilities()).agentId).toBe(agent.agentId);

    expectNoSecrets(
      [r.stdout, r.stderr, text],
      [jwk.d, agent.bootstrapSecret, Buffer.from(await readFile(h.keyPath, 'utf8')).toString()],
    );
    expect(r.stdout).toContain(agent.agentId);
    expect((await adminSdk.getAgent(agent.agentId)).status).toBe('active');
  });

  it('registers the plugin directory and keeps the user config around it', async () => {
    const h = await newHome();
    const pluginDir = join(h.home, 'plugin');
    await mkdir(pluginDir);
    await writeFile(join(pluginDir, 'openclaw.plugin.json'), JSON.stringify({ id: 'vlt-vault' }));
    await mkdir(h.openclawDir, { recursive: true });
    const user = {
      gateway: { mode: 'local' },
      plugins: { allow: ['voice-call'], entries: { 'voice-call': { enabled: true } } },
      models: { providers: { openai: { apiKey: '${OPENAI_API_KEY}' } } },
    };
    await writeFile(h.configPath, JSON.stringify(user, null, 2) + '\n', { mode: 0o640 });
    const agent = await newAgent(['llm_b']);
    const args = setupArgs(h, agent.bootstrapSecret).filter((a) => a !== '--skip-plugin-install');
    const r = await runInProcess(args, { home: h.home, pluginDir });
    expect(r.code, r.stderr).toBe(0);

    const config = await readJson(h.configPath);
    expect(config.plugins.load?.paths).toEqual([pluginDir]);
    // An allowlist must name the plugin or OpenClaw would not load it.
    expect(config.plugins.allow).toEqual(['voice-call', 'vlt-vault']);
    expect(config.models.providers['vlt-llm_b']).toMatchObject({
      baseUrl: `${base}/v1/vault/llm/llm_b/v1`,
      api: 'openai-completions',
    });
    expect(changedPaths(user, config).sort()).toEqual([
      'models.providers.vlt-llm_b',
      'plugins.allow',
      'plugins.entries.vlt-vault',
      'plugins.load',
      'secrets',
    ]);
    // The file's permissions are the user's, not reset.
    expect((await stat(h.configPath)).mode & 0o777).toBe(0o640);
  });

  it('without a terminal, onboarding is only printed as the next step, never run', async () => {
    const h = await newHome();
    const agent = await newAgent([]);
    const ran: string[] = [];
    const args = setupArgs(h, agent.bootstrapSecret).filter((a) => a !== '--skip-onboard');
    const r = await runInProcess(args, {
      home: h.home,
      runCommand: async (command, argv) => {
        ran.push([command, ...argv].join(' '));
        return 0;
      },
    });
    expect(r.code, r.stderr).toBe(0);
    expect(ran).toEqual([]);
    expect(r.stdout).toContain(
      `Next: finish OpenClaw's own setup with: OPENCLAW_STATE_DIR='${h.openclawDir}' OPENCLAW_CONFIG_PATH='${h.configPath}' openclaw onboard`,
    );
  });

  it('refuses a bootstrap secret without the vltb_ prefix before doing anything (exit 2)', async () => {
    const h = await newHome();
    const wrong = `vltp_${randomBytes(16).toString('hex')}`;
    const r = await runBin(setupArgs(h, wrong), h.env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--bootstrap-secret: the bootstrap secret must start with vltb_/);
    expectNoSecrets([r.stdout, r.stderr], [wrong]);
    expect(await exists(h.openclawDir)).toBe(false);
  });

  it('a used bootstrap secret is a clear error and leaves nothing half-written', async () => {
    const { agent } = await setUp(['llm_a']);
    const h = await newHome();
    const r = await runBin(setupArgs(h, agent.bootstrapSecret), h.env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the vault refused the bootstrap secret: invalid, expired or already used/);
    expect(r.stderr).toMatch(/ask a workspace admin for a new one/);
    expectNoSecrets([r.stdout, r.stderr], [agent.bootstrapSecret]);
    expect(await exists(h.configPath)).toBe(false);
    expect(await exists(h.keyPath)).toBe(false);
  });

  it('refuses to replace an existing setup, without spending the new secret', async () => {
    const { h } = await setUp(['llm_a']);
    const before = await readFile(h.configPath, 'utf8');
    const other = await newAgent(['llm_a']);
    const r = await runInProcess(setupArgs(h, other.bootstrapSecret), { home: h.home });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/already set up for agent .*--mode reconnect/s);
    expect(await readFile(h.configPath, 'utf8')).toBe(before);
    expect((await adminSdk.getAgent(other.agentId)).status).toBe('created');
  });

  it('refuses a JSON5 config rather than drop its comments, before enrolling', async () => {
    const h = await newHome();
    await mkdir(h.openclawDir, { recursive: true });
    const json5 = '// my settings\n{ gateway: { mode: "local" }, }\n';
    await writeFile(h.configPath, json5);
    const agent = await newAgent([]);
    const r = await runInProcess(setupArgs(h, agent.bootstrapSecret), { home: h.home });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/is not plain JSON/);
    expect(await readFile(h.configPath, 'utf8')).toBe(json5);
    expect(await exists(h.keyPath)).toBe(false);
    expect((await adminSdk.getAgent(agent.agentId)).status).toBe('created');
  });
});

describe.concurrent('verify', () => {
  it('passes after setup and changes nothing', async () => {
    const { h } = await setUp(['llm_a']);
    const config = await readFile(h.configPath);
    const key = await readFile(h.keyPath);
    const r = await runBin(['--mode', 'verify', '--openclaw-dir', h.openclawDir], h.env);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^OK +vault: /m);
    expect(r.stdout).toMatch(/^OK +agent: /m);
    expect(r.stdout).not.toMatch(/FAIL/);
    expect((await readFile(h.configPath)).equals(config)).toBe(true);
    expect((await readFile(h.keyPath)).equals(key)).toBe(true);
  });

  it('fails fast when the vault is down (connection refused)', async () => {
    const { h } = await setUp([]);
    const port = await closedPort();
    await pointAt(h, `http://127.0.0.1:${port}`);
    const r = await runBin(['--mode', 'verify', '--openclaw-dir', h.openclawDir], h.env);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL +vault: .* is not healthy: connection failed \(ECONNREFUSED\)/m);
    // Fast means it did not sit out the 5 s health deadline: the refusal, not the timer, ended it.
    expect(r.stdout).not.toMatch(/no answer within/);
  });

  it('gives a vault that accepts connections and never answers five seconds, then fails', async () => {
    const { h } = await setUp([]);
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      await pointAt(h, `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`);
      const r = await runInProcess(['--mode', 'verify', '--openclaw-dir', h.openclawDir], { home: h.home });
      console.log(`verify against a silent vault: exit ${r.code} after ${Math.round(r.ms)} ms`);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/^FAIL +vault: .*no answer within 5 s/m);
      expect(r.stdout).toMatch(/^SKIP +agent/m);
      expect(r.ms).toBeGreaterThanOrEqual(4900);
      // The upper bound only tells "ended at the deadline" from "hung on the socket"; a loaded CI
      // machine must not turn scheduling delay into a failure.
      expect(r.ms).toBeLessThan(15_000);
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  it('a disabled agent fails verify with the need for a new bootstrap secret; reconnect restores it', async () => {
    const { h, agent } = await setUp(['llm_a']);
    await adminSdk.disableAgent(agent.agentId);
    const failed = await runBin(['--mode', 'verify', '--openclaw-dir', h.openclawDir], h.env);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^FAIL +agent: .*needs a new bootstrap secret/m);
    expect(failed.stdout).toMatch(/--mode reconnect/);

    // The admin re-enables the agent and issues a new secret; reconnect enrols a new key.
    await adminSdk.enableAgent(agent.agentId);
    const fresh = expectStatus(
      await http<{ bootstrapSecret: string }>('POST', `${base}/v1/agents/${agent.agentId}/bootstrap-secret`, {
        headers: llm.admin.headers,
      }),
      200,
    ).body.bootstrapSecret;
    const configBefore = await readFile(h.configPath, 'utf8');
    const oldKey = await readFile(h.keyPath, 'utf8');
    const r = await runBin(
      [
        '--mode',
        'reconnect',
        '--bootstrap-secret',
        fresh,
        '--non-interactive',
        '--verify',
        '--openclaw-dir',
        h.openclawDir,
      ],
      h.env,
    );
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expectNoSecrets([r.stdout, r.stderr], [fresh]);
    // Same agent, same key path, same connections: the config is unchanged; the key is new.
    expect(await readFile(h.configPath, 'utf8')).toBe(configBefore);
    const newKey = await readFile(h.keyPath, 'utf8');
    expect(newKey).not.toBe(oldKey);
    expect((await stat(h.keyPath)).mode & 0o777).toBe(0o600);
    // The vault now knows only the new key.
    const oldPem = createPrivateKey({
      key: JSON.parse(Buffer.from(oldKey, 'base64').toString('utf8')),
      format: 'jwk',
    })
      .export({ type: 'pkcs8', format: 'pem' })
      .toString();
    const stale = createAgentClient({ baseUrl: base, agentId: agent.agentId, privateKey: oldPem });
    await expect(stale.capabilities()).rejects.toBeInstanceOf(VaultAuthError);
  });
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** Rewrites the enrolment's vault address (as if the vault had moved). */
async function pointAt(h: Home, url: string) {
  const config = await readJson(h.configPath);
  config.plugins.entries['vlt-vault'].config.baseUrl = url;
  await writeFile(h.configPath, JSON.stringify(config, null, 2) + '\n');
}

describe.concurrent('sync, change-model, remove', () => {
  it('sync adds what the vault now grants and changes nothing else; a second sync writes nothing', async () => {
    const { h, agent } = await setUp(['llm_a']);
    const before = await readJson(h.configPath);
    await createPolicy(llm.admin, agent.agentId, llm.connections.llm_d);
    const r = await runBin(['--mode', 'sync', '--openclaw-dir', h.openclawDir], h.env);
    expect(r.code, r.stderr).toBe(0);
    const after = await readJson(h.configPath);
    expect(changedPaths(before, after).sort()).toEqual([
      'models.providers.vlt-llm_d',
      'plugins.entries.vlt-vault.config.connectedProviders',
    ]);
    expect(after.plugins.entries['vlt-vault'].config.connectedProviders).toEqual(['llm_a', 'llm_d']);
    expect(after.models.providers['vlt-llm_d']).toEqual({
      baseUrl: `${base}/v1/vault/llm/llm_d/v1`,
      api: 'openai-completions',
      apiKey: 'vlt-agent-token-from-plugin',
      models: [],
    });
    const text = await readFile(h.configPath, 'utf8');
    const again = await runInProcess(['--mode', 'sync', '--openclaw-dir', h.openclawDir], { home: h.home });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/is up to date/);
    expect(await readFile(h.configPath, 'utf8')).toBe(text);
  });

  it('change-model sets only the default model and lists it under its provider', async () => {
    const { h } = await setUp(['llm_a', 'llm_c']);
    const before = await readJson(h.configPath);
    const r = await runBin(
      ['--mode', 'change-model', '--default-model', 'llm_c/gemini-mock', '--openclaw-dir', h.openclawDir],
      h.env,
    );
    expect(r.code, r.stderr).toBe(0);
    const after = await readJson(h.configPath);
    expect(changedPaths(before, after).sort()).toEqual(['agents', 'models.providers.vlt-llm_c.models']);
    expect(after.agents).toEqual({ defaults: { model: 'vlt-llm_c/gemini-mock' } });
    expect(after.models.providers['vlt-llm_c']!.models).toEqual([{ id: 'gemini-mock', name: 'gemini-mock' }]);

    // A provider the agent is not connected to: refused, nothing written.
    const text = await readFile(h.configPath, 'utf8');
    const refused = await runInProcess(
      ['--mode', 'change-model', '--default-model', 'vlt-llm_b/gpt-mock', '--openclaw-dir', h.openclawDir],
      { home: h.home },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/vlt-llm_b is not configured/);
    // No model, no terminal: a usage error, not a prompt.
    const missing = await runInProcess(['--mode', 'change-model', '--openclaw-dir', h.openclawDir], {
      home: h.home,
    });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--default-model is required/);
    expect(await readFile(h.configPath, 'utf8')).toBe(text);
  });

  it('remove takes out exactly what setup added and deletes the key', async () => {
    const h = await newHome();
    await mkdir(h.openclawDir, { recursive: true });
    const user = {
      gateway: { mode: 'local' },
      agents: { defaults: { workspace: '~/work' } },
      models: { providers: { openai: { apiKey: '${OPENAI_API_KEY}' } } },
    };
    const original = JSON.stringify(user, null, 2) + '\n';
    await writeFile(h.configPath, original);
    const agent = await newAgent(['llm_a']);
    const set = await runBin(setupArgs(h, agent.bootstrapSecret, ['--default-model', 'vlt-llm_a/m1']), h.env);
    expect(set.code, set.stderr).toBe(0);
    expect(await readFile(h.configPath, 'utf8')).not.toBe(original);

    const r = await runBin(['--mode', 'remove', '--non-interactive', '--openclaw-dir', h.openclawDir], h.env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`Agent ${agent.agentId} still exists in the vault`);
    expect(await readFile(h.configPath, 'utf8')).toBe(original);
    expect(await exists(h.keyPath)).toBe(false);
    expect(await exists(join(h.openclawDir, 'vlt-vault'))).toBe(false);

    const again = await runInProcess(['--mode', 'remove', '--openclaw-dir', h.openclawDir], { home: h.home });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/Nothing to remove/);
  });
});

describe.concurrent('interaction', () => {
  it('asks for the base URL, the hidden secret and the model on a terminal', async () => {
    const h = await newHome();
    const agent = await newAgent(['llm_a']);
    const pty = startPty(['--openclaw-dir', h.openclawDir, '--skip-onboard', '--skip-plugin-install'], h.env);
    try {
      await pty.waitFor('Vault base URL (e.g. https://vault.example.com): ');
      pty.type('not a url');
      await pty.waitFor('the base URL must be an absolute URL');
      await pty.waitFor('Vault base URL');
      pty.type(base);
      await pty.waitFor('Bootstrap secret from your workspace admin (starts with vltb_; input is hidden): ');
      pty.type(agent.bootstrapSecret);
      await pty.waitFor('Default model as <provider>/<model> (empty: leave unchanged): ');
      pty.type('vlt-llm_a/claude-mock');
      expect(await pty.exited).toBe(0);
    } finally {
      pty.kill();
    }
    const shown = pty.output();
    expect(shown).toContain('vlt-llm_a  Anthropic Messages API');
    expect(shown).toContain(`Enrolled as agent`);
    expect(shown).not.toContain(agent.bootstrapSecret);
    const config = await readJson(h.configPath);
    expect(config.plugins.entries['vlt-vault'].config.auth.agentId).toBe(agent.agentId);
    expect(config.agents.defaults.model).toBe('vlt-llm_a/claude-mock');
  });

  it('configure-connections files an access request with the reason typed at the terminal', async () => {
    const { h, agent } = await setUp(['llm_a']);
    const pty = startPty(['--mode', 'configure-connections', '--openclaw-dir', h.openclawDir], h.env);
    try {
      await pty.waitFor('Actions the agent can ask a workspace admin for:');
      await pty.waitFor('Request which actions? Numbers separated by commas, empty for none: ');
      pty.type('1');
      await pty.waitFor('Why does the agent need them? (admins see this): ');
      pty.type('needed by the setup-cli test');
      expect(await pty.exited).toBe(0);
    } finally {
      pty.kill();
    }
    const requested = /Requested (\S+) \(request ([0-9a-f-]{36})\)/.exec(pty.output());
    expect(requested, pty.output()).not.toBeNull();
    const list = expectStatus(
      await http<{ requests: { id: string; agentId: string; actionTemplateId: string; reason: string }[] }>(
        'GET',
        `${base}/v1/agent-permission-requests`,
        { headers: llm.admin.headers },
      ),
      200,
    ).body.requests;
    expect(list.find((r) => r.id === requested![2])).toMatchObject({
      agentId: agent.agentId,
      actionTemplateId: requested![1],
      reason: 'needed by the setup-cli test',
    });
    // It ends with a sync: the config is current.
    expect(pty.output()).toMatch(/is up to date/);
  });

  it('--non-interactive never prompts, even on a terminal: missing input exits 2 at once', async () => {
    const h = await newHome();
    // Nothing is ever typed: a prompt would wait on the terminal until the test times out.
    const pty = startPty(['--mode', 'setup', '--non-interactive', '--openclaw-dir', h.openclawDir], h.env);
    const code = await pty.exited;
    expect(code).toBe(2);
    expect(pty.output()).toMatch(/the vault base URL is required/);
    expect(pty.output()).not.toMatch(/Vault base URL \(/);
    expect(await exists(h.openclawDir)).toBe(false);
  });

  it('without a terminal, configure-connections is refused rather than waiting on stdin', async () => {
    const h = await newHome();
    const r: RunResult = await runInProcess(['--mode', 'configure-connections'], { home: h.home });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/interactive only/);
  });
});

describe('config edits', () => {
  it('keeps fallbacks and the object form of the default model, and remove takes out only its own', () => {
    const original = {
      agents: {
        defaults: { model: { primary: 'anthropic/claude-x', fallbacks: ['vlt-llm_b/old', 'openai/gpt-x'] } },
      },
      plugins: { allow: ['vlt-vault'], load: { paths: ['/opt/other-plugin'] } },
    };
    const data: Record<string, unknown> = structuredClone(original);
    applyEnrolment(data, {
      baseUrl: 'https://vault.example',
      agentId: '00000000-0000-4000-8000-000000000001',
      keyPath: '/home/a/.openclaw/vlt-vault/agent-key',
      pluginDir: '/opt/vlt-vault',
    });
    applyConnections(data, 'https://vault.example', ['llm_a', 'issues']);
    applyDefaultModel(data, LLM_ROUTES.llm_a, 'claude-y');
    const written = JSON.parse(serialiseConfig(data));
    expect(written.agents.defaults.model).toEqual({
      primary: 'vlt-llm_a/claude-y',
      fallbacks: ['vlt-llm_b/old', 'openai/gpt-x'],
    });
    expect(written.plugins.load.paths).toEqual(['/opt/other-plugin', '/opt/vlt-vault']);
    expect(written.plugins.allow).toEqual(['vlt-vault']);
    expect(written.plugins.entries['vlt-vault'].config.connectedProviders).toEqual(['issues', 'llm_a']);

    const { keyPath } = applyRemoval(data, ['/opt/vlt-vault']);
    expect(keyPath).toBe('/home/a/.openclaw/vlt-vault/agent-key');
    // The user's primary was replaced by setup and cannot be restored; everything else is theirs.
    expect(data).toEqual({
      agents: { defaults: { model: { fallbacks: ['openai/gpt-x'] } } },
      // An allowlist emptied by the removal stays, empty: dropping it would let every plugin load.
      plugins: { allow: [], load: { paths: ['/opt/other-plugin'] } },
    });
  });
});
