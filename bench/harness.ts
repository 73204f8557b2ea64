/**
 * What the process-based benchmarks (bench/gateway.ts, bench/streaming.ts) share: a watchdog,
 * the test PKI, a process group for vault services, a scratch data directory, helpers to start
 * this benchmark's own child roles and to read a process's CPU time. Everything is undone by
 * `close()`, also when the benchmark fails half-way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type * as ApiClient from '@vlt/test-support/api-client.js';
import type { ProcessGroup, freePort as FreePort } from '@vlt/test-support/processes.js';
import type { createTestPki } from '@vlt/test-support/test-pki.js';

export interface BenchHarness {
  pki: Awaited<ReturnType<typeof createTestPki>>;
  group: ProcessGroup;
  freePort: typeof FreePort;
  api: typeof ApiClient;
  dataDir: string;
  /** Starts `file` with `--role=<role>` and resolves with the port its first stdout line names. */
  startRole(
    file: string,
    role: string,
    env: Record<string, string>,
  ): Promise<{ child: ChildProcess; port: number }>;
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
    startRole(file, role, env) {
      // VLT_SERVICE_NODE_ARGS passes flags such as --cpu-prof to every role (profiling a bench).
      const extra = (process.env.VLT_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
      const child = spawn(process.execPath, [...extra, '--import', 'tsx', file, `--role=${role}`], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.push(child);
      return new Promise((resolve, reject) => {
        const rl = createInterface({ input: child.stdout! });
        rl.once('line', (line) => resolve({ child, port: (JSON.parse(line) as { port: number }).port }));
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
