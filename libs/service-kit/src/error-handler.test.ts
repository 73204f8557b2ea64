import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { Writable } from 'node:stream';
import { z } from 'zod';
import { createServiceApp } from './create-app.js';
import { AppError, Errors } from './errors.js';
import { BusNoRespondersError, BusTimeoutError } from '@vlt/bus';
import { UpstreamError } from '@vlt/upstream';

function captureLogger() {
  const lines: string[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
  );
  return { logger, lines };
}

async function appWithRoutes() {
  const { logger, lines } = captureLogger();
  const app = await createServiceApp({ title: 't', logger, trustProxy: [] });
  app.post(
    '/typed',
    { schema: { body: z.object({ name: z.string().min(1), n: z.number().int() }) } },
    async () => ({ ok: true }),
  );
  app.get('/app-error', async () => {
    throw Errors.conflict('already there', { auditId: 'a1' });
  });
  app.get('/rate', async () => {
    throw new AppError('RATE_LIMITED', 429, 'slow down', { retryAfter: 7, headers: { 'retry-after': '7' } });
  });
  app.get('/bus', async () => {
    throw new BusTimeoutError('request to vlt.rpc.policy timed out');
  });
  app.get('/bus-none', async () => {
    throw new BusNoRespondersError('no responders');
  });
  app.get('/upstream', async () => {
    throw new UpstreamError('timeout', 'provider request timed out');
  });
  app.get('/boom', async () => {
    throw new Error('database password=hunter2 at line 3');
  });
  await app.ready();
  return { app, lines };
}

describe('error handler', () => {
  it('maps a typed error to its status with error, code and auditId', async () => {
    const { app } = await appWithRoutes();
    const res = await app.inject({ method: 'GET', url: '/app-error' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({ error: 'already there', code: 'CONFLICT', auditId: 'a1' });
  });

  it('maps bus failures that reach it to 503 with Retry-After, never 500', async () => {
    const { app } = await appWithRoutes();
    for (const url of ['/bus', '/bus-none']) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.json()).toEqual({
        error: 'a backing service is unavailable; retry shortly',
        code: 'SERVICE_UNAVAILABLE',
        retryAfter: 1,
      });
    }
  });

  it('maps provider failures that reach it to their 502 code', async () => {
    const { app } = await appWithRoutes();
    const res = await app.inject({ method: 'GET', url: '/upstream' });
    expect(res.statusCode).toBe(502);
    expect(res.json()).toEqual({ error: 'provider request timed out', code: 'UPSTREAM_TIMEOUT' });
  });

  it('carries retryAfter in the body and Retry-After as a header', async () => {
    const { app } = await appWithRoutes();
    const res = await app.inject({ method: 'GET', url: '/rate' });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('7');
    expect(res.json()).toMatchObject({ error: 'slow down', retryAfter: 7 });
  });

  it('answers invalid bodies with 400 naming the field', async () => {
    const { app } = await appWithRoutes();
    const res = await app.inject({ method: 'POST', url: '/typed', payload: { name: '', n: 1.5 } });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.code).toBe('BAD_REQUEST');
    expect(body.error).toMatch(/^invalid request: body\.(name|n)/);
    expect(body.details.map((d: { path: string }) => d.path).sort()).toEqual(['body.n', 'body.name']);
  });

  it('answers malformed JSON and wrong media types as client errors, not 500', async () => {
    const { app } = await appWithRoutes();
    const bad = await app.inject({
      method: 'POST',
      url: '/typed',
      payload: '{"name":',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.statusCode).toBe(400);
    expect(typeof bad.json().error).toBe('string');
    const media = await app.inject({
      method: 'POST',
      url: '/typed',
      payload: 'x',
      headers: { 'content-type': 'application/x-unknown' },
    });
    expect(media.statusCode).toBe(415);
  });

  it('hides unexpected errors behind a generic 500 with no stack or message', async () => {
    const { app, lines } = await appWithRoutes();
    const res = await app.inject({ method: 'GET', url: '/boom' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'internal error', code: 'INTERNAL' });
    expect(res.body).not.toContain('hunter2');
    expect(res.body).not.toContain('at ');
    // The detail goes to the log for operators.
    expect(lines.join('')).toContain('unhandled error');
  });

  it('answers unknown routes with a JSON 404', async () => {
    const { app } = await appWithRoutes();
    const res = await app.inject({ method: 'GET', url: '/nope?token=secret' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error).toBe('no route for GET /nope');
  });

  it('serves /health, /v1/health and the OpenAPI 3.1 document', async () => {
    const { app } = await appWithRoutes();
    expect((await app.inject({ method: 'GET', url: '/health' })).json()).toEqual({ status: 'ok' });
    expect((await app.inject({ method: 'GET', url: '/v1/health' })).json()).toEqual({ status: 'ok' });
    const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
    expect(doc.openapi).toBe('3.1.0');
    expect(
      doc.paths['/typed'].post.requestBody.content['application/json'].schema.properties.name,
    ).toBeDefined();
  });
});
