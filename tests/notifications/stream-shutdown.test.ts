/**
 * Shutting the gateway down while members have the notification stream open (ADR 0063): the
 * streams are ended cleanly as close starts, so close does not sit out the drain deadline and
 * the browser sees the stream end rather than a cut connection.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { apiJwt, signUp } from '../support/api-client.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';

let gw: InProcessGateway | undefined;
let jwt: string;

beforeAll(async () => {
  gw = await startInProcessGateway();
  const { user } = await signUp(
    gw.baseUrl,
    `stream-${randomBytes(4).toString('hex')}@close.test`,
    'correct horse battery',
  );
  jwt = (await apiJwt(gw.baseUrl, user.session)).token;
});

afterAll(async () => {
  await gw?.close();
});

it('ends open notification streams when the gateway closes, and closes well before the drain deadline', async () => {
  const streams = await Promise.all(
    [1, 2].map(async () => {
      const res = await fetch(
        `${gw!.baseUrl}/v1/notifications/stream?access_token=${encodeURIComponent(jwt)}`,
      );
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let text = '';
      const ended = (async () => {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return 'ended';
          text += Buffer.from(value).toString('utf8');
        }
      })().catch((err: Error) => `cut: ${err.message}`);
      while (!text.includes('event: connected')) await new Promise((r) => setTimeout(r, 10));
      return { ended }; // wrapped: an async function returning the promise itself would wait for it
    }),
  );
  const started = Date.now();
  const closing = gw!.close();
  gw = undefined;
  // The drain deadline is 10 s: a close that had to wait for it took the streams down by force.
  // 8 s leaves room for a loaded machine and still tells the two apart.
  const outcome = await Promise.race([
    closing.then(() => 'closed'),
    new Promise((r) => setTimeout(() => r('still open after 8 s'), 8_000).unref()),
  ]);
  expect(outcome).toBe('closed');
  expect(Date.now() - started).toBeLessThan(8_000);
  expect(await Promise.all(streams.map((s) => s.ended))).toEqual(['ended', 'ended']);
});
