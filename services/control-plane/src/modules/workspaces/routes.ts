import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import { z } from 'zod';
import { WorkspaceRole } from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import {
  addMember,
  changeMemberRole,
  createWorkspace,
  listMembers,
  listMyWorkspaces,
  removeMember,
} from './service.js';

const WorkspaceItem = z.object({
  id: z.uuid(),
  name: z.string(),
  role: WorkspaceRole,
  current: z.boolean(),
  createdAt: z.string(),
});
const Member = z.object({
  userId: z.uuid(),
  email: z.string(),
  name: z.string().nullable(),
  role: WorkspaceRole,
  createdAt: z.string(),
});
const WsParams = z.object({ id: z.uuid() });
const MemberParams = z.object({ id: z.uuid(), userId: z.uuid() });

export function workspaceRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ['workspaces'];
    r.get(
      '/v1/workspaces',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags, response: { 200: z.object({ workspaces: z.array(WorkspaceItem) }) } },
      },
      async (req) => listMyWorkspaces(deps, requireUser(req)),
    );
    r.post(
      '/v1/workspaces',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: {
          tags,
          body: z.object({ name: z.string().trim().min(1).max(200) }),
          response: { 201: z.object({ workspace: WorkspaceItem }) },
        },
      },
      async (req, reply) =>
        reply.status(201).send(await createWorkspace(deps, requireUser(req), req.body.name)),
    );
    r.get(
      '/v1/workspaces/:id/members',
      {
        config: { auth: 'user', scope: 'api:read' },
        schema: { tags, params: WsParams, response: { 200: z.object({ members: z.array(Member) }) } },
      },
      async (req) => listMembers(deps, requireUser(req), req.params.id),
    );
    r.post(
      '/v1/workspaces/:id/members',
      {
        config: { auth: 'user', scope: 'admin' },
        schema: {
          tags,
          params: WsParams,
          body: z.object({ email: z.string().max(320), role: WorkspaceRole }),
          response: { 201: z.object({ member: Member }) },
        },
      },
      async (req, reply) =>
        reply.status(201).send(await addMember(deps, requireUser(req), req.params.id, req.body)),
    );
    r.put(
      '/v1/workspaces/:id/members/:userId',
      {
        config: { auth: 'user', scope: 'admin' },
        schema: {
          tags,
          params: MemberParams,
          body: z.object({ role: WorkspaceRole }),
          response: { 200: z.object({ member: z.object({ userId: z.uuid(), role: WorkspaceRole }) }) },
        },
      },
      async (req) =>
        changeMemberRole(deps, requireUser(req), req.params.id, req.params.userId, req.body.role),
    );
    r.delete(
      '/v1/workspaces/:id/members/:userId',
      {
        config: { auth: 'user', scope: 'admin' },
        schema: {
          tags,
          params: MemberParams,
          response: { 200: z.object({ removed: z.literal(true), userId: z.uuid() }) },
        },
      },
      async (req) => removeMember(deps, requireUser(req), req.params.id, req.params.userId),
    );
  };
}
