/**
 * What the CLI touches outside itself, injected by `main.ts` (the real process) or by tests:
 * streams, environment, fetch, the home and working directories, and a way to run an external
 * command. Prompts go through `node:readline/promises` and only when stdin is a terminal.
 */
import { createInterface, type Interface } from 'node:readline/promises';
import { Writable } from 'node:stream';
import type { FetchLike } from '@vlt/sdk';
import { CancelledError } from './errors.js';

export interface CliIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: Readonly<Record<string, string | undefined>>;
  /** Defaults to the global fetch. */
  fetch?: FetchLike;
  /** The user's home directory: the default OpenClaw directory is `<home>/.openclaw`. */
  homeDir: string;
  /** Relative paths given on the command line are resolved against it. */
  cwd: string;
  /**
   * Runs a command attached to the user's terminal and resolves its exit status. Absent: the
   * CLI cannot run external commands (`openclaw onboard` is then reported, not run).
   */
  runCommand?: (command: string, args: string[], env: Record<string, string | undefined>) => Promise<number>;
  /** Where the vlt-vault plugin is, when neither VLT_AGENT_PLUGIN_DIR nor the default applies. */
  pluginDir?: string;
}

/** Output lines: progress and results on stdout, warnings and errors on stderr. */
export class Out {
  constructor(
    private readonly io: CliIo,
    private readonly scrub: (s: string) => string,
  ) {}
  line(s = ''): void {
    this.io.stdout.write(`${this.scrub(s)}\n`);
  }
  warn(s: string): void {
    this.io.stderr.write(`warning: ${this.scrub(s)}\n`);
  }
  error(s: string): void {
    this.io.stderr.write(`error: ${this.scrub(s)}\n`);
  }
}

/**
 * Questions at the terminal. Hidden answers (the bootstrap secret) are read with readline's
 * echo muted: the terminal is in raw mode while readline reads, so only readline echoes, and
 * its echo goes to a stream that drops it.
 */
export class Prompter {
  private readonly rl: Interface;
  private readonly echo: MutableOutput;
  private readonly aborts = new AbortController();

  constructor(io: CliIo) {
    this.echo = new MutableOutput(io.stdout);
    this.rl = createInterface({ input: io.stdin, output: this.echo, terminal: true, historySize: 0 });
    // Ctrl-C and Ctrl-D end the pending question instead of leaving it unanswered forever.
    this.rl.on('SIGINT', () => this.aborts.abort());
    this.rl.on('close', () => this.aborts.abort());
  }

  async ask(question: string, opts: { default?: string } = {}): Promise<string> {
    const suffix = opts.default ? ` [${opts.default}]` : '';
    const answer = (await this.question(`${question}${suffix}: `)).trim();
    return answer === '' && opts.default !== undefined ? opts.default : answer;
  }

  async askHidden(question: string): Promise<string> {
    this.echo.write(`${question}: `);
    this.echo.muted = true;
    try {
      return (await this.question('')).trim();
    } finally {
      this.echo.muted = false;
      this.echo.write('\n');
    }
  }

  async confirm(question: string, defaultYes = false): Promise<boolean> {
    const answer = (await this.question(`${question} ${defaultYes ? '[Y/n]' : '[y/N]'}: `))
      .trim()
      .toLowerCase();
    if (answer === '') return defaultYes;
    return answer === 'y' || answer === 'yes';
  }

  /** Asks until `valid` returns undefined (no complaint); the complaint is shown otherwise. */
  async askValid(
    question: string,
    valid: (answer: string) => string | undefined,
    opts: { default?: string; hidden?: boolean } = {},
  ): Promise<string> {
    for (;;) {
      const answer = opts.hidden ? await this.askHidden(question) : await this.ask(question, opts);
      const complaint = valid(answer);
      if (complaint === undefined) return answer;
      this.echo.write(`  ${complaint}\n`);
    }
  }

  close(): void {
    this.rl.close();
  }

  private async question(q: string): Promise<string> {
    try {
      return await this.rl.question(q, { signal: this.aborts.signal });
    } catch (err) {
      if (this.aborts.signal.aborted) throw new CancelledError();
      throw err;
    }
  }
}

/** A pass-through to the terminal that can be told to drop what it is given. */
class MutableOutput extends Writable {
  muted = false;
  constructor(private readonly target: NodeJS.WritableStream) {
    super();
  }
  // readline asks its output for the terminal's width when it redraws the line.
  get columns(): number {
    return (this.target as { columns?: number }).columns ?? 80;
  }
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.muted) {
      done();
      return;
    }
    this.target.write(chunk, () => done());
  }
}
