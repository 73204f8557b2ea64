export { buildControlPlaneApp, controlPlaneRoutes } from './app.js';
export { createControlPlaneRuntime, type ControlPlaneRuntime } from './runtime.js';
export type { ControlPlaneDeps } from './deps.js';
export { bindDatabaseToBus, DatabaseBoundToOtherBusError } from './infra/bus-binding.js';
