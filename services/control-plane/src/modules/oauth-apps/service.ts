/**
 * A workspace's own OAuth apps, used in preference to the deployment's (ADR 0042). The client
 * secret is sealed with the master key (bound to workspace and provider) and never returned.
 */
import { sealJson } from '@vlt/crypto';
import { PROVIDERS, providerSpec } from '@vlt/contracts';
import { Prisma } from '@vlt/db';
import { Errors } from '@vlt/service-kit';
import type { ControlPlaneDeps } from '../../deps.js';
import { auditEvent, audited, commitChange } from '../../infra/change.js';
import { workspaceAppAad } from '../connections/oauth-client.js';

type Actor = { userId: string; workspaceId: string };

function view(a: { id: string; provider: string; clientId: string; createdAt: Date }) {
  return { id: a.id, provider: a.provider, clientId: a.clientId, createdAt: a.createdAt.toISOString() };
}

export async function createOAuthApp(
  deps: ControlPlaneDeps,
  actor: Actor,
  input: { provider: string; clientId: string; clientSecret: string },
) {
  const spec = providerSpec(input.provider);
  if (!spec || spec.authKind !== 'oauth') {
    const oauthProviders = Object.values(PROVIDERS)
      .filter((p) => p.authKind === 'oauth')
      .map((p) => p.id);
    throw Errors.badRequest(`provider must be one of ${oauthProviders.join(', ')}`);
  }
  const event = auditEvent(deps, {
    action: 'oauth_app_created',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: null,
    connectionId: null,
    decision: 'info',
    metadata: { provider: spec.id, clientId: input.clientId },
  });
  try {
    const row = await commitChange(deps, async (tx, emit) => {
      const created = await tx.workspaceOAuthApp.create({
        data: {
          workspaceId: actor.workspaceId,
          provider: spec.id,
          clientId: input.clientId,
          clientSecret: sealJson(
            deps.keyring,
            input.clientSecret,
            workspaceAppAad(actor.workspaceId, spec.id),
          ) as unknown as Prisma.InputJsonValue,
        },
      });
      emit(audited(event));
      return created;
    });
    return { app: view(row), auditId: event.auditId };
  } catch (err) {
    if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002')
      throw Errors.oauthAppExists();
    throw err;
  }
}

export async function listOAuthApps(deps: ControlPlaneDeps, workspaceId: string) {
  const rows = await deps.prisma.workspaceOAuthApp.findMany({
    where: { workspaceId },
    orderBy: { createdAt: 'asc' },
  });
  return { apps: rows.map(view) };
}

export async function deleteOAuthApp(deps: ControlPlaneDeps, actor: Actor, id: string) {
  const app = await deps.prisma.workspaceOAuthApp.findFirst({
    where: { id, workspaceId: actor.workspaceId },
  });
  if (!app) throw Errors.notFound('OAuth app not found');
  const event = auditEvent(deps, {
    action: 'oauth_app_deleted',
    actor: actor.userId,
    workspaceId: actor.workspaceId,
    agentId: null,
    connectionId: null,
    decision: 'info',
    metadata: { provider: app.provider, clientId: app.clientId },
  });
  await commitChange(deps, async (tx, emit) => {
    await tx.workspaceOAuthApp.delete({ where: { id: app.id } });
    emit(audited(event));
  });
  return { deleted: true as const, auditId: event.auditId };
}
