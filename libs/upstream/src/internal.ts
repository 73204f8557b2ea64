/**
 * Internals for benchmarks (the `./internal` export, as in @vlt/policy-engine): not part of the
 * public API, may change without notice.
 */
export { createSecretScrubber } from './secret-scrubber.js';
