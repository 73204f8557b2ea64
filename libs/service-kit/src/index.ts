export * from './errors.js';
export * from './error-handler.js';
export * from './error-mapping.js';
export * from './create-app.js';
export * from './shutdown.js';
export * from './ids.js';
export * from './audit-url.js';
export * from './storable.js';
export type { ZodTypeProvider } from 'fastify-type-provider-zod';
