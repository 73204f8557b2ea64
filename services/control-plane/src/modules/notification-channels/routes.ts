import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from '@vlt/service-kit';
import {
  ChannelDeleteResponse,
  ChannelEnabledRequest,
  ChannelListResponse,
  ChannelResponse,
  ChannelTestResponse,
  ChannelUpsertRequest,
  DetectChatsRequest,
  DetectChatsResponse,
  ErrorResponse,
  IdParams,
} from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { requireUser } from '../../plugins/authenticate.js';
import {
  deleteChannel,
  detectChats,
  listChannels,
  setChannelEnabled,
  testChannel,
  upsertChannel,
} from './service.js';

export function notificationChannelRoutes(deps: ControlPlaneDeps) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ['notification-channels'];
    const read = { auth: 'user' as const, scope: 'api:read' as const };
    // Where approval buttons go decides who can approve: configuration, for admins.
    const admin = { auth: 'user' as const, scope: 'admin' as const };
    const failures = { 404: ErrorResponse, 409: ErrorResponse, 502: ErrorResponse };

    r.get(
      '/v1/notification-channels',
      { config: read, schema: { tags, response: { 200: ChannelListResponse } } },
      async (req) => listChannels(deps, requireUser(req).workspaceId),
    );
    r.post(
      '/v1/notification-channels',
      {
        config: admin,
        schema: {
          tags,
          body: ChannelUpsertRequest,
          response: { 200: ChannelResponse, 201: ChannelResponse, ...failures },
        },
      },
      async (req, reply) => {
        const { created, channel, auditId } = await upsertChannel(deps, requireUser(req), req.body);
        return reply.status(created ? 201 : 200).send({ channel, auditId });
      },
    );
    r.post(
      '/v1/notification-channels/chatbot_a/detect-chats',
      {
        config: admin,
        schema: { tags, body: DetectChatsRequest, response: { 200: DetectChatsResponse, ...failures } },
      },
      async (req) => detectChats(deps, requireUser(req), req.body.connectionId),
    );
    r.post(
      '/v1/notification-channels/:id/test',
      {
        config: admin,
        schema: { tags, params: IdParams, response: { 200: ChannelTestResponse, ...failures } },
      },
      async (req) => testChannel(deps, requireUser(req), req.params.id),
    );
    r.patch(
      '/v1/notification-channels/:id/enabled',
      {
        config: admin,
        schema: {
          tags,
          params: IdParams,
          body: ChannelEnabledRequest,
          response: { 200: ChannelResponse, 404: ErrorResponse },
        },
      },
      async (req) => setChannelEnabled(deps, requireUser(req), req.params.id, req.body.enabled),
    );
    r.delete(
      '/v1/notification-channels/:id',
      {
        config: admin,
        schema: { tags, params: IdParams, response: { 200: ChannelDeleteResponse, 404: ErrorResponse } },
      },
      async (req) => deleteChannel(deps, requireUser(req), req.params.id),
    );
  };
}
