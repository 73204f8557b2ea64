/**
 * Internal switches for benchmarks and differential tests (the `./internal` export, as nats.js
 * keeps `internal_mod.ts`): not part of the public API, may change without notice.
 */
export { createFilterCore, toNodeTransform, toWebTransform } from './stream-filters.js';
export type { FilterCoreOptions, ResponseFilterCore } from './stream-filters.js';
