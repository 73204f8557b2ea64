/**
 * @vlt/setup-cli: `vlt-setup`, which enrols an agent with the vault and points an OpenClaw
 * install at it. The bin entry is main.ts; `runCli` is the CLI as a function, for tests and
 * embedding.
 */
export { runCli, helpText, MODES, type Mode } from './cli.js';
export type { CliIo } from './io.js';
export { EXIT, type ExitCode } from './errors.js';
export { PLUGIN_ID, KEY_SECRET_PROVIDER, API_KEY_MARKER } from './openclaw-config.js';
export { LLM_ROUTES, openclawBaseUrl, type LlmRoute } from './llm-providers.js';
