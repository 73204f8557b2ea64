/**
 * End-to-end streaming benchmark: `pnpm tsx bench/streaming.ts` (bounded to about 150 s).
 *
 * What an agent consuming a stream through the gateway sees: `POST /v1/vault/execute` with
 * `stream: true` (ADR 0015) on the real all-in-one gateway, which calls a local HTTPS upstream
 * (its own process, this file with `--role=upstream`, serving as fast as it can, no pacing) and
 * pipes the body back through the policy's response filter. Four bodies:
 *   sse-1ev   – an LLM-style `text/event-stream`: 4000 small chat-completion chunks, one event
 *               per `res.write` as providers send them, an e-mail every 50th event and a phone
 *               number every 70th, then `data: [DONE]`;
 *   sse-clean – the same stream with no PII at all;
 *   sse-16k   – the sse-1ev bytes in 16 KiB writes;
 *   text-16k  – ~4 MB of `text/plain; charset=utf-8` in 16 KiB writes, every line with an
 *               e-mail and a phone number (PII-dense).
 * BENCH_SCENARIOS=<key>,… runs only those bodies (to profile one shape). Four modes:
 *   bare              – a bare `node:http` proxy (this file, `--role=bare`) that adds the
 *                       credential and pipes the upstream's body: the baseline;
 *   no rules          – the gateway, an agent whose policy has no response rules;
 *   redaction         – the gateway, one response rule redacting email, phone and credit_card;
 *   redaction+custom  – the same plus a custom `sk-…` pattern (which keeps the filter off its
 *                       built-in-only fast path).
 * Measured in interleaved rounds (bare, no rules, redaction, redaction+custom, bare, …) at
 * concurrency 1 and 4 so drift and noise hit every mode alike; reports MB/s (bytes delivered to
 * the client), responses/s, each gateway mode ÷ bare (responses/s: the same upstream bytes per
 * response, so it is the input-throughput ratio) against the performance issue's targets —
 * no rules ≥ 0.9 ×; built-in redaction ≥ 0.9 × on the stream with no PII and ≥ 0.6 × on the
 * PII-dense ones; a custom pattern ≥ 0.5 × — and the CPU each process burns per mode
 * (/proc/<pid>/stat).
 *
 * bench/policy-engine.ts measures the filter in isolation against an in-memory identity
 * transform; this one adds what the agent really pays for: TLS to the upstream, HTTP parsing,
 * the gateway's stream pipeline, audit writes and the HTTP response to the agent. Only ratios
 * measured in the same run mean anything; this prints, it never fails on numbers.
 */
import { randomBytes } from 'node:crypto';
import http, { type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { openBenchHarness, procCpuSeconds } from './harness.js';
import { llmEvents, rechunk, textChunks } from './workloads.js';

const THIS_FILE = fileURLToPath(import.meta.url);
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 600);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const CONCURRENCY = [1, 4];
const HARD_LIMIT_MS = 150_000;
/** No new round starts when it could not finish before this; the report still prints. */
const SOFT_LIMIT_MS = 140_000;
/** Lets the previous mode's asynchronous work (audit writes) settle before the next one. */
const SETTLE_MS = 100;
/** Each gateway mode ÷ bare, per scenario (the performance issue's streaming targets). */
const TARGETS: Record<Exclude<Mode, 'bare'>, (s: Scenario) => number> = {
  'no rules': () => 0.9,
  redaction: (s) => (s.pii ? 0.6 : 0.9),
  'redaction+custom': () => 0.5,
};
const ACCOUNT = { email: 'bench@tracker.test', apiToken: `itk_${randomBytes(12).toString('hex')}` };

// ---------------------------------------------------------------------------------------------
// Upstream bodies (bench/workloads.ts, built the same way in the upstream role and, for expected
// sizes, in main)

interface Scenario {
  key: string;
  name: string;
  path: string;
  contentType: string;
  /** Whether the body holds PII (the redaction target and the sanity checks differ). */
  pii: boolean;
  build(): Buffer[];
}

