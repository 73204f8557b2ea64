/**
 * One access line per request: the route template with method, status and duration, never the
 * URL's query (where secrets travel), and never Fastify's separate "incoming request" line.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createServiceApp } from './create-app.js';

async function app() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
        cb();
      },
    }),
  );
  const a = await createServiceApp({ title: 't', logger, trustProxy: [] });
  a.get('/v1/things/:id', async () => ({ ok: true }));
  return { a, lines };
}

describe('access log', () => {
  it('writes exactly one line per request, with the route template and no query values', async () => {
    const { a, lines } = await app();
    const res = await a.inject({ method: 'GET', url: '/v1/things/t-1?access_token=S3CR3T-value' });
    expect(res.statusCode).toBe(200);
    const requestLines = lines.filter((l) => l.reqId !== undefined);
    expect(requestLines).toHaveLength(1);
    expect(requestLines[0]).toMatchObject({
      msg: 'request completed',
      method: 'GET',
      route: '/v1/things/:id',
      statusCode: 200,
      responseTime: expect.any(Number),
    });
    expect(JSON.stringify(lines)).not.toContain('S3CR3T');
    await a.close();
  });

  it('logs a request no route matches as such', async () => {
    const { a, lines } = await app();
    const res = await a.inject({ method: 'GET', url: '/nowhere?key=S3CR3T' });
    expect(res.statusCode).toBe(404);
    expect(lines.filter((l) => l.msg === 'request completed')).toEqual([
      expect.objectContaining({ route: '(no route)', statusCode: 404 }),
    ]);
    expect(JSON.stringify(lines)).not.toContain('S3CR3T');
    await a.close();
  });
});
