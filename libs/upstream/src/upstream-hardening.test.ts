/**
 * What a hostile or careless provider can do to a call: drip bytes forever, compress when asked
 * not to, reflect the injected credential, set cookies. Each is a regression test for a class
 * the gateway's security review found.
 */
import https from 'node:https';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestPki, type TestPki } from '@vlt/test-support/test-pki.js';
import { compileSecretForms } from './secret-scrubber.js';
import {
  createUpstreamClient,
  UpstreamError,
  type UpstreamClient,
  type UpstreamRequest,
} from './upstream-client.js';

const SECRET = 'tok-9a8b7c6d5e4f30112233445566';
let pki: TestPki;
let server: https.Server;
let base: string;
const acceptEncodings: Array<string | undefined> = [];

beforeAll(async () => {
  pki = await createTestPki();
  server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    acceptEncodings.push(req.headers['accept-encoding']);
    const url = req.url ?? '';
    if (url === '/drip') {
      // One byte every 40 ms, forever: never idle long enough for an idle timeout.
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => res.write('x'), 40);
      res.on('close', () => clearInterval(t));
      return;
    }
    if (url === '/silent-body') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('start');
      return; // then nothing
    }
    if (url === '/gzip') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      return res.end(zlib.gzipSync(JSON.stringify({ email: 'alice@example.com' })));
    }
    if (url === '/br') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'br' });
      return res.end(zlib.brotliCompressSync('brotli body'));
    }
    if (url === '/zstd') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'zstd' });
      return res.end('not really zstd');
    }
    if (url === '/reflect') {
      const auth = req.headers.authorization ?? '';
      res.writeHead(200, {
        'content-type': 'application/json',
        'x-echo-authorization': auth,
        'set-cookie': 'sid=1',
        'set-cookie2': 'sid2=1',
      });
      // Written a byte at a time so the secret straddles chunk boundaries.
      const body = JSON.stringify({ headers: { authorization: auth }, token: SECRET });
      let i = 0;
      const t = setInterval(() => {
        res.write(body.slice(i, i + 3));
        i += 3;
        if (i >= body.length) {
          clearInterval(t);
          res.end();
        }
      }, 1);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await pki.dispose();
});

function client(o: { deadlineMs?: number; streamDeadlineMs?: number; idleTimeoutMs?: number } = {}) {
  return createUpstreamClient({
    ssrfAllowCidrs: ['127.0.0.1/32'],
    timeoutMs: 5_000,
    extraCa: [pki.caPem],
    ...o,
  });
}

async function failure(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return err instanceof UpstreamError ? err.kind : `other: ${(err as Error).message}`;
  }
}

async function readAll(c: UpstreamClient, path: string, secrets?: UpstreamRequest['secrets']) {
  const res = await c.stream({
    url: new URL(`${base}${path}`),
    method: 'GET',
    headers: { authorization: `Bearer ${SECRET}` },
    ...(secrets && { secrets }),
  });
  const chunks: Buffer[] = [];
  for await (const chunk of res.body) chunks.push(chunk as Buffer);
  return { ...res, text: Buffer.concat(chunks).toString('utf8') };
}

describe('upstream deadlines', () => {
  it('regression: a provider dripping bytes cannot hold a buffered call past the total deadline', async () => {
    const c = client({ deadlineMs: 400, idleTimeoutMs: 5_000 });
    expect(await failure(c.request({ url: new URL(`${base}/drip`), method: 'GET', headers: {} }))).toBe(
      'timeout',
    );
    await c.close();
  });

  it('regression: a provider dripping bytes cannot hold a stream past the stream deadline', async () => {
    const c = client({ streamDeadlineMs: 400, idleTimeoutMs: 5_000 });
    expect(await failure(readAll(c, '/drip'))).toBe('timeout');
    await c.close();
  });

  it('regression: a body that goes silent fails with the idle timeout', async () => {
    const c = client({ idleTimeoutMs: 300, deadlineMs: 20_000, streamDeadlineMs: 20_000 });
    expect(
      await failure(c.request({ url: new URL(`${base}/silent-body`), method: 'GET', headers: {} })),
    ).toBe('timeout');
    await c.close();
  });
});

