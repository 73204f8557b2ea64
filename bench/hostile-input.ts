/**
 * Hostile-input benchmark: the longest event-loop stall each class of hostile input causes in
 * the gateway, at the documented limits (request JSON depth 64, 100,000 members of which at most
 * 25,000 object keys, 10 MiB bodies and responses, 1 MiB stream events, 8,192-character URLs).
 *
 *   pnpm bench hostile-input
 *
 * One all-in-one gateway runs in this process with a mock provider; requests are prepared
 * before the clock starts, so the stall measured by `monitorEventLoopDelay` is the gateway's
 * work on one input (client-side work is a buffer copy). Every stall blocks every tenant of
 * the process, health checks included, so the target is absolute: ≤ 50 ms per class. The
 * benign call measured in the same run is printed alongside for scale (these machines are
 * noisy; compare within one run).
 */
import { Worker } from 'node:worker_threads';
import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { request } from 'undici';
import { loadConfig } from '@vlt/config';
import { startAllInOne } from '@vlt/all-in-one';

const TARGET_MS = 50;

/** The mock provider (CommonJS, evaluated in a worker): answers every request with the answer set last. */
const PROVIDER_THREAD = `
const https = require('node:https');
const { parentPort, workerData } = require('node:worker_threads');
let answer = { contentType: 'application/json', body: '{"accountId":"a1"}' };
parentPort.on('message', (a) => { answer = { contentType: a.contentType, body: Buffer.from(a.body) }; parentPort.postMessage('ok'); });
const server = https.createServer({ key: workerData.key, cert: workerData.cert }, (req, res) => {
  req.resume();
  req.on('end', () => {
    const out = req.url === '/rest/api/3/myself' ? { contentType: 'application/json', body: '{"accountId":"a1"}' } : answer;
    res.writeHead(200, { 'content-type': out.contentType });
    res.end(out.body);
  });
});
server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
`;
const RUNS = 5;

type ProviderBody = () => { contentType: string; body: Buffer | string };

interface InputClass {
  name: string;
  /**
   * Which binding sends it: field rules (request body rule + response filters), none, or every
   * write held for a reviewer (the approval's fingerprint and copy of the body).
   */
  binding: 'rules' | 'plain' | 'approval';
  method?: string;
  url?: string;
  /** JSON text of the `body` field, or absent. */
  body?: string;
  mode?: 'stream' | 'download';
  provider?: ProviderBody;
}

const record = { id: 'c-1', ssn: '078-05-1120', email: 'alice@example.com', note: 'visible' };
const small: ProviderBody = () => ({ contentType: 'application/json', body: JSON.stringify(record) });

function wideObject(n: number, duplicateAtEnd = false): string {
  const parts = Array.from({ length: n }, (_, i) => `"k${i}":${i}`);
  if (duplicateAtEnd) parts.push('"k0":0');
  return `{${parts.join(',')}}`;
}

function wideArray(n: number): string {
  return `[${Array.from({ length: n }, (_, i) => i).join(',')}]`;
}

