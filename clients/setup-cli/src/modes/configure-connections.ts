/**
 * `configure-connections` (interactive only): the agent's side of its connections. An agent
 * cannot create connections or grant itself access — a workspace admin does both — so this
 * shows what the agent has, files permission requests for actions it lacks (with the reason
 * admins will read), optionally revokes a connection (irreversible, confirmed by typing), and
 * then syncs the config as `sync` does.
 */
import type { AgentClient, Capabilities } from '@vlt/sdk';
import { openAgentClient, requireInstall, type Context } from '../context.js';
import { UsageError, type ExitCode } from '../errors.js';
import type { Prompter } from '../io.js';
import { readConfig } from '../openclaw-config.js';
import { vaultFailure } from '../vault.js';
import { describeConnections } from './shared.js';
import { refusedAgent, runSync } from './sync.js';

/** Parses "1, 3" against a list of `n` items; undefined when an entry is not a valid number. */
function choices(answer: string, n: number): number[] | undefined {
  if (answer.trim() === '') return [];
  const picked = answer
    .split(/[\s,]+/)
    .filter(Boolean)
    .map(Number);
  if (picked.some((i) => !Number.isInteger(i) || i < 1 || i > n)) return undefined;
  return [...new Set(picked)];
}

export async function runConfigureConnections(ctx: Context): Promise<ExitCode> {
  const prompter = ctx.prompter;
  if (!prompter) {
    throw new UsageError(
      '--mode configure-connections is interactive only',
      'run it in a terminal without --non-interactive; to refresh the config unattended use --mode sync',
    );
  }
  const file = await readConfig(ctx.configPath);
  const install = requireInstall(file);
  const client = await openAgentClient(ctx, install);
  let caps: Capabilities;
  try {
    caps = await client.capabilities();
  } catch (err) {
    throw refusedAgent(err, install.baseUrl, "read the agent's capabilities");
  }
  describeConnections(ctx, caps);
  if (caps.pendingRequests.length > 0) {
    ctx.out.line('Pending access requests:');
    for (const r of caps.pendingRequests)
      ctx.out.line(`  ${r.actionTemplateId} (requested ${r.requestedAt})`);
  }

  await requestAccess(ctx, prompter, client, caps);
  await revoke(ctx, prompter, client, caps);

  ctx.out.line('Updating the config from the vault ...');
  return runSync(ctx);
}

async function requestAccess(ctx: Context, prompter: Prompter, client: AgentClient, caps: Capabilities) {
  const pending = new Set(caps.pendingRequests.map((r) => r.actionTemplateId));
  const actions = caps.availableActions.filter((a) => !pending.has(a.id));
  if (actions.length === 0) {
    ctx.out.line('There are no further actions to request.');
    return;
  }
  ctx.out.line('Actions the agent can ask a workspace admin for:');
  actions.forEach((a, i) => ctx.out.line(`  ${i + 1}. ${a.label} (${a.id}) — ${a.description}`));
  const answer = await prompter.askValid(
    'Request which actions? Numbers separated by commas, empty for none',
    (a) => (choices(a, actions.length) ? undefined : `enter numbers between 1 and ${actions.length}`),
  );
  const picked = choices(answer, actions.length) ?? [];
  if (picked.length === 0) return;
  const reason = await prompter.askValid('Why does the agent need them? (admins see this)', (a) =>
    a.trim() === '' ? 'a reason is required' : a.length > 1000 ? 'at most 1000 characters' : undefined,
  );
  for (const i of picked) {
    const action = actions[i - 1]!;
    try {
      const r = await client.requestCapability({ actionTemplateId: action.id, reason });
      ctx.out.line(`Requested ${action.id} (request ${r.requestId}).`);
    } catch (err) {
      ctx.out.error(vaultFailure(err, client.baseUrl, `request ${action.id}`).message);
    }
  }
}

async function revoke(ctx: Context, prompter: Prompter, client: AgentClient, caps: Capabilities) {
  // Singletons (connectionId null) are addressed by service and cannot be revoked by an agent.
  const revocable = caps.activeConnections.filter((c) => c.connectionId !== null);
  if (revocable.length === 0) return;
  ctx.out.line('Connections the agent can revoke:');
  revocable.forEach((c, i) => ctx.out.line(`  ${i + 1}. ${c.displayName} — ${c.label} [${c.provider}]`));
  const answer = await prompter.askValid('Revoke a connection? Its number, empty for none', (a) =>
    a.trim() === '' || (choices(a, revocable.length)?.length ?? 0) === 1
      ? undefined
      : `enter one number between 1 and ${revocable.length}`,
  );
  const [i] = choices(answer, revocable.length) ?? [];
  if (i === undefined) return;
  const c = revocable[i - 1]!;
  const typed = await prompter.ask(
    `Revoking "${c.label}" cuts every agent bound to it off at once and cannot be undone. Type revoke to confirm`,
  );
  if (typed.trim() !== 'revoke') {
    ctx.out.line('Not revoked.');
    return;
  }
  try {
    const r = await client.revokeConnection(c.connectionId!);
    ctx.out.line(`Revoked ${c.label} (audit ${r.auditId}).`);
  } catch (err) {
    ctx.out.error(vaultFailure(err, client.baseUrl, `revoke ${c.label}`).message);
  }
}
