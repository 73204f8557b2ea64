import { execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { context, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { createLogger, redactSecrets, SECRET_KEYS, serializeRequest } from './index.js';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const logger = createLogger({ service: 'test-svc', level: 'debug', destination });
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const SPAN = {
  traceId: '0af7651916cd43dd8448eb211c80319c',
  spanId: 'b7ad6b7169203331',
  traceFlags: TraceFlags.SAMPLED,
};

describe('trace correlation', () => {
  const manager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    context.setGlobalContextManager(manager.enable());
  });
  afterAll(() => {
    context.disable();
  });

  it('adds trace_id/span_id/trace_flags while a span is active, across awaits', async () => {
    const { logger, records } = capture();
    await context.with(trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext(SPAN)), async () => {
      logger.info('sync');
      await new Promise((r) => setTimeout(r, 5));
      logger.child({ reqId: 'r1' }).info('after await');
    });
    logger.info('outside');
    const [inside, afterAwait, outside] = records();
    expect(inside).toMatchObject({
      service: 'test-svc',
      level: 'info',
      trace_id: SPAN.traceId,
      span_id: SPAN.spanId,
      trace_flags: '01',
    });
    expect(afterAwait).toMatchObject({ trace_id: SPAN.traceId, reqId: 'r1' });
    expect(outside).not.toHaveProperty('trace_id');
    expect(outside).not.toHaveProperty('span_id');
  });

  it('ignores an invalid span context', () => {
    const { logger, records } = capture();
    context.with(
      trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext({ ...SPAN, traceId: '0'.repeat(32) })),
      () => logger.info('x'),
    );
    expect(records()[0]).not.toHaveProperty('trace_id');
  });
});

describe('redaction', () => {
  const secret = (name: string) => `S3CR3T-${name}-value`;

  it('removes every listed secret name at the top level and nested (objects, arrays, bindings)', () => {
    const { logger, lines } = capture();
    for (const key of SECRET_KEYS) {
      logger.info({ [key]: secret(`top-${key}`) }, 'top');
      logger.info({ body: { connection: { nested: { [key]: secret(`deep-${key}`) } } } }, 'deep');
      logger.info({ items: [{ [key]: secret(`arr-${key}`) }] }, 'array');
      logger.child({ [key]: secret(`bind-${key}`) }).info('binding');
    }
    const out = lines.join('\n');
    expect(out).not.toContain('S3CR3T');
    expect(lines).toHaveLength(SECRET_KEYS.length * 4);
    expect(out).toContain('[REDACTED]');
  });

  it('matches case-, dash- and underscore-insensitively (headers, snake_case OAuth fields)', () => {
    const { logger, lines } = capture();
    logger.info({
      req: {
        headers: {
          Authorization: 'Bearer S3CR3T-a',
          cookie: 'sid=S3CR3T-b',
          'x-api-key': 'S3CR3T-c',
          'X-Vlt-Session-Key': 'S3CR3T-d',
        },
      },
      upstream: { headers: { 'Proxy-Authorization': 'S3CR3T-e' } },
      tokenResponse: { access_token: 'S3CR3T-f', refresh_token: 'S3CR3T-g', id_token: 'S3CR3T-h' },
      form: { client_assertion: 'S3CR3T-i', client_secret: 'S3CR3T-j', code_verifier: 'S3CR3T-k' },
      issueTracker: { apiToken: 'S3CR3T-l' },
      chat: { botToken: 'S3CR3T-m' },
      agent: { bootstrapSecret: 'S3CR3T-n' },
      pat: { plainToken: 'S3CR3T-o' },
      connection: { credentials: { accessToken: 'S3CR3T-p' } },
      user: { password: 'S3CR3T-q' },
    });
    expect(lines.join('')).not.toContain('S3CR3T');
  });

  it('redacts secrets carried on logged errors', () => {
    const { logger, lines, records } = capture();
    const err = Object.assign(new Error('upstream failed'), {
      config: { headers: { authorization: 'Bearer S3CR3T-err' } },
      status: 502,
    });
    logger.error({ err }, 'call failed');
    logger.error(err);
    expect(lines.join('')).not.toContain('S3CR3T');
    expect(records()[0]).toMatchObject({ err: { type: 'Error', message: 'upstream failed', status: 502 } });
  });

  it("keeps non-secret fields and never mutates the caller's object", () => {
    const { logger, records } = capture();
    const payload = { connection: { id: 'c1', accessToken: 'S3CR3T' }, auditId: 'a1' };
    logger.info(payload, 'm');
    expect(payload.connection.accessToken).toBe('S3CR3T');
    expect(records()[0]).toMatchObject({
      connection: { id: 'c1', accessToken: '[REDACTED]' },
      auditId: 'a1',
    });
    expect(redactSecrets(payload)).not.toBe(payload);
    const clean = { a: { b: [1, 2] } };
    expect(redactSecrets(clean)).toBe(clean);
  });
});

describe('request serializer', () => {
  it('logs method and path with query values removed, and no headers', () => {
    const out = serializeRequest({
      method: 'GET',
      url: '/v1/notifications/stream?access_token=vltp_S3CR3TTOKENVALUE&since=5',
      host: 'gw.example',
      ip: '10.0.0.1',
      socket: { remotePort: 5555 },
    });
    expect(out).toEqual({
      method: 'GET',
      url: '/v1/notifications/stream?access_token=REDACTED&since=REDACTED',
      host: 'gw.example',
      remoteAddress: '10.0.0.1',
      remotePort: 5555,
    });
  });

  it('is what the logger uses for `req`', () => {
    const { logger, lines } = capture();
    logger.info(
      {
        req: {
          method: 'GET',
          url: '/v1/connections/callback?code=S3CR3T&state=S3CR3T2',
          headers: { authorization: 'S3CR3T3' },
        },
      },
      'incoming request',
    );
    expect(lines.join('')).not.toContain('S3CR3T');
    expect(lines[0]).toContain('/v1/connections/callback?code=REDACTED&state=REDACTED');
  });
});

describe('default destination (stdout)', () => {
  it('has written a line when the call returns, even while the threadpool is busy (ADR 0088)', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'vlt-logger-'));
    try {
      const fifo = path.join(dir, 'held');
      execFileSync('mkfifo', [fifo]);
      const stdoutFile = path.join(dir, 'stdout');
      const stdout = openSync(stdoutFile, 'w');
      const child = fileURLToPath(new URL('./testing/log-while-threadpool-busy-child.ts', import.meta.url));
      // The child's stdout is the file itself, so a line is there once write(2) has returned.
      const run = spawn(process.execPath, ['--import', 'tsx', child, fifo, stdoutFile], {
        env: { ...process.env, UV_THREADPOOL_SIZE: '1' },
        stdio: ['ignore', stdout, 'pipe'],
        timeout: 60_000,
      });
      closeSync(stdout);
      let stderr = '';
      run.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      await new Promise((resolve) => run.once('close', resolve));
      expect(stderr).toContain('line written');
      const line = readFileSync(stdoutFile, 'utf8').trim().split('\n').at(-1)!;
      expect(JSON.parse(line)).toMatchObject({
        service: 'probe',
        msg: 'logged while the threadpool is busy',
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