function classes(creds: { apiToken: string }): InputClass[] {
  const reflected = Buffer.alloc(10 * 1024 * 1024 - 1024, `x ${creds.apiToken} `);
  return [
    { name: 'benign: small JSON in, small JSON out', binding: 'rules', body: '{"fields":{"summary":"hi"}}' },
    { name: 'request: 24,990 object keys (under the limit)', binding: 'rules', body: wideObject(24_990) },
    { name: 'request: 25,001 object keys (refused)', binding: 'rules', body: wideObject(25_001) },
    { name: 'request: 24,990 keys, duplicate last', binding: 'rules', body: wideObject(24_990, true) },
    { name: 'request: 99,990 array elements (under the limit)', binding: 'rules', body: wideArray(99_990) },
    { name: 'request: 100,001 array elements (refused)', binding: 'rules', body: wideArray(100_001) },
    {
      name: 'request: depth 64 (at the limit)',
      binding: 'rules',
      body: '{"a":'.repeat(63) + '0' + '}'.repeat(63),
    },
    {
      name: 'request: depth 1,000,000 (refused)',
      binding: 'rules',
      body: '['.repeat(1_000_000) + ']'.repeat(1_000_000),
    },
    {
      name: 'request: 9 MiB string value',
      binding: 'rules',
      body: JSON.stringify({ fields: { summary: 'é'.repeat(4_500_000) } }),
    },
    {
      name: 'request: 9 MiB string value, held for approval',
      binding: 'approval',
      body: JSON.stringify({ fields: { summary: 'é'.repeat(4_500_000) } }),
    },
    {
      // A mail to 10,000 recipients: every string short, each key and value a piece of its own.
      name: 'request: 8 MiB of 10,000 short strings, held for approval',
      binding: 'approval',
      body: JSON.stringify({
        fields: {
          to: Array.from({ length: 10_000 }, () => ({ address: `${'x'.repeat(800)}@corp.example` })),
        },
      }),
    },
    {
      name: 'request: 8,192-character URL, 2,000 segments',
      binding: 'rules',
      method: 'GET',
      url: `/rest/api/3/${'a/'.repeat(2_000)}`.slice(0, 8_000),
    },
    {
      name: 'response: 100,000-key JSON under field rules',
      binding: 'rules',
      method: 'GET',
      provider: () => ({ contentType: 'application/json', body: wideObject(100_000) }),
    },
    {
      name: 'response: 1,000,000-deep JSON (relayed as text)',
      binding: 'rules',
      method: 'GET',
      provider: () => ({
        contentType: 'application/json',
        body: '['.repeat(1_000_000) + ']'.repeat(1_000_000),
      }),
    },
    {
      name: 'response: 10 MiB NDJSON streamed under field rules',
      binding: 'rules',
      method: 'GET',
      mode: 'stream',
      provider: () => ({
        contentType: 'application/x-ndjson',
        body: `${JSON.stringify(record)}\n`.repeat(Math.floor((10 * 1024 * 1024 - 1024) / 80)),
      }),
    },
    {
      name: 'response: SSE, one 1 MiB event (at the limit)',
      binding: 'rules',
      method: 'GET',
      mode: 'stream',
      provider: () => ({
        contentType: 'text/event-stream',
        body: `data: ${JSON.stringify({ text: 'a '.repeat(500_000), email: 'alice@example.com' })}\n\n`,
      }),
    },
    {
      name: 'response: 10 MiB reflecting the credential, downloaded',
      binding: 'plain',
      method: 'GET',
      mode: 'download',
      provider: () => ({ contentType: 'application/octet-stream', body: reflected }),
    },
  ];
}

