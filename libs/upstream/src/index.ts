export * from './upstream-client.js';
export { compileSecretForms, type SecretForms } from './secret-scrubber.js';
