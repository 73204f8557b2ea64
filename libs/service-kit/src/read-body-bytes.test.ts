import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import pino from 'pino';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceApp } from './create-app.js';
import { readBodyBytes } from './read-body-bytes.js';

const LIMIT = 1024 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('readBodyBytes', () => {
  let app: Awaited<ReturnType<typeof createServiceApp>>;
  let url: string;

  beforeAll(async () => {
    app = await createServiceApp({ title: 't', logger: pino({ level: 'silent' }), trustProxy: [] });
    app.addContentTypeParser('application/octet-stream', (req, payload, done) =>
      readBodyBytes(req, payload, LIMIT, done),
    );
    app.post('/bytes', async (req) => {
      const body = req.body as Buffer;
      return { bytes: body.length, sha256: sha256(body) };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/bytes`;
  });
  afterAll(async () => {
    await app?.close();
  });

  const post = (body: Buffer | Readable, headers: Record<string, string> = {}) =>
    request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', ...headers },
      body,
    });

  it('a body of declared length arrives byte for byte, however it was chunked', async () => {
    const bytes = randomBytes(LIMIT);
    const chunks = [bytes.subarray(0, 1), bytes.subarray(1, 70_001), bytes.subarray(70_001)];
    const res = await post(Readable.from(chunks), { 'content-length': String(bytes.length) });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({ bytes: bytes.length, sha256: sha256(bytes) });
  });

  it('a body without a declared length (chunked) arrives byte for byte', async () => {
    const bytes = randomBytes(300_000);
    const res = await post(Readable.from([bytes.subarray(0, 100_000), bytes.subarray(100_000)]));
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({ bytes: bytes.length, sha256: sha256(bytes) });
  });

  it('an empty body of declared length 0 is an empty buffer', async () => {
    const res = await post(Buffer.alloc(0));
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toMatchObject({ bytes: 0 });
  });

  it('413 past the limit, declared or streamed, with an error string', async () => {
    const declared = await post(Buffer.alloc(LIMIT + 1));
    expect(declared.statusCode).toBe(413);
    expect(typeof ((await declared.body.json()) as { error: unknown }).error).toBe('string');
    const streamed = await post(Readable.from([Buffer.alloc(LIMIT), Buffer.alloc(1)]));
    expect(streamed.statusCode).toBe(413);
    await streamed.body.dump();
  });

  // A buffer allocated for the declared length and filled in part must never be handed on:
  // its unfilled end holds whatever memory was there before.
  it('a body shorter than it declared is refused with 400, never handed on', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/bytes',
      headers: { 'content-type': 'application/octet-stream', 'content-length': '50' },
      payload: Buffer.from('seven b'),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).not.toHaveProperty('sha256');
  });
});
