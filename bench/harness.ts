/**
 * What the process-based benchmarks (bench/gateway.ts, bench/streaming.ts) share: a watchdog,
 * the test PKI, a process group for vault services, a scratch data directory, helpers to start
 * this benchmark's own child roles and to read a process's CPU time. Everything is undone by
 * `close()`, also when the benchmark fails half-way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type * as ApiClient from '@vlt/test-support/api-client.js';
import type { ProcessGroup, freePort as FreePort } from '@vlt/test-support/processes.js';
import type { createTestPki } from '@vlt/test-support/test-pki.js';

/** The line prefix of bench/gc-pauses.mjs's reports. */
export const GC_PAUSE_PREFIX = 'vlt-bench-gc ';

/** Node flags that load bench/gc-pauses.mjs into a process (a role or a service). */
export const GC_PAUSE_ARGS = ['--import', new URL('./gc-pauses.mjs', import.meta.url).href];

export interface GcPause {
  /** `minor` (a scavenge), `major`, `incremental` or `weakcb`. */
  kind: string;
  ms: number;
}

/** The pauses bench/gc-pauses.mjs reported among `lines` (a process's output, line by line). */
export function gcPausesIn(lines: readonly string[]): GcPause[] {
  const pauses: GcPause[] = [];
  for (const line of lines) {
    if (!line.startsWith(GC_PAUSE_PREFIX)) continue;
    const [kind = 'other', ms = 'NaN'] = line.slice(GC_PAUSE_PREFIX.length).split(' ');
    pauses.push({ kind, ms: Number(ms) });
  }
  return pauses;
}

export interface BenchHarness {
  pki: Awaited<ReturnType<typeof createTestPki>>;
  group: ProcessGroup;
  freePort: typeof FreePort;
  api: typeof ApiClient;
  dataDir: string;
  /**
   * Starts `file` with `--role=<role>` (after `nodeArgs`) and resolves with the port its first
   * stdout line names. Its stderr is passed on, and also kept in `stderr`, line by line, but for
   * the pause reports of bench/gc-pauses.mjs, which are only kept.
   */
  startRole(
    file: string,
    role: string,
    env: Record<string, string>,
    nodeArgs?: string[],
  ): Promise<{ child: ChildProcess; port: number; stderr: string[] }>;
  /** Runs at close while the services still run (client pools), last registered first. */
  onClose(fn: () => Promise<unknown>): void;
  /** Runs at close after the services stopped (dropping their database, purging their bus). */
  afterServicesStop(fn: () => Promise<unknown>): void;
  close(): Promise<void>;
}

