/**
 * Runs services as real child processes, the way an operator does:
 * `node --import tsx services/<name>/src/main.ts`, configured only by env.
 * Every stdout/stderr line is kept in memory (log assertions, failure reports).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { freePort } from './ports.js';

export { freePort };

export type ServiceName = 'control-plane' | 'data-plane' | 'audit' | 'notifier' | 'all-in-one';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface LogLine {
  process: string;
  stream: 'stdout' | 'stderr';
  text: string;
}

// Children must not outlive the test worker, even when a suite crashes before afterAll.
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Only what a process needs to run; nothing from the test runner's own environment leaks in. */
function baseEnv(): Record<string, string> {
  const keep = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'TZ'];
  return Object.fromEntries(keep.flatMap((k) => (process.env[k] ? [[k, process.env[k]!]] : [])));
}

export interface ServiceOptions {
  /** Label used in logs and reports, e.g. `data-plane-2`. */
  label?: string;
  env: Record<string, string>;
  port?: number;
  healthTimeoutMs?: number;
  /** Echo lines to the test output (VLT_E2E_ECHO=1 turns this on everywhere). */
  echo?: boolean;
  /**
   * Root of a production build (scripts/build-services.mjs output under `dist/`, production
   * node_modules beside it): runs `node dist/services/<name>/main.js` there, without tsx.
   */
  built?: string;
  /** Node flags for this process alone, before its entry point (a benchmark's preload). */
  nodeArgs?: string[];
}

export class ServiceProcess {
  readonly label: string;
  readonly lines: LogLine[] = [];
  readonly port: number;
  private child: ChildProcess | undefined;
  private exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  constructor(
    readonly service: ServiceName,
    readonly env: Record<string, string>,
    port: number,
    private readonly opts: Pick<ServiceOptions, 'healthTimeoutMs' | 'echo' | 'built' | 'nodeArgs'> & {
      label: string;
    },
  ) {
    this.label = opts.label;
    this.port = port;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.exitInfo === undefined;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** How the last run ended (undefined while it runs or before it started). */
  get exitStatus(): { code: number | null; signal: NodeJS.Signals | null } | undefined {
    return this.exitInfo;
  }

  async start(): Promise<void> {
    if (this.running) throw new Error(`${this.label} is already running`);
    // VLT_SERVICE_NODE_ARGS passes flags such as --cpu-prof to every service (profiling a bench).
    const extra = [
      ...(process.env.VLT_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean),
      ...(this.opts.nodeArgs ?? []),
    ];
    const built = this.opts.built;
    const args = built
      ? [...extra, path.join('dist', 'services', this.service, 'main.js')]
      : [...extra, '--import', 'tsx', path.join('services', this.service, 'src', 'main.ts')];
    const child = spawn(process.execPath, args, {
      cwd: built ?? repoRoot,
      env: { ...baseEnv(), ...this.env, PORT: String(this.port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exitInfo = undefined;
    live.add(child);
    const echo = this.opts.echo ?? process.env.VLT_E2E_ECHO === '1';
    for (const stream of ['stdout', 'stderr'] as const) {
      const rl = createInterface({ input: child[stream]! });
      rl.on('line', (text) => {
        this.lines.push({ process: this.label, stream, text });
        if (echo) console.log(`[${this.label}] ${text}`);
      });
    }
    this.exit = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        live.delete(child);
        this.exitInfo = { code, signal };
        resolve({ code, signal });
      });
    });
    await this.waitHealthy();
  }

  private async waitHealthy(): Promise<void> {
    const deadline = Date.now() + (this.opts.healthTimeoutMs ?? 90_000);
    let last = 'no answer yet';
    while (Date.now() < deadline) {
      if (this.exitInfo) {
        throw new Error(
          `${this.label} exited before it was healthy (code ${this.exitInfo.code}, signal ${this.exitInfo.signal}).\n${this.tail()}`,
        );
      }
      try {
        const res = await request(`${this.baseUrl}/health`, { headersTimeout: 2000, bodyTimeout: 2000 });
        const text = await res.body.text();
        if (res.statusCode === 200) {
          const body = JSON.parse(text) as { status?: unknown };
          if (typeof body.status === 'string') return;
          last = `200 without a {status} string: ${text.slice(0, 200)}`;
        } else last = `HTTP ${res.statusCode}: ${text.slice(0, 200)}`;
      } catch (err) {
        last = (err as Error).message;
      }
      await sleep(150);
    }
    throw new Error(
      `${this.label} not healthy on ${this.baseUrl}/health in time (last: ${last}).\n${this.tail()}`,
    );
  }

  /** SIGSTOP: the process keeps its sockets open and answers nothing (a hung service). */
  pause(): void {
    if (this.running) this.child!.kill('SIGSTOP');
  }

  /** SIGCONT after `pause()`. */
  resume(): void {
    if (this.running) this.child!.kill('SIGCONT');
  }

  /** SIGTERM, then SIGKILL if the process has not drained in time. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!this.running || !this.exit) return;
    // A paused process would not see the SIGTERM until continued.
    this.child!.kill('SIGCONT');
    this.child!.kill('SIGTERM');
    const done = await Promise.race([this.exit.then(() => true), sleep(timeoutMs).then(() => false)]);
    if (!done) await this.kill();
  }

  /** SIGKILL: no drain, no goodbye (crash simulation). */
  async kill(): Promise<void> {
    if (!this.running || !this.exit) return;
    this.child!.kill('SIGKILL');
    await this.exit;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** The last lines printed, for failure messages. */
  tail(n = 40): string {
    return this.lines
      .slice(-n)
      .map((l) => `  [${l.process} ${l.stream}] ${l.text}`)
      .join('\n');
  }
}

/** The processes of one test file: started together, always cleaned up together. */
export class ProcessGroup {
  readonly processes: ServiceProcess[] = [];

  async start(service: ServiceName, opts: ServiceOptions): Promise<ServiceProcess> {
    for (let attempt = 1; ; attempt++) {
      const port = opts.port ?? (await freePort());
      const proc = new ServiceProcess(service, opts.env, port, {
        label: opts.label ?? service,
        healthTimeoutMs: opts.healthTimeoutMs,
        echo: opts.echo,
        built: opts.built,
        nodeArgs: opts.nodeArgs,
      });
      this.processes.push(proc);
      try {
        await proc.start();
        return proc;
      } catch (err) {
        // A port chosen here can still be taken before the child binds it, seconds later (by
        // another test worker picking the same one): the child exits with EADDRINUSE, and
        // another port is tried. A port the caller chose (and built URLs from) cannot be
        // replaced.
        const taken =
          opts.port === undefined &&
          proc.exitStatus !== undefined &&
          proc.lines.some((l) => l.text.includes('EADDRINUSE'));
        if (!taken || attempt === 3) throw err;
        this.processes.splice(this.processes.indexOf(proc), 1);
      }
    }
  }

  /** Every line every process (including earlier incarnations) printed. */
  allLines(): LogLine[] {
    return this.processes.flatMap((p) => p.lines);
  }

  async stopAll(): Promise<void> {
    await Promise.allSettled(this.processes.map((p) => p.stop(5_000)));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
