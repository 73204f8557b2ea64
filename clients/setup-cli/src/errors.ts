/**
 * The CLI's failures, each mapped to one exit code by `runCli`. Messages are written for the
 * person at the terminal and never carry a secret: the bootstrap secret, the private key and
 * access tokens are not interpolated into any of them (and `runCli` scrubs known secrets from
 * whatever it prints, as a second line of defence).
 */

/** Exit codes: stable, documented in `--help` and ADR 0058. */
export const EXIT = {
  ok: 0,
  /** The operation failed, or `verify` found a failing check. */
  failed: 1,
  /** The command line or the input is wrong, or required input is missing. */
  usage: 2,
  /** The user cancelled at a prompt (Ctrl-C / Ctrl-D), like a shell's SIGINT status. */
  cancelled: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class SetupCliError extends Error {
  override name = 'SetupCliError';
  readonly exitCode: ExitCode;
  /** What to do about it, printed on its own line after the message. */
  readonly hint: string | undefined;

  constructor(message: string, opts: { exitCode?: ExitCode; hint?: string } = {}) {
    super(message);
    this.exitCode = opts.exitCode ?? EXIT.failed;
    this.hint = opts.hint;
  }
}

/** Bad flags, an invalid value, or input the CLI needs and may not prompt for. Exit 2. */
export class UsageError extends SetupCliError {
  override name = 'UsageError';
  constructor(message: string, hint?: string) {
    super(message, { exitCode: EXIT.usage, hint });
  }
}

/** The OpenClaw config cannot be read, understood or written. Exit 1. */
export class ConfigError extends SetupCliError {
  override name = 'ConfigError';
}

/** The agent's key file is missing, unreadable, malformed or not private. Exit 1. */
export class KeyFileError extends SetupCliError {
  override name = 'KeyFileError';
}

/** The user aborted a prompt. Exit 130. */
export class CancelledError extends SetupCliError {
  override name = 'CancelledError';
  constructor() {
    super('cancelled', { exitCode: EXIT.cancelled });
  }
}
