export { buildDataPlaneApp, dataPlaneRoutes } from './app.js';
export { createDataPlaneRuntime, type DataPlaneRuntime } from './runtime.js';
export type { DataPlaneDeps } from './deps.js';
