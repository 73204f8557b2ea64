/**
 * Drives vlt-setup for tests: as a real process (`node --import tsx …/main.ts`), in-process
 * through `runCli` with collected output, and under a pseudo-terminal (util-linux `script`)
 * for the interactive prompts. Also a structural diff of two configs, to assert that a mode
 * changed exactly the paths it should.
 */
import { spawn } from 'node:child_process';
import { PassThrough, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { runCli, type CliIo } from '../../../clients/setup-cli/src/index.js';
import { forwardedFetch } from './forwarded-fetch.js';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const MAIN = 'clients/setup-cli/src/main.ts';
/** See edge-proxy-preload.ts: each CLI process gets its own client address. */
const PRELOAD = ['--import', 'tsx', '--import', './tests/clients/setup-cli/edge-proxy-preload.ts'];

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** A clean environment: nothing of the test runner's, and HOME in the test's directory. */
export function cleanEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, ...extra };
}

/** The CLI as a separate process, stdin not a terminal. */
export function runBin(args: string[], env: Record<string, string>): Promise<RunResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...PRELOAD, MAIN, ...args], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - started }));
  });
}

class Collect extends Writable {
  text = '';
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/** `runCli` in this process, stdin a pipe (so never a terminal). */
export async function runInProcess(
  args: string[],
  o: {
    home: string;
    env?: Record<string, string>;
    fetch?: CliIo['fetch'];
    pluginDir?: string;
    runCommand?: CliIo['runCommand'];
  },
): Promise<RunResult> {
  const stdout = new Collect();
  const stderr = new Collect();
  const started = performance.now();
  const code = await runCli(args, {
    stdin: new PassThrough(),
    stdout,
    stderr,
    env: o.env ?? {},
    fetch: o.fetch ?? forwardedFetch(globalThis.fetch),
    homeDir: o.home,
    cwd: REPO_ROOT,
    ...(o.pluginDir ? { pluginDir: o.pluginDir } : {}),
    ...(o.runCommand ? { runCommand: o.runCommand } : {}),
  });
  return { code, stdout: stdout.text, stderr: stderr.text, ms: performance.now() - started };
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export interface Pty {
  /** Everything the terminal showed so far. */
  output(): string;
  /** Resolves once the terminal shows `text` (after the previous match); rejects after `ms`. */
  waitFor(text: string, ms?: number): Promise<void>;
  /** Types `line` and Enter (the terminal is in raw mode while the CLI reads). */
  type(line: string): void;
  exited: Promise<number | null>;
  kill(): void;
}

/** The CLI on a pseudo-terminal: `script -qfec "<cmd>" /dev/null`, answered through script's stdin. */
export function startPty(args: string[], env: Record<string, string>): Pty {
  const command = [process.execPath, ...PRELOAD, MAIN, ...args].map(shellQuote).join(' ');
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd: REPO_ROOT,
    env: { ...env, SHELL: '/bin/sh', TERM: 'dumb' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let cursor = 0;
  const waiters: (() => void)[] = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    output: () => out,
    waitFor(text, ms = 10_000) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for ${JSON.stringify(text)} in:\n${out}`)),
          ms,
        );
        const check = () => {
          const at = out.indexOf(text, cursor);
          if (at >= 0) {
            cursor = at + text.length;
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      });
    },
    type(line) {
      child.stdin.write(`${line}\r`);
    },
    exited,
    kill: () => child.kill('SIGKILL'),
  };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The dotted paths at which two JSON values differ (arrays compared whole). */
export function changedPaths(a: unknown, b: unknown, path = ''): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    return keys.flatMap((k) => changedPaths(a[k], b[k], path ? `${path}.${k}` : k));
  }
  return [path || '(root)'];
}
