/**
 * ADR 0042, configuration: every process refuses to start, naming the variable, when a
 * `VLT_<PROVIDER>_*` variable is not an https URL, is half an OAuth app, names an endpoint the
 * provider's kind does not have, or names a provider that does not exist. Values are never
 * printed. Checked on the real entry points, as an operator starts them.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { repoRoot, type ServiceName } from '../support/processes.js';

const MARK = `sekret${randomBytes(6).toString('hex')}`;

/** Only enough for config to be read: no database or bus is reached before the refusal. */
const BASE = {
  NATS_URL: 'nats://127.0.0.1:1',
  DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none',
  VLT_MASTER_KEY: randomBytes(32).toString('base64'),
  HOST: '127.0.0.1',
  PORT: '0',
  LOG_LEVEL: 'info',
};

function run(
  service: ServiceName,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const keep = ['PATH', 'HOME', 'LANG', 'TMPDIR', 'TZ'];
    const inherited = Object.fromEntries(keep.flatMap((k) => (process.env[k] ? [[k, process.env[k]!]] : [])));
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join('services', service, 'src', 'main.ts')],
      {
        cwd: repoRoot,
        env: { ...inherited, ...BASE, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${service} did not exit within 30 s:\n${output.slice(-2000)}`));
    }, 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

const CASES: [string, Record<string, string>, string][] = [
  ['not https', { VLT_SUITE_A_TOKEN_URL: `http://127.0.0.1/${MARK}` }, 'VLT_SUITE_A_TOKEN_URL'],
  ['half an OAuth app', { VLT_BOARD_CLIENT_SECRET: MARK }, 'VLT_BOARD_CLIENT_ID'],
  [
    'an endpoint the kind does not have',
    { VLT_LLM_A_TOKEN_URL: `https://x.test/${MARK}` },
    'VLT_LLM_A_TOKEN_URL',
  ],
  ['a provider that does not exist', { VLT_SUITEA_API_URL: `https://x.test/${MARK}` }, 'VLT_SUITEA_API_URL'],
];

describe('provider configuration refuses to start', () => {
  it.each(CASES)('control-plane: %s', async (_name, env, variable) => {
    const { code, output } = await run('control-plane', env);
    expect(code, output).not.toBe(0);
    expect(output).toContain(variable);
    expect(output).not.toContain(MARK);
  });

  it.each(['data-plane', 'audit', 'notifier', 'all-in-one'] as const)(
    '%s refuses a bad provider variable too',
    async (service) => {
      const { code, output } = await run(service, { VLT_CHATBOT_A_CLIENT_ID: MARK });
      expect(code, output).not.toBe(0);
      expect(output).toContain('VLT_CHATBOT_A_CLIENT_ID');
      expect(output).not.toContain(MARK);
    },
  );
});
