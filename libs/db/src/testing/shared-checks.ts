/**
 * Checks run against both real PostgreSQL and embedded PGlite, so the two stay interchangeable.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'vitest';
import { isUniqueViolation } from '../errors.js';
import { Prisma, type PrismaClient } from '../generated/prisma/client.js';
import { defaultMigrationsDir } from '../paths.js';
import { migrationRows } from './scratch-database.js';

/** Folder names of prisma/migrations, in apply order. */
export async function migrationFolders(dir = defaultMigrationsDir()): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort((a, b) => a.localeCompare(b));
}

/** `_prisma_migrations` holds exactly what `prisma migrate deploy` would have written. */
export async function expectCliCompatibleHistory(url: string): Promise<void> {
  const folders = await migrationFolders();
  const rows = await migrationRows(url);
  expect(rows.map((r) => r.migration_name)).toEqual(folders);
  for (const row of rows) {
    const sql = await readFile(path.join(defaultMigrationsDir(), row.migration_name, 'migration.sql'));
    // The CLI compares this checksum to detect edited migrations.
    expect(row.checksum).toBe(createHash('sha256').update(sql).digest('hex'));
    expect(row.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(row.finished_at).toBeInstanceOf(Date);
    expect(row.rolled_back_at).toBeNull();
    expect(row.logs).toBeNull();
    expect(row.applied_steps_count).toBe(1);
  }
}

/** A workspace with an owner, an agent and a connection, for the checks below. */
export async function seedWorkspace(prisma: PrismaClient) {
  const suffix = randomUUID().slice(0, 8);
  const user = await prisma.user.create({
    data: { email: `owner-${suffix}@example.test`, passwordHash: 'scrypt$x', name: 'Owner' },
  });
  const workspace = await prisma.workspace.create({
    data: { name: `ws-${suffix}`, memberships: { create: { userId: user.id, role: 'owner' } } },
  });
  const agent = await prisma.agent.create({
    data: { workspaceId: workspace.id, name: 'agent', createdBy: user.id },
  });
  const connection = await prisma.connection.create({
    data: {
      workspaceId: workspace.id,
      provider: 'suite_a',
      service: 'suite_a-mail',
      label: 'Mail',
      grantedScopes: ['mail.read'],
      metadata: { account: 'a@example.test' },
      credentials: { v: 1, alg: 'A256GCM', ct: 'abc' },
      createdBy: user.id,
    },
  });
  return { user, workspace, agent, connection };
}

/** Writes and reads every kind of column the services rely on. */
export async function expectRoundTrip(prisma: PrismaClient): Promise<void> {
  const { user, workspace, agent, connection } = await seedWorkspace(prisma);

  // Defaults come from the schema, enums come back as their string values.
  expect(user.platformRole).toBe('user');
  expect(agent.status).toBe('created');
  expect(agent.enrolledAt).toBeNull();
  expect(connection.status).toBe('healthy');
  expect(connection.singleton).toBe(false);

  const policy = await prisma.policy.create({
    data: { workspaceId: workspace.id, agentId: agent.id, connectionId: connection.id },
  });
  expect(policy).toMatchObject({
    allowedModels: ['A', 'B'],
    defaultMode: 'read_only',
    stepUpApproval: 'risk_based',
    allowlists: [],
    rateLimits: null,
    timeWindows: [],
    rules: { request: [], response: [] },
    providerConstraints: null,
    version: 1,
  });

  // Json in, same Json out; timestamps are Dates with millisecond precision.
  const jwk = { kty: 'EC', crv: 'P-256', x: 'x'.repeat(43), y: 'y'.repeat(43) };
  const enrolledAt = new Date('2030-01-02T03:04:05.678Z');
  const active = await prisma.agent.update({
    where: { id: agent.id },
    data: { status: 'active', publicKeyJwk: jwk, enrolledAt },
  });
  expect(active.publicKeyJwk).toEqual(jwk);
  expect(active.enrolledAt?.toISOString()).toBe(enrolledAt.toISOString());
  expect(active.updatedAt.getTime()).toBeGreaterThanOrEqual(agent.updatedAt.getTime());

  // Revoke destroys the envelope: DbNull is SQL NULL (JsonNull would store the JSON value null).
  const revoked = await prisma.connection.update({
    where: { id: connection.id },
    data: { status: 'revoked', credentials: Prisma.DbNull, revokedAt: new Date() },
  });
  expect(revoked.credentials).toBeNull();
  expect(
    await prisma.connection.count({ where: { id: connection.id, credentials: { equals: Prisma.DbNull } } }),
  ).toBe(1);

  // Audit rows reference nothing: an event about a deleted agent is still accepted.
  await prisma.auditEvent.create({
    data: {
      auditId: randomUUID(),
      timestamp: new Date(),
      actor: user.id,
      workspaceId: workspace.id,
      agentId: randomUUID(),
      action: 'agent_created',
      decision: 'allowed',
    },
  });

  // Deleting the agent cascades to what only makes sense with it.
  await prisma.agent.delete({ where: { id: agent.id } });
  expect(await prisma.policy.count({ where: { id: policy.id } })).toBe(0);
  expect(await prisma.auditEvent.count({ where: { workspaceId: workspace.id } })).toBe(1);
}

/** The single-use primitive: the second insert of one (agent, jti) fails, atomically. */
export async function expectJtiSingleUse(prisma: PrismaClient): Promise<void> {
  const { agent, workspace } = await seedWorkspace(prisma);
  const other = await prisma.agent.create({ data: { workspaceId: workspace.id, name: 'other' } });
  const jti = randomUUID();
  const expiresAt = new Date(Date.now() + 60_000);

  // Concurrent replays: exactly one wins.
  const attempts = await Promise.allSettled(
    Array.from({ length: 5 }, () =>
      prisma.assertionJti.create({ data: { agentId: agent.id, jti, expiresAt } }),
    ),
  );
  expect(attempts.filter((a) => a.status === 'fulfilled')).toHaveLength(1);
  const failures = attempts.filter((a): a is PromiseRejectedResult => a.status === 'rejected');
  expect(failures).toHaveLength(4);
  for (const f of failures) expect(isUniqueViolation(f.reason)).toBe(true);

  // A later replay fails too, and the jti is scoped per agent.
  await expect(prisma.assertionJti.create({ data: { agentId: agent.id, jti, expiresAt } })).rejects.toSatisfy(
    isUniqueViolation,
  );
  await prisma.assertionJti.create({ data: { agentId: other.id, jti, expiresAt } });
}

/** Constraints the schema cannot express in Prisma types but the database enforces. */
export async function expectDatabaseConstraints(prisma: PrismaClient): Promise<void> {
  // Hand-written CHECK: addresses are stored lowercased.
  await expect(
    prisma.user.create({ data: { email: `Mixed-${randomUUID()}@Example.test`, passwordHash: 'x' } }),
  ).rejects.toThrow(/users_email_lowercase_check|check constraint/i);

  // Partial unique index: one live singleton connection per service and workspace.
  const { workspace } = await seedWorkspace(prisma);
  const singleton = {
    workspaceId: workspace.id,
    provider: 'chatbot_a',
    service: 'chatbot_a',
    label: 'Bot',
    singleton: true,
  };
  const first = await prisma.connection.create({ data: singleton });
  await expect(prisma.connection.create({ data: singleton })).rejects.toSatisfy(isUniqueViolation);
  await prisma.connection.update({ where: { id: first.id }, data: { status: 'revoked' } });
  await prisma.connection.create({ data: singleton }); // the revoked one no longer counts
  // Non-singleton connections of one service may repeat.
  const plain = { ...singleton, service: 'suite_a-mail', provider: 'suite_a', singleton: false };
  await prisma.connection.createMany({ data: [plain, plain] });

  // Idempotent notification delivery: one row per event and member, one delivery per destination.
  const member = await prisma.user.create({
    data: { email: `member-${randomUUID()}@example.test`, passwordHash: 'x' },
  });
  const sourceEventId = randomUUID();
  const note = {
    workspaceId: workspace.id,
    userId: member.id,
    type: 'security_alert',
    title: 't',
    body: 'b',
    sourceEventId,
  };
  await prisma.notification.create({ data: note });
  await expect(prisma.notification.create({ data: note })).rejects.toSatisfy(isUniqueViolation);
  const delivery = { eventId: sourceEventId, destination: 'push', workspaceId: workspace.id };
  await prisma.notificationDelivery.create({ data: delivery });
  await expect(prisma.notificationDelivery.create({ data: delivery })).rejects.toSatisfy(isUniqueViolation);
}