async function main(): Promise<void> {
  const watchdog = setTimeout(() => {
    console.error('hostile-input bench exceeded 240 s; stopping');
    process.exit(2);
  }, 240_000);
  watchdog.unref();

  const { createTestPki } = await import('@vlt/test-support/test-pki.js');
  const api = await import('@vlt/test-support/api-client.js');

  const creds = { email: 'bot@tracker.test', apiToken: `tok-${randomBytes(12).toString('hex')}` };
  const pki = await createTestPki();
  // The provider runs on its own thread: building and encrypting its 10 MiB answers must not
  // count as the gateway's stall.
  const provider = new Worker(PROVIDER_THREAD, { eval: true, workerData: { key: pki.key, cert: pki.cert } });
  const providerPort = await new Promise<number>((resolve) => provider.once('message', resolve));
  const setAnswer = (a: { contentType: string; body: Buffer | string }) =>
    new Promise<void>((resolve) => {
      provider.once('message', () => resolve());
      provider.postMessage(a);
    });
  const site = `https://127.0.0.1:${providerPort}`;
  // The all-in-one on its embedded database and bus, as `make start` runs it.
  const dataDir = mkdtempSync(path.join(tmpdir(), 'vlt-bench-hostile-'));
  const port = await (await import('@vlt/test-support/processes.js')).freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const config = loadConfig('all-in-one', {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: String(port),
    PUBLIC_BASE_URL: baseUrl,
    VLT_DATA_DIR: dataDir,
    VLT_MASTER_KEY: randomBytes(32).toString('base64'),
    VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32',
  });
  const running = await startAllInOne(config, pino({ level: 'warn' }), { upstreamCa: [pki.caPem] });
  await running.app.listen({ port, host: '127.0.0.1' });
  const gw = { baseUrl };
  try {
    const { user } = await api.signUp(
      gw.baseUrl,
      `bench-${randomBytes(4).toString('hex')}@gw.test`,
      'correct horse battery',
    );
    const admin = api.bearerAdmin(gw.baseUrl, (await api.apiJwt(gw.baseUrl, user.session)).token);
    const connectionId = (await api.createIssueTrackerConnection(admin, { siteUrl: site, ...creds }))
      .connection.id;
    const tokens: Record<InputClass['binding'], string> = { rules: '', plain: '', approval: '' };
    for (const binding of ['rules', 'plain', 'approval'] as const) {
      const { agent, token } = await api.enrolAgent(admin, gw.baseUrl, `bench-${binding}`);
      const { policy } = await api.createPolicy(admin, agent.id, connectionId, {
        ...api.READ_WRITE_UNATTENDED,
        ...(binding === 'approval' && { stepUpApproval: 'always' as const }),
      });
      api.expectStatus(
        await api.putAllowlists(admin, policy.id, [
          { baseUrl: site, methods: ['GET', 'POST'], pathPatterns: ['/rest/api/3/*'] },
        ]),
        200,
      );
      const rules =
        binding !== 'rules'
          ? { request: [], response: [] }
          : {
              request: [
                { label: 'no ssn', match: { body: [{ path: 'fields.ssn', op: 'exists' }] }, action: 'deny' },
              ],
              response: [
                { label: 'filter', match: {}, filter: { denyFields: ['ssn'], redact: [{ type: 'email' }] } },
              ],
            };
      api.expectStatus(
        await api.http('PUT', `${gw.baseUrl}/v1/policies/${policy.id}/rules`, {
          headers: admin.headers,
          json: { rules },
        }),
        200,
      );
      tokens[binding] = token;
    }

    const rows: Array<{ name: string; status: string; maxMs: number; p99Ms: number }> = [];
    // HOSTILE_ONLY=<text> runs the benign baseline and the classes whose name contains it.
    const only = process.env.HOSTILE_ONLY;
    const selected = classes(creds).filter((c, i) => i === 0 || !only || c.name.includes(only));
    for (const c of selected) {
      await setAnswer((c.provider ?? small)());
      const envelope = Buffer.from(
        `{"model":"B","connectionId":"${connectionId}","method":"${c.method ?? 'POST'}",` +
          `"url":${JSON.stringify(site + (c.url ?? '/rest/api/3/issue'))}` +
          (c.body === undefined ? '' : `,"body":${c.body}`) +
          (c.mode ? `,"${c.mode}":true` : '') +
          '}',
      );
      const once = async (): Promise<number> => {
        const res = await request(`${gw.baseUrl}/v1/vault/execute`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tokens[c.binding]}`, 'content-type': 'application/json' },
          body: envelope,
        });
        await res.body.dump({ limit: Number.MAX_SAFE_INTEGER });
        return res.statusCode;
      };
      await once(); // warm-up: JIT, connection pools, caches
      const h = monitorEventLoopDelay({ resolution: 1 });
      const statuses = new Set<number>();
      h.enable();
      for (let i = 0; i < RUNS; i++) statuses.add(await once());
      h.disable();
      rows.push({
        name: c.name,
        status: [...statuses].join('/'),
        maxMs: h.max / 1e6,
        p99Ms: h.percentile(99) / 1e6,
      });
    }

    const benign = rows[0]!;
    console.log(
      `\nlongest event-loop stall per input class, ${RUNS} calls each (target ≤ ${TARGET_MS} ms)\n`,
    );
    console.log(
      `${'input class'.padEnd(56)} ${'status'.padStart(7)} ${'max ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'× benign'.padStart(9)}  verdict`,
    );
    for (const r of rows) {
      console.log(
        `${r.name.padEnd(56)} ${r.status.padStart(7)} ${r.maxMs.toFixed(1).padStart(8)} ${r.p99Ms
          .toFixed(1)
          .padStart(
            8,
          )} ${(r.maxMs / benign.maxMs).toFixed(1).padStart(9)}  ${r.maxMs <= TARGET_MS ? 'meets target' : 'ABOVE TARGET'}`,
      );
    }
  } finally {
    await running.close();
    rmSync(dataDir, { recursive: true, force: true });
    await provider.terminate();
    await pki.dispose();
  }
}

await main();
