/**
 * Regression (security review, class 12): bodies nested 100k+ levels deep answered 500 (a stack
 * overflow after parsing). Every service's JSON parser now bounds depth and width first.
 */
import { describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import pino from 'pino';
import { request } from 'undici';
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
    // Object keys have their own, lower bound: they are what makes parsing slow.
    const keys = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":0`).join(',')}}`;
    expect((await post(app, keys(25_000))).statusCode).toBe(200);
    const tooMany = await post(app, keys(25_001));
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().error).toMatch(/more than 25000 object keys/);
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

describe('JSON request bodies are decoded as they arrive', () => {
  async function listening(bodyLimit?: number) {
    const app = await createServiceApp({
      title: 't',
      logger: pino({ level: 'silent' }),
      trustProxy: [],
      ...(bodyLimit ? { bodyLimit } : {}),
    });
    app.post('/echo', async (req) => req.body);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    return { app, url: `http://127.0.0.1:${port}/echo` };
  }

  it('keeps a multi-byte character split across two chunks intact', async () => {
    const { app, url } = await listening();
    try {
      const bytes = Buffer.from(JSON.stringify({ text: 'é€😀 ok' }));
      const cut = bytes.indexOf(Buffer.from('€')) + 1; // inside the three bytes of €
      const res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: Readable.from([bytes.subarray(0, cut), bytes.subarray(cut)]),
      });
      expect(res.statusCode).toBe(200);
      expect(await res.body.json()).toEqual({ text: 'é€😀 ok' });
    } finally {
      await app.close();
    }
  });

  it('answers 413 past the body limit (streamed, no content-length) and 400 for a short body', async () => {
    const { app, url } = await listening(64);
    try {
      const big = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: Readable.from([Buffer.from('{"a":"'), Buffer.alloc(100, 'x'), Buffer.from('"}')]),
      });
      expect(big.statusCode).toBe(413);
      expect(typeof ((await big.body.json()) as { error: unknown }).error).toBe('string');

      const app2 = await echoApp();
      const short = await app2.inject({
        method: 'POST',
        url: '/echo',
        headers: { 'content-type': 'application/json', 'content-length': '50' },
        payload: '{"a":1}',
      });
      expect([400, 413]).toContain(short.statusCode);
      expect(short.statusCode).not.toBe(200);
    } finally {
      await app.close();
    }
  });
});
