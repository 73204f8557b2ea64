/**
 * The `vlt-setup` executable: hands the process's argv, streams and environment to `runCli`
 * and sets the exit status. The only module that touches `process`.
 */
import { spawn } from 'node:child_process';
import { homedir } from 'node:os';
import { runCli } from './cli.js';

/** Runs a command on the user's terminal (`openclaw onboard`), resolving its exit status. */
function runCommand(
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'inherit', env });
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

process.exitCode = await runCli(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  fetch: globalThis.fetch,
  homeDir: homedir(),
  cwd: process.cwd(),
  runCommand,
});
