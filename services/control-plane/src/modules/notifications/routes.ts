import type { FastifyInstance } from 'fastify';
import { Errors, type ZodTypeProvider } from '@vlt/service-kit';
import {
  PushSubscriptionDeleteResponse,
  ErrorResponse,
  IdParams,
  NotificationListQuery,
  NotificationListResponse,
  NotificationReadAllResponse,
  NotificationReadResponse,
  NotificationStreamQuery,
  PushSubscriptionCreateRequest,
  PushSubscriptionListResponse,
  PushSubscriptionResponse,
} from '@vlt/contracts';
import type { ControlPlaneDeps } from '../../deps.js';
import { principalStillValid, requireUser } from '../../plugins/authenticate.js';
import {
  createPushSubscription,
  deletePushSubscription,
  listNotifications,
  listPushSubscriptions,
  markAllRead,
  markRead,
} from './service.js';
import { startNotificationHub, type NotificationHub } from './stream.js';

export function notificationRoutes(deps: ControlPlaneDeps, opts: { heartbeatMs?: number } = {}) {
  return async function (app: FastifyInstance) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ['notifications'];
    const read = { auth: 'user' as const, scope: 'api:read' as const };

    // Subscribed on the first stream: building the route tree touches no bus (route listings, docs).
    let hub: Promise<NotificationHub> | undefined;
    const streams = () =>
      (hub ??= startNotificationHub({
        bus: deps.bus,
        names: deps.names,
        logger: deps.logger,
        ...(opts.heartbeatMs !== undefined && { heartbeatMs: opts.heartbeatMs }),
      }).catch((err: unknown) => {
        hub = undefined; // the next stream tries again
        throw err;
      }));
    // preClose, not onClose: an open stream is a response in flight, and the server's close
    // waits for those; ending the streams first lets it finish (ADR 0063).
    app.addHook('preClose', async () => {
      if (hub) await (await hub.catch(() => null))?.stop();
    });

    r.get(
      '/v1/notifications',
      {
        config: read,
        schema: { tags, querystring: NotificationListQuery, response: { 200: NotificationListResponse } },
      },
      async (req) => listNotifications(deps, requireUser(req), req.query),
    );
    r.post(
      '/v1/notifications/read-all',
      { config: read, schema: { tags, response: { 200: NotificationReadAllResponse } } },
      async (req) => markAllRead(deps, requireUser(req)),
    );
    r.post(
      '/v1/notifications/:id/read',
      {
        config: read,
        schema: { tags, params: IdParams, response: { 200: NotificationReadResponse, 404: ErrorResponse } },
      },
      async (req) => markRead(deps, requireUser(req), req.params.id),
    );
    r.get(
      '/v1/notifications/stream',
      {
        config: { ...read, tokenInQuery: true },
        schema: {
          tags,
          description:
            'Server-Sent Events: `event: connected`, then `event: notification` per new notification, `: heartbeat` every 30 s.',
          querystring: NotificationStreamQuery,
        },
      },
      async (req, reply) => {
        const user = requireUser(req);
        const hubNow = await streams();
        reply.hijack();
        const opened = hubNow.open({
          userId: user.userId,
          workspaceId: user.workspaceId,
          res: reply.raw,
          stillAllowed: () => principalStillValid(deps, user),
        });
        if (!opened.ok) {
          const err = Errors.rateLimited('too many open notification streams for this user');
          reply.raw.writeHead(err.statusCode, { 'content-type': 'application/json' });
          reply.raw.end(JSON.stringify({ error: err.message, code: err.code }));
        }
      },
    );

    r.post(
      '/v1/notifications/push-subscriptions',
      {
        config: read,
        schema: {
          tags,
          body: PushSubscriptionCreateRequest,
          response: { 201: PushSubscriptionResponse, 409: ErrorResponse },
        },
      },
      async (req, reply) =>
        reply.status(201).send(await createPushSubscription(deps, requireUser(req), req.body)),
    );
    r.get(
      '/v1/notifications/push-subscriptions',
      { config: read, schema: { tags, response: { 200: PushSubscriptionListResponse } } },
      async (req) => listPushSubscriptions(deps, requireUser(req)),
    );
    r.delete(
      '/v1/notifications/push-subscriptions/:id',
      {
        config: read,
        schema: {
          tags,
          params: IdParams,
          response: { 200: PushSubscriptionDeleteResponse, 404: ErrorResponse },
        },
      },
      async (req) => deletePushSubscription(deps, requireUser(req), req.params.id),
    );
  };
}
