export * from './config.js';
export * from './providers.js';
