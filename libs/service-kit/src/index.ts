export * from './errors.js';
export * from './error-handler.js';
export * from './create-app.js';
export * from './shutdown.js';
export * from './ids.js';
export type { ZodTypeProvider } from 'fastify-type-provider-zod';