describe('upstream content negotiation', () => {
  it('regression: asks for identity whatever the caller passes, and decodes gzip and br anyway', async () => {
    const c = client();
    const gz = await c.request({
      url: new URL(`${base}/gzip`),
      method: 'GET',
      headers: { 'accept-encoding': 'gzip' },
    });
    expect(acceptEncodings.at(-1)).toBe('identity');
    expect(JSON.parse(gz.body.toString())).toEqual({ email: 'alice@example.com' });
    expect(gz.headers['content-encoding']).toBeUndefined();
    const streamed = await readAll(c, '/gzip');
    expect(JSON.parse(streamed.text)).toEqual({ email: 'alice@example.com' });
    expect(streamed.headers['content-encoding']).toBeUndefined();
    expect((await readAll(c, '/br')).text).toBe('brotli body');
    await c.close();
  });

  it('regression: a coding the gateway cannot read is a bad response, never passed on', async () => {
    const c = client();
    expect(await failure(c.request({ url: new URL(`${base}/zstd`), method: 'GET', headers: {} }))).toBe(
      'bad_response',
    );
    expect(await failure(readAll(c, '/zstd'))).toBe('bad_response');
    await c.close();
  });
});

describe('upstream credential scrubbing', () => {
  it('regression: a reflected credential is scrubbed from headers and body, buffered and streamed', async () => {
    const c = client();
    const buffered = await c.request({
      url: new URL(`${base}/reflect`),
      method: 'GET',
      headers: { authorization: `Bearer ${SECRET}` },
      secrets: [SECRET],
    });
    const streamed = await readAll(c, '/reflect', [SECRET]);
    for (const res of [
      { headers: buffered.headers, text: buffered.body.toString() },
      { headers: streamed.headers, text: streamed.text },
    ]) {
      expect(JSON.stringify(res.headers)).not.toContain(SECRET);
      expect(res.text).not.toContain(SECRET);
      expect(JSON.parse(res.text)).toEqual({
        headers: { authorization: 'Bearer [REDACTED]' },
        token: '[REDACTED]',
      });
      // Cookies the provider sets for the gateway's credential never reach the agent.
      expect(res.headers['set-cookie']).toBeUndefined();
      expect(res.headers['set-cookie2']).toBeUndefined();
    }
    await c.close();
  });

  it('regression: one client scrubs each call with its own credential', async () => {
    const c = client();
    // A call made with another connection's credential first: its forms must not stand in for
    // the next call's.
    const other = await readAll(c, '/reflect', ['tok_another_connection_0000']);
    expect(other.text).toContain(SECRET);
    for (let i = 0; i < 2; i++) {
      const res = await readAll(c, '/reflect', [SECRET]);
      expect(res.text).not.toContain(SECRET);
      expect(JSON.stringify(res.headers)).not.toContain(SECRET);
    }
    await c.close();
  });

  it('regression: compiled forms are used as given, and the client keeps none after the call', async () => {
    const c = client();
    // In a function, so no reference to the forms stays on this frame.
    const call = async () => {
      const forms = compileSecretForms([SECRET]);
      const res = await readAll(c, '/reflect', forms);
      return { text: res.text, headers: res.headers, forms: new WeakRef(forms) };
    };
    const res = await call();
    expect(res.text).not.toContain(SECRET);
    expect(JSON.parse(res.text)).toMatchObject({ token: '[REDACTED]' });
    expect(JSON.stringify(res.headers)).not.toContain(SECRET);
    // The forms are the secret in other spellings: a revoked credential's must not stay here.
    await new Promise((r) => setTimeout(r, 20));
    v8.setFlagsFromString('--expose-gc');
    (vm.runInNewContext('gc') as () => void)();
    expect(res.forms.deref()).toBeUndefined();
    await c.close();
  });
});
