import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyInstance } from 'fastify';
import { createServiceApp, type App } from '@vlt/service-kit';
import type { ControlPlaneDeps } from './deps.js';
import { agentRoutes } from './modules/agents/routes.js';
import { approvalRoutes } from './modules/approvals/routes.js';
import { auditRoutes } from './modules/audit/routes.js';
import { authRoutes } from './modules/auth/routes.js';
import { connectionRoutes } from './modules/connections/routes.js';
import { oauthAppRoutes } from './modules/oauth-apps/routes.js';
import { capabilityRoutes } from './modules/capabilities/routes.js';
import { permissionRequestRoutes } from './modules/permission-requests/routes.js';
import { policyRoutes } from './modules/policies/routes.js';
import { templateRoutes } from './modules/templates/routes.js';
import { tokenRoutes } from './modules/tokens/routes.js';
import { workspaceRoutes } from './modules/workspaces/routes.js';
import { notificationRoutes } from './modules/notifications/routes.js';
import { notificationChannelRoutes } from './modules/notification-channels/routes.js';
import { quickActionRoutes } from './modules/quick-actions/routes.js';
import { installAuthentication } from './plugins/authenticate.js';
import { refuseUnstorableInput } from './plugins/storable-input.js';

/**
 * Every control-plane route tree, as one encapsulated plugin: the all-in-one mounts it
 * next to the data plane's on a single instance, the split service on its own.
 */
export function controlPlaneRoutes(deps: ControlPlaneDeps) {
  return async function controlPlane(app: FastifyInstance): Promise<void> {
    await app.register(cookie);
    // The agent token endpoint accepts form encoding as well as JSON (spec).
    await app.register(formbody);
    refuseUnstorableInput(app);
    installAuthentication(app, deps);
    await app.register(authRoutes(deps));
    await app.register(agentRoutes(deps));
    await app.register(connectionRoutes(deps));
    await app.register(oauthAppRoutes(deps));
    await app.register(templateRoutes(deps));
    await app.register(capabilityRoutes(deps));
    await app.register(permissionRequestRoutes(deps));
    await app.register(policyRoutes(deps));
    await app.register(tokenRoutes(deps));
    await app.register(auditRoutes(deps));
    await app.register(workspaceRoutes(deps));
    await app.register(approvalRoutes(deps));
    await app.register(notificationRoutes(deps));
    await app.register(notificationChannelRoutes(deps));
    await app.register(quickActionRoutes(deps));
  };
}

export async function buildControlPlaneApp(deps: ControlPlaneDeps): Promise<App> {
  const app = await createServiceApp({
    title: 'Agent credential vault — control plane',
    logger: deps.logger,
    trustProxy: deps.config.trustProxy,
    metrics: deps.metrics,
    health: () => (deps.bus.isConnected() ? 'ok' : 'bus disconnected'),
  });
  await app.register(controlPlaneRoutes(deps));
  return app;
}