const ALL_SCENARIOS: Scenario[] = [
  {
    key: 'sse-1ev',
    name: 'SSE, 1 event per write (LLM stream)',
    path: '/rest/api/3/stream/llm-events',
    contentType: 'text/event-stream',
    pii: true,
    build: () => llmEvents(4000),
  },
  {
    key: 'sse-clean',
    name: 'SSE, 1 event per write, no PII',
    path: '/rest/api/3/stream/llm-events-clean',
    contentType: 'text/event-stream',
    pii: false,
    build: () => llmEvents(4000, { pii: false }),
  },
  {
    key: 'sse-16k',
    name: 'SSE, 16 KiB writes',
    path: '/rest/api/3/stream/llm-events-16k',
    contentType: 'text/event-stream',
    pii: true,
    build: () => rechunk(llmEvents(4000), 16384),
  },
  {
    key: 'text-16k',
    name: 'text/plain, 16 KiB writes',
    path: '/rest/api/3/stream/text',
    contentType: 'text/plain; charset=utf-8',
    pii: true,
    build: () => textChunks(4 << 20),
  },
];

/** BENCH_SCENARIOS=sse-16k,text-16k measures only those (to profile one shape). */
const SCENARIOS = ((only) => (only ? ALL_SCENARIOS.filter((s) => only.includes(s.key)) : ALL_SCENARIOS))(
  process.env.BENCH_SCENARIOS?.split(','),
);

// ---------------------------------------------------------------------------------------------
// Child role: the upstream

async function send(res: ServerResponse, contentType: string, chunks: Buffer[]) {
  res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache' });
  for (const c of chunks) {
    if (res.destroyed) return;
    // As fast as the socket takes it: one write per chunk, waiting only when the buffer is full.
    if (!res.write(c)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
  res.end();
}

async function runUpstream() {
  const expected = `Basic ${Buffer.from(`${ACCOUNT.email}:${process.env.BENCH_API_TOKEN!}`).toString('base64')}`;
  const bodies = new Map(SCENARIOS.map((s) => [s.path, { contentType: s.contentType, chunks: s.build() }]));
  const server = https.createServer(
    { key: process.env.BENCH_TLS_KEY!, cert: process.env.BENCH_TLS_CERT! },
    (req, res) => {
      if (req.headers.authorization !== expected) return void res.writeHead(401).end();
      // Creating the connection checks the credentials here.
      if (req.url === '/rest/api/3/myself') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ accountId: 'bench', displayName: 'Bench' }));
      }
      const body = req.method === 'GET' ? bodies.get(req.url ?? '') : undefined;
      if (!body) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end('{"errorMessages":["not found"]}');
      }
      void send(res, body.contentType, body.chunks);
    },
  );
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));
}

// ---------------------------------------------------------------------------------------------
// Child role: the bare proxy (the baseline)

async function runBare() {
  const upstream = new URL(process.env.BENCH_UPSTREAM!);
  const auth = `Basic ${Buffer.from(`${ACCOUNT.email}:${process.env.BENCH_API_TOKEN!}`).toString('base64')}`;
  // Trusts the test CA through NODE_EXTRA_CA_CERTS, like the gateway.
  const agent = new https.Agent({ keepAlive: true, maxSockets: 64 });
  const server = http.createServer((req, res) => {
    const up = https.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: 'GET',
        path: req.url,
        headers: { authorization: auth },
        agent,
      },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, {
          'content-type': ur.headers['content-type'] ?? 'application/octet-stream',
        });
        ur.pipe(res);
      },
    );
    up.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    up.end();
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));
}

// ---------------------------------------------------------------------------------------------
// Load generation

const MODES = ['bare', 'no rules', 'redaction', 'redaction+custom'] as const;
type Mode = (typeof MODES)[number];

interface Sample {
  responses: number;
  bytes: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  /** CPU seconds burnt during this cell's rounds. */
  cpu: { proxy: number; upstream: number; client: number };
  /** responses/s of each round, for the per-round ratio spread. */
  roundRates: number[];
}

const newSample = (): Sample => ({
  responses: 0,
  bytes: 0,
  errors: 0,
  elapsedMs: 0,
  cpu: { proxy: 0, upstream: 0, client: 0 },
  roundRates: [],
});

