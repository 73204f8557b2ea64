/**
 * The OpenClaw plugin entry (`openclaw.extensions` in package.json): what the host's loader
 * imports. Everything else lives in openclaw.ts and the host-independent modules.
 */
import { definePluginEntry } from 'openclaw/plugin-sdk/plugin-entry';
import { PLUGIN_DESCRIPTION, PLUGIN_ID, PLUGIN_NAME, configSchema, registerVaultPlugin } from './openclaw.js';

export default definePluginEntry({
  id: PLUGIN_ID,
  name: PLUGIN_NAME,
  description: PLUGIN_DESCRIPTION,
  configSchema,
  register(api) {
    registerVaultPlugin(api);
  },
});
