/**
 * Regression (security review, class 12): bodies nested 100k+ levels deep answered 500 (a stack
 * overflow after parsing). Every service's JSON parser now bounds depth and width first.
 */
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { createServiceApp } from './create-app.js';

async function echoApp() {
  const app = await createServiceApp({ title: 't', logger: pino({ level: 'silent' }), trustProxy: [] });
  app.post('/echo', async (req) => ({ got: JSON.stringify(req.body).length }));
  await app.ready();
  return app;
}

const post = (app: Awaited<ReturnType<typeof echoApp>>, payload: string) =>
  app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload });

describe('regression: JSON request bodies are bounded before they are parsed', () => {
  it('answers 400 with an error string for a body nested 200k levels deep, never 500', async () => {
    const app = await echoApp();
    for (const deep of [
      '['.repeat(200_000) + ']'.repeat(200_000),
      '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000),
    ]) {
      const res = await post(app, deep);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({
        code: 'BAD_REQUEST',
        error: expect.stringMatching(/nested deeper than 64/),
      });
    }
  });

  it('answers 400 for more members than the limit, and accepts bodies within it', async () => {
    const app = await echoApp();
    const wide = (n: number) => `[${Array.from({ length: n }, () => '0').join(',')}]`;
    expect((await post(app, wide(100_001))).statusCode).toBe(400);
    expect((await post(app, wide(50_000))).statusCode).toBe(200);
    const nested = '['.repeat(64) + ']'.repeat(64);
    expect((await post(app, nested)).statusCode).toBe(200);
    expect((await post(app, '['.repeat(65) + ']'.repeat(65))).statusCode).toBe(400);
  });

  it('still refuses prototype poisoning as Fastify does', async () => {
    const app = await echoApp();
    const res = await post(app, '{"__proto__":{"admin":true}}');
    expect(res.statusCode).toBe(400);
    expect(typeof res.json().error).toBe('string');
  });

  it('brackets inside strings do not count', async () => {
    const app = await echoApp();
    const res = await post(app, JSON.stringify({ text: '['.repeat(10_000) + '"\\' }));
    expect(res.statusCode).toBe(200);
  });
});