export async function openBenchHarness(name: string, hardLimitMs: number): Promise<BenchHarness> {
  const children: ChildProcess[] = [];
  const watchdog = setTimeout(() => {
    console.error(`${name} bench exceeded ${hardLimitMs / 1000} s; stopping`);
    for (const c of children) c.kill('SIGKILL');
    process.exit(2);
  }, hardLimitMs);
  watchdog.unref();

  const pkiModule = await import('@vlt/test-support/test-pki.js');
  const processes = await import('@vlt/test-support/processes.js');
  const api = await import('@vlt/test-support/api-client.js');
  const pki = await pkiModule.createTestPki();
  const group = new processes.ProcessGroup();
  const freePort = processes.freePort;
  const dataDir = await mkdtemp(path.join(tmpdir(), `vlt-bench-${name}-`));
  const closers: Array<() => Promise<unknown>> = [];
  const afterStop: Array<() => Promise<unknown>> = [];

  return {
    pki,
    group,
    freePort,
    api,
    dataDir,
    startRole(file, role, env, nodeArgs = []) {
      // VLT_SERVICE_NODE_ARGS passes flags such as --cpu-prof to every role (profiling a bench).
      const extra = (process.env.VLT_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
      const args = [...extra, ...nodeArgs, '--import', 'tsx', file, `--role=${role}`];
      const child = spawn(process.execPath, args, {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      const stderr: string[] = [];
      createInterface({ input: child.stderr! }).on('line', (line) => {
        stderr.push(line);
        if (!line.startsWith(GC_PAUSE_PREFIX)) process.stderr.write(`${line}\n`);
      });
      return new Promise((resolve, reject) => {
        const rl = createInterface({ input: child.stdout! });
        rl.once('line', (line) =>
          resolve({ child, port: (JSON.parse(line) as { port: number }).port, stderr }),
        );
        child.once('exit', (code) => reject(new Error(`${role} exited with ${code}`)));
      });
    },
    onClose(fn) {
      closers.push(fn);
    },
    afterServicesStop(fn) {
      afterStop.push(fn);
    },
    async close() {
      for (const fn of closers.reverse()) await fn().catch(() => undefined);
      await group.stopAll().catch(() => undefined);
      for (const c of children) c.kill('SIGTERM');
      for (const fn of afterStop) await fn().catch(() => undefined);
      await pki.dispose().catch(() => undefined);
      await rm(dataDir, { recursive: true, force: true }).catch(() => undefined);
      clearTimeout(watchdog);
    },
  };
}

/** utime + stime of a process, in seconds (0 when it cannot be read). */
export async function procCpuSeconds(pid: number | undefined): Promise<number> {
  return pid ? statCpuSeconds(`/proc/${pid}/stat`) : 0;
}

/**
 * CPU seconds of a process's main thread alone (its event loop; not the worker threads such
 * as the embedded database, nor GC helpers or the libuv pool). One event loop at saturation
 * serves at most one call per main-thread CPU time of a call.
 */
export async function mainThreadCpuSeconds(pid: number | undefined): Promise<number> {
  return pid ? statCpuSeconds(`/proc/${pid}/task/${pid}/stat`) : 0;
}

async function statCpuSeconds(file: string): Promise<number> {
  const stat = await readFile(file, 'utf8').catch(() => '');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields.length > 12 ? (Number(fields[11]) + Number(fields[12])) / 100 : 0;
}

/**
 * CPU seconds of each process whose command name (`/proc/<pid>/comm`) is `comm`, by pid: a
 * server and all its workers, such as PostgreSQL's backends. See `cpuSecondsBetween`.
 */
export async function commandCpuSeconds(comm: string): Promise<Map<number, number>> {
  const pids = (await readdir('/proc').catch(() => [] as string[])).filter((d) => /^\d+$/.test(d));
  const times = await Promise.all(
    pids.map(async (pid) =>
      (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === comm
        ? ([Number(pid), await statCpuSeconds(`/proc/${pid}/stat`)] as const)
        : undefined,
    ),
  );
  return new Map(times.filter((t) => t !== undefined));
}

/**
 * CPU seconds spent between two readings of `commandCpuSeconds`: a process started in between
 * counts whole, one that exited in between is lost (an undercount, never a negative).
 */
export function cpuSecondsBetween(before: Map<number, number>, after: Map<number, number>): number {
  let spent = 0;
  for (const [pid, s] of after) spent += Math.max(0, s - (before.get(pid) ?? 0));
  return spent;
}

/**
 * The whole machine's busy and total CPU time in seconds, summed over its cores (/proc/stat),
 * to tell whether an interval was bound by CPU. Zero when it cannot be read.
 */
export async function machineCpuSeconds(): Promise<{ busy: number; total: number }> {
  const line = (await readFile('/proc/stat', 'utf8').catch(() => '')).split('\n')[0] ?? '';
  const ticks = line.trim().split(/\s+/).slice(1).map(Number);
  if (ticks.length < 5 || ticks.some((t) => !Number.isFinite(t))) return { busy: 0, total: 0 };
  const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = ticks[3]! + ticks[4]!; // idle and iowait
  return { busy: (total - idle) / 100, total: total / 100 };
}