async function main() {
  const started = Date.now();
  const h = await openBenchHarness('streaming', HARD_LIMIT_MS);
  const { pki, group, freePort, api, dataDir } = h;

  try {
    const upstream = await h.startRole(THIS_FILE, 'upstream', {
      BENCH_TLS_KEY: pki.key,
      BENCH_TLS_CERT: pki.cert,
      BENCH_API_TOKEN: ACCOUNT.apiToken,
    });
    const upstreamBase = `https://127.0.0.1:${upstream.port}`;
    const bare = await h.startRole(THIS_FILE, 'bare', {
      BENCH_UPSTREAM: upstreamBase,
      BENCH_API_TOKEN: ACCOUNT.apiToken,
      NODE_EXTRA_CA_CERTS: pki.caPath,
    });

    const port = await freePort();
    const publicBaseUrl = `http://127.0.0.1:${port}`;
    const aio = await group.start('all-in-one', {
      port,
      env: {
        HOST: '127.0.0.1',
        PUBLIC_BASE_URL: publicBaseUrl,
        VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32',
        NODE_EXTRA_CA_CERTS: pki.caPath,
        LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
        VLT_DATA_DIR: dataDir,
        VLT_MASTER_KEY: randomBytes(32).toString('base64'),
      },
    });
    const base = aio.baseUrl;

    // Set-up over the API: one connection, one agent + policy per mode.
    const { user } = await api.signUp(
      base,
      `bench-stream-${Date.now()}@e2e.test`,
      `pw-${randomBytes(8).toString('hex')}`,
    );
    const admin = api.bearerAdmin(base, (await api.apiJwt(base, user.session)).token);
    const conn = await api.createIssueTrackerConnection(admin, { siteUrl: upstreamBase, ...ACCOUNT });
    const connectionId = conn.connection.id;
    const pii = [{ type: 'email' }, { type: 'phone' }, { type: 'credit_card' }];
    type GatewayMode = Exclude<Mode, 'bare'>;
    const GATEWAY_MODES = MODES.filter((m): m is GatewayMode => m !== 'bare');
    const responseRules: Record<GatewayMode, unknown[]> = {
      'no rules': [],
      redaction: [{ label: 'pii', match: {}, filter: { redact: pii } }],
      'redaction+custom': [
        {
          label: 'pii',
          match: {},
          filter: {
            redact: [...pii, { type: 'custom', pattern: 'sk-[A-Za-z0-9]{20,}', replacement: '[KEY]' }],
          },
        },
      ],
    };
    const tokens = {} as Record<GatewayMode, string>;
    for (const mode of GATEWAY_MODES) {
      const { agent, token } = await api.enrolAgent(
        admin,
        publicBaseUrl,
        `bench-stream-${mode.replace(/\W+/g, '-')}`,
      );
      tokens[mode] = token;
      const policyId = (await api.createPolicy(admin, agent.id, connectionId)).policy.id;
      api.expectStatus(
        await api.putAllowlists(admin, policyId, [
          { baseUrl: upstreamBase, methods: ['GET'], pathPatterns: SCENARIOS.map((s) => s.path) },
        ]),
        200,
      );
      if (responseRules[mode].length) {
        api.expectStatus(
          await api.http('PUT', `${base}/v1/policies/${policyId}/rules`, {
            headers: admin.headers,
            json: { rules: { request: [], response: responseRules[mode] } },
          }),
          200,
        );
      }
    }
    const setupMs = Date.now() - started;

    const upstreamBytes = new Map(
      SCENARIOS.map((s) => [s.key, s.build().reduce((n, c) => n + c.length, 0)] as const),
    );
    const pool = new Pool(base, { connections: Math.max(...CONCURRENCY), keepAliveTimeout: 30_000 });
    const barePool = new Pool(`http://127.0.0.1:${bare.port}`, {
      connections: Math.max(...CONCURRENCY),
      keepAliveTimeout: 30_000,
    });
    h.onClose(() => Promise.all([pool.close(), barePool.close()]).then(() => undefined));
    const requestBodies = new Map(
      SCENARIOS.map((s) => [
        s.key,
        JSON.stringify({
          model: 'B',
          connectionId,
          method: 'GET',
          url: `${upstreamBase}${s.path}`,
          stream: true,
        }),
      ]),
    );

    /** One streamed call; `onChunk` sees every chunk the gateway delivered. */
    const call = async (mode: Mode, s: Scenario, onChunk: (c: Buffer) => void) => {
      const res =
        mode === 'bare'
          ? await barePool.request({ method: 'GET', path: s.path })
          : await pool.request({
              method: 'POST',
              path: '/v1/vault/execute',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens[mode]}` },
              body: requestBodies.get(s.key)!,
            });
      const ct = String(res.headers['content-type'] ?? '');
      // A failed provider call comes back as a JSON envelope (or an error), not as the stream.
      if (res.statusCode !== 200 || !ct.startsWith(s.contentType.split(';')[0]!)) {
        const text = await res.body.text();
        throw new Error(`${mode} ${s.key}: HTTP ${res.statusCode} (${ct}) ${text.slice(0, 300)}`);
      }
      for await (const chunk of res.body) onChunk(chunk as Buffer);
    };

    // Sanity, once per scenario and mode, before anything is measured.
    for (const s of SCENARIOS) {
      for (const mode of MODES) {
        const parts: Buffer[] = [];
        await call(mode, s, (c) => parts.push(c));
        const text = Buffer.concat(parts).toString('utf8');
        const where = `${mode} on ${s.key}`;
        if (mode === 'bare' || mode === 'no rules') {
          if (s.pii && !text.includes('jane.doe@example.com'))
            throw new Error(`sanity: ${where} lacks the e-mail the upstream sent`);
          const bytes = Buffer.byteLength(text);
          if (bytes !== upstreamBytes.get(s.key))
            console.log(
              `warning: ${where} delivered ${bytes} bytes, upstream sent ${upstreamBytes.get(s.key)}`,
            );
        } else if (s.pii) {
          if (text.includes('jane.doe@example.com') || text.includes('@example.com'))
            throw new Error(`sanity: ${where} still contains the e-mail address`);
          if (!text.includes('[REDACTED_EMAIL]')) throw new Error(`sanity: ${where} lacks [REDACTED_EMAIL]`);
          if (!text.includes('[REDACTED_PHONE]')) console.log(`warning: ${where} shows no [REDACTED_PHONE]`);
        } else if (text.includes('[REDACTED')) {
          throw new Error(`sanity: ${where} redacted something in a stream with no PII`);
        }
        if (s.contentType === 'text/event-stream' && !text.endsWith('data: [DONE]\n\n'))
          throw new Error(`sanity: ${where} does not end with data: [DONE]`);
      }
    }

    const round = async (mode: Mode, s: Scenario, concurrency: number, ms: number, sample: Sample) => {
      const pids = { proxy: mode === 'bare' ? bare.child.pid! : aio.pid, upstream: upstream.child.pid };
      const [g0, u0] = await Promise.all([procCpuSeconds(pids.proxy), procCpuSeconds(pids.upstream)]);
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const until = t0 + ms;
      let responses = 0;
      const worker = async () => {
        while (performance.now() < until) {
          let bytes = 0;
          try {
            await call(mode, s, (c) => {
              bytes += c.length;
            });
            responses++;
            sample.bytes += bytes;
          } catch (err) {
            sample.errors++;
            sample.firstError ??= (err as Error).message;
          }
        }
      };
      await Promise.all(Array.from({ length: concurrency }, worker));
      const elapsed = performance.now() - t0;
      const c1 = process.cpuUsage(c0);
      const [g1, u1] = await Promise.all([procCpuSeconds(pids.proxy), procCpuSeconds(pids.upstream)]);
      sample.responses += responses;
      sample.elapsedMs += elapsed;
      sample.roundRates.push(responses / (elapsed / 1000));
      sample.cpu.proxy += g1 - g0;
      sample.cpu.upstream += u1 - u0;
      sample.cpu.client += (c1.user + c1.system) / 1e6;
    };

    // Warm-up (JIT, connections, caches); not recorded.
    for (const s of SCENARIOS) for (const mode of MODES) await round(mode, s, 4, 250, newSample());

    // Interleaved: every round visits each concurrency, scenario and mode in turn, so a run cut
    // short by the time budget has fewer rounds everywhere instead of missing whole cells.
    const results = new Map<string, Sample>();
    const cell = (mode: Mode, s: Scenario, c: number) => `${mode}|${s.key}|${c}`;
    const perBlockMs = SCENARIOS.length * MODES.length * (ROUND_MS + SETTLE_MS + 150);
    let rounds = 0;
    for (let r = 0; r < ROUNDS; r++) {
      if (Date.now() - started + CONCURRENCY.length * perBlockMs > SOFT_LIMIT_MS) break;
      for (const concurrency of CONCURRENCY) {
        for (const s of SCENARIOS) {
          for (const mode of MODES) {
            const key = cell(mode, s, concurrency);
            const sample = results.get(key) ?? newSample();
            results.set(key, sample);
            await round(mode, s, concurrency, ROUND_MS, sample);
            await new Promise((res) => setTimeout(res, SETTLE_MS));
          }
        }
      }
      rounds++;
    }

    // Report
    const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-');
    const pct = (cpuSeconds: number, s: Sample) => fmt((100 * cpuSeconds) / (s.elapsedMs / 1000), 0);
    console.log(
      `\nStreaming through the gateway (all-in-one), stream: true: ${rounds} interleaved rounds of ${ROUND_MS} ms per scenario, mode and concurrency` +
        `${rounds < ROUNDS ? ` (cut from ${ROUNDS} by the time budget)` : ''}; setup ${(setupMs / 1000).toFixed(1)} s; node ${process.version}; ${availableParallelism()} CPUs`,
    );
    for (const s of SCENARIOS) {
      console.log(
        `  ${s.key.padEnd(9)} ${s.name}: ${fmt(upstreamBytes.get(s.key)! / 1e6)} MB per response from upstream`,
      );
    }
    console.log(
      `\nscenario  mode              conc  responses   resp/s     MB/s  errors  proxy CPU ms/response   CPU %: proxy upstream client`,
    );
    for (const concurrency of CONCURRENCY) {
      for (const s of SCENARIOS) {
        for (const mode of MODES) {
          const x = results.get(cell(mode, s, concurrency));
          if (!x) continue;
          const secs = x.elapsedMs / 1000;
          console.log(
            `${s.key.padEnd(9)} ${mode.padEnd(17)} ${String(concurrency).padStart(4)} ${String(x.responses).padStart(10)} ${fmt(x.responses / secs, 1).padStart(8)} ${fmt(x.bytes / 1e6 / secs, 1).padStart(8)} ${String(x.errors).padStart(7)} ${fmt((1000 * x.cpu.proxy) / x.responses, 1).padStart(22)}   ${pct(x.cpu.proxy, x).padStart(11)} ${pct(x.cpu.upstream, x).padStart(8)} ${pct(x.cpu.client, x).padStart(6)}`,
          );
        }
      }
    }
    const errored = [...results].filter(([, x]) => x.firstError);
    for (const [key, x] of errored) console.log(`first error in ${key}: ${x.firstError}`);

    console.log(
      `\ngateway ÷ bare proxy throughput (responses/s, same upstream bytes; min–max over rounds), against each target:`,
    );
    let met = 0;
    let cells = 0;
    for (const concurrency of CONCURRENCY) {
      for (const s of SCENARIOS) {
        const b = results.get(cell('bare', s, concurrency));
        if (!b) continue;
        const parts = GATEWAY_MODES.map((mode) => {
          const x = results.get(cell(mode, s, concurrency))!;
          const ratio = x.responses / x.elapsedMs / (b.responses / b.elapsedMs);
          const perRound = x.roundRates.map((rate, i) => rate / b.roundRates[i]!).filter(Number.isFinite);
          const target = TARGETS[mode](s);
          const ok = ratio >= target;
          cells++;
          if (ok) met++;
          return `${mode} ${fmt(ratio)}× (${fmt(Math.min(...perRound))}–${fmt(Math.max(...perRound))}) ≥ ${target} ${ok ? 'met' : 'NOT met'}`;
        });
        console.log(`  ${s.key.padEnd(9)} c=${concurrency}  ${parts.join(' | ')}`);
      }
    }
    console.log(`${met} of ${cells} ratios meet their target`);
    console.log(`total ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await h.close();
  }
}

const role = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length) ?? 'main';
if (role === 'upstream') await runUpstream();
else if (role === 'bare') await runBare();
else {
  try {
    await main();
  } catch (err) {
    console.error(`streaming bench aborted: ${(err as Error).message}`);
    process.exitCode = 1;
  }
}
