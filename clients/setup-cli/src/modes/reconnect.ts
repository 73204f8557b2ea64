/**
 * `reconnect`: enrols again with a new bootstrap secret — after the agent was disabled, re-keyed
 * or its key lost. A new key pair is generated and bootstrapped; the key file is replaced only
 * once the vault has accepted the new key (a refused secret leaves the old setup untouched).
 * The plugin entry gets the (possibly different) agent id and, with --base-url, a new vault
 * address; the connections are re-read as in `sync`. Everything else is kept.
 */
import { inputBaseUrl, inputBootstrapSecret, requireInstall, type Context } from '../context.js';
import { EXIT, SetupCliError, type ExitCode } from '../errors.js';
import { defaultKeyPath, writeKeyFile } from '../keys-store.js';
import { applyConnections, applyEnrolment, readConfig, writeConfig } from '../openclaw-config.js';
import { agentClient, enrol, vaultFailure } from '../vault.js';
import { describeChange, warnDanglingDefault } from './shared.js';

export async function runReconnect(ctx: Context): Promise<ExitCode> {
  const file = await readConfig(ctx.configPath);
  const install = requireInstall(file);
  // --base-url moves the enrolment to another vault; without it the current one is kept.
  const baseUrl = await inputBaseUrl(ctx, install.baseUrl);
  const bootstrapSecret = await inputBootstrapSecret(ctx);
  // A key inlined by hand moves to a key file like any other setup's.
  const keyPath = install.key.kind === 'file' ? install.key.path : defaultKeyPath(ctx.openclawDir);

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
        hint: 'fix the directory, then ask a workspace admin for a new bootstrap secret and reconnect again',
      },
    );
  }
  const was = enrolled.agentId === install.agentId ? '' : ` (was ${install.agentId})`;
  ctx.out.line(
    `Enrolled as agent "${enrolled.agentName}" (${enrolled.agentId})${was}; new key saved to ${keyPath}.`,
  );

  const data = structuredClone(file.data);
  applyEnrolment(data, { baseUrl, agentId: enrolled.agentId, keyPath, pluginDir: undefined });
  let failure: SetupCliError | undefined;
  try {
    const client = agentClient({
      baseUrl,
      agentId: enrolled.agentId,
      privateKeyPem: enrolled.privateKeyPem,
      tokenAudience: install.tokenAudience,
      fetch: ctx.fetch,
    });
    const caps = await client.capabilities();
    describeChange(
      ctx,
      applyConnections(
        data,
        baseUrl,
        caps.activeConnections.map((c) => c.provider),
      ),
    );
  } catch (err) {
    failure = vaultFailure(err, baseUrl, "read the agent's capabilities");
  }
  const written = await writeConfig(file, data);
  ctx.out.line(written ? `Updated ${file.path}.` : `${file.path} needed no change.`);
  warnDanglingDefault(ctx, data);
  if (failure) {
    ctx.out.error(failure.message);
    ctx.out.line('The new enrolment is saved; run `vlt-setup --mode sync` once the vault answers.');
    return EXIT.failed;
  }
  return EXIT.ok;
}
