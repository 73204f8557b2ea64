/**
 * The routes the services really register: route trees built from the same factories the
 * services use (control-plane and data-plane route plugins), collected with an `onRoute` hook.
 * No database or bus is touched. Shared by the identity doc test and the authorization sweeps.
 */
import pino from 'pino';
import { controlPlaneRoutes, type ControlPlaneDeps } from '@vlt/control-plane';
import { dataPlaneRoutes, type DataPlaneDeps } from '@vlt/data-plane';
import { createServiceApp } from '@vlt/service-kit';

/** How docs/authorization.md writes "this route names no scope". */
export const NONE = '–';

export interface RegisteredRoute {
  method: string;
  /** The path as registered, with fastify's `:name` parameters. */
  url: string;
  /** `none`, `user`, `agent`, `any` (control plane) or `agent (data plane)`. */
  auth: string;
  /** The scope the route declares in `config.scope`, if any. */
  scope: string | undefined;
}

/** Every route of the control-plane and data-plane route plugins (HEAD twins left out). */
export async function collectRegisteredRoutes(): Promise<RegisteredRoute[]> {
  const app = await createServiceApp({
    title: 'routes',
    logger: pino({ level: 'silent' }),
    trustProxy: [],
    docs: false,
  });
  const routes: RegisteredRoute[] = [];
  const collect =
    (kind: 'control' | 'data') => (r: { method: string | string[]; url: string; config?: unknown }) => {
      const c = (r.config ?? {}) as { auth?: string; scope?: string; agentToken?: string };
      for (const m of [r.method].flat()) {
        if (m === 'HEAD') continue;
        // authenticate.ts: a control-plane route without `auth` is a user route.
        // agent-auth.ts: `agentToken: 'sdk'` also reads SDK key headers; `'none'` needs no token.
        const dataAuth =
          c.agentToken === 'none'
            ? 'none'
            : c.agentToken === 'sdk'
              ? 'agent (data plane, SDK)'
              : 'agent (data plane)';
        const auth = kind === 'data' ? dataAuth : (c.auth ?? 'user');
        routes.push({ method: m, url: r.url, auth, scope: c.scope });
      }
    };
  await app.register(async (child) => {
    child.addHook('onRoute', collect('control'));
    await child.register(
      controlPlaneRoutes({ config: { publicBaseUrl: 'http://docs.invalid' } } as unknown as ControlPlaneDeps),
    );
  });
  await app.register(async (child) => {
    child.addHook('onRoute', collect('data'));
    // Settings the route plugins read as they are built (the LLM proxy's upload limits).
    await child.register(dataPlaneRoutes({ config: {} } as unknown as DataPlaneDeps));
  });
  await app.ready();
  await app.close();
  return routes;
}

/** The registered routes as `METHOD path auth scope` rows, as docs/authorization.md lists them. */
export async function registeredRoutes(): Promise<string[]> {
  return (await collectRegisteredRoutes()).map((r) => `${r.method} ${r.url} ${r.auth} ${r.scope ?? NONE}`);
}
