import type { FastifyInstance } from 'fastify';
import { createServiceApp, type App } from '@vlt/service-kit';
import type { DataPlaneDeps } from './deps.js';
import { credentialRoutes } from './modules/credentials/routes.js';
import { executeRoutes } from './modules/execute/routes.js';
import { llmProxyRoutes } from './modules/llm-proxy/routes.js';
import { installAgentAuth } from './plugins/agent-auth.js';

/** The data plane's route tree (`/v1/vault/*`), encapsulated so it can share an instance. */
export function dataPlaneRoutes(deps: DataPlaneDeps) {
  return async function dataPlane(app: FastifyInstance): Promise<void> {
    installAgentAuth(app, deps);
    await app.register(executeRoutes(deps));
    await app.register(credentialRoutes(deps));
    await app.register(llmProxyRoutes(deps));
  };
}

export async function buildDataPlaneApp(deps: DataPlaneDeps): Promise<App> {
  const app = await createServiceApp({
    title: 'Agent credential vault — data plane',
    logger: deps.logger,
    trustProxy: deps.config.trustProxy,
    // Execute bodies carry provider payloads; the policy's own size limit applies after parsing.
    bodyLimit: 10 * 1024 * 1024,
    metrics: deps.metrics,
    // Every call needs the bus (audit events, lookups): without it the pod cannot serve.
    health: () => (deps.bus.isConnected() ? 'ok' : 'bus disconnected'),
  });
  await app.register(dataPlaneRoutes(deps));
  return app;
}
