/**
 * Preloaded into CLI processes the tests start (`node --import tsx --import <this> …`): the test
 * stands in for the edge proxy the gateway trusts (VLT_TRUST_PROXY=127.0.0.1/32), so each CLI
 * process appears from its own client address. Without it every run would share 127.0.0.1's
 * per-IP budget for `POST /v1/agents/bootstrap` (five a minute). The CLI itself is unchanged:
 * only the header a proxy would add is added.
 */
import { forwardedFetch } from './forwarded-fetch.js';

globalThis.fetch = forwardedFetch(globalThis.fetch);
