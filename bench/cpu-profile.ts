/**
 * Summaries of V8 CPU profiles (`node --cpu-prof`), for the benches' `--profile` switch: where
 * a process's main thread spent its time while the bench measured, grouped by who owns the code
 * (our packages, each library, Node's internals, native code, the garbage collector), and the
 * functions with the most self time. The performance issue asks for such a summary of every
 * process, before and after a change; the full profiles stay on disk for Chrome DevTools.
 *
 * A sample counts as busy unless V8 marked it `(idle)` (the event loop waiting in epoll). Busy
 * time is wall time the thread was not idle, so it includes time spent waiting for a core: read
 * the shares, and the processes' CPU time from /proc for absolute cost.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/** The parts of a `.cpuprofile` this reads (Chrome DevTools protocol `Profiler.Profile`). */
interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
  }>;
  /** Microseconds on the machine's monotonic clock, as `process.hrtime` reads it. */
  startTime: number;
  samples: number[];
  /** Microseconds from the previous sample (the first from `startTime`). */
  timeDeltas: number[];
}

/** A window on the monotonic clock, in microseconds: `process.hrtime.bigint() / 1000n`. */
export interface ProfileWindow {
  fromUs: number;
  toUs: number;
}

export interface ProfileSummary {
  /** Busy (not idle) milliseconds within the window. */
  busyMs: number;
  /** Busy milliseconds by owner of the code, largest first. */
  groups: Array<{ name: string; ms: number }>;
  /** Busy milliseconds by function (self time), largest first. */
  functions: Array<{ name: string; ms: number }>;
}

/** Node flags that write a process's profiles (one file per thread) into `dir` when it exits. */
export function cpuProfileArgs(dir: string): string[] {
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`];
}

/** Now, on the clock profiles use. */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/**
 * Who owns the code at `url`: `ours <dir>/<package>` for this repository's packages,
 * `lib <package>` for a dependency, `node` for Node's own JavaScript. Frames without a URL are
 * V8's pseudo-frames, `(garbage collector)` and `(program)`, or native code (`native`).
 */
export function codeOwner(functionName: string, url: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : 'native';
  if (url.startsWith('node:')) return 'node';
  const lib = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (lib) return `lib ${lib[1]}`;
  const ours = /\/(libs|services|clients|bench|tests)\/([^/]+)\//.exec(url);
  if (ours) return `ours ${ours[1]}/${ours[2]}`;
  return 'other';
}

/** Summarises one thread's profile, counting only the samples taken within `window`. */
export function summarizeCpuProfile(profile: CpuProfile, window?: ProfileWindow): ProfileSummary {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const groups = new Map<string, number>();
  const functions = new Map<string, number>();
  let busyUs = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    const frame = nodes.get(profile.samples[i]!);
    if (!frame || frame.functionName === '(idle)') continue;
    // A sample stands for the time since the previous one.
    busyUs += delta;
    const owner = codeOwner(frame.functionName, frame.url);
    groups.set(owner, (groups.get(owner) ?? 0) + delta);
    const name = `${frame.functionName || '(anonymous)'} ${shortUrl(frame.url, frame.lineNumber)}`.trim();
    functions.set(name, (functions.get(name) ?? 0) + delta);
  }
  const sorted = (m: Map<string, number>) =>
    [...m].map(([name, us]) => ({ name, ms: us / 1000 })).sort((a, b) => b.ms - a.ms);
  return { busyMs: busyUs / 1000, groups: sorted(groups), functions: sorted(functions) };
}

function shortUrl(url: string, line: number): string {
  if (!url) return '';
  const file = url
    .replace(/^.*node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?/, '')
    .replace(/^.*?\/((?:libs|services|clients|bench|tests)\/)/, '$1')
    .replace(/^file:\/\//, '');
  return `(${file}:${line + 1})`;
}

/**
 * The profiles a process wrote into `dir` (`--cpu-prof-dir`), main thread first. Node names each
 * `CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile`; thread 0 is the main thread. A process
 * writes them as it exits, so this waits up to `waitMs` for the main thread's to appear.
 */
export async function readCpuProfiles(
  dir: string,
  waitMs = 5_000,
): Promise<Array<{ thread: number; profile: CpuProfile }>> {
  const until = Date.now() + waitMs;
  for (;;) {
    const files = (await readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.cpuprofile'));
    const threads = files.map((f) => ({ file: f, thread: Number(f.split('.').at(-3)) }));
    if (threads.some((t) => t.thread === 0) || Date.now() >= until) {
      const read = await Promise.all(
        threads
          .sort((a, b) => a.thread - b.thread)
          .map(async (t) => ({
            thread: t.thread,
            profile: JSON.parse(await readFile(path.join(dir, t.file), 'utf8')) as CpuProfile,
          })),
      );
      return read;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Prints, for each process, its main thread's busy time per call within `window` and its
 * largest owners and functions. Main threads only: a worker thread that is terminated, as the
 * embedded database's is, writes no profile, so the other threads' files are not the whole of
 * them (the benches read every thread's CPU time from /proc instead).
 */
export async function printCpuProfiles(
  processes: ReadonlyArray<{ label: string; dir: string; calls: number; per: string }>,
  window: ProfileWindow,
): Promise<void> {
  const pct = (ms: number, of: number) => `${((100 * ms) / of).toFixed(1)} %`;
  for (const p of processes) {
    const main = (await readCpuProfiles(p.dir)).find((t) => t.thread === 0);
    if (!main) {
      console.log(`  ${p.label}: no profile written (${p.dir})`);
      continue;
    }
    const s = summarizeCpuProfile(main.profile, window);
    console.log(`  ${p.label}: main thread busy ${(s.busyMs / p.calls).toFixed(3)} ms per ${p.per}`);
    console.log(
      `    by owner: ${s.groups
        .slice(0, 8)
        .map((g) => `${g.name} ${pct(g.ms, s.busyMs)}`)
        .join(', ')}`,
    );
    console.log(
      `    by function: ${s.functions
        .slice(0, 8)
        .map((f) => `${f.name} ${pct(f.ms, s.busyMs)}`)
        .join(', ')}`,
    );
  }
}
