/**
 * Preloaded (`--import`) into the processes bench/gateway.ts measures: reports every garbage
 * collection pause of the main thread on stderr, one line each (`vlt-bench-gc <kind> <ms>`), so
 * the bench can count them round by round. A pause stops the event loop, and the call that
 * meets one waits for all of it (ADR 0083). Worker threads (the embedded database) do not load
 * it: their pauses stop no call.
 */
import { PerformanceObserver, constants } from 'node:perf_hooks';

const KINDS = new Map([
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
]);

new PerformanceObserver((list) => {
  let lines = '';
  for (const entry of list.getEntries()) {
    lines += `vlt-bench-gc ${KINDS.get(entry.detail?.kind) ?? 'other'} ${entry.duration.toFixed(3)}\n`;
  }
  process.stderr.write(lines);
}).observe({ entryTypes: ['gc'] });
