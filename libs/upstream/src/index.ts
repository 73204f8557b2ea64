export * from './upstream-client.js';
