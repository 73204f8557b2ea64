/**
 * LLM proxy benchmark (ADR 0043): `pnpm bench llm-proxy` (bounded to 150 s).
 *
 * `ALL /v1/vault/llm/llm_b/<rest>` on the real all-in-one gateway (its own process, this file
 * with `--role=gateway`: `startAllInOne` as tests/support/in-process-gateway.ts runs it, on a
 * throw-away PostgreSQL database when DATABASE_URL or 127.0.0.1:5432 answers, PGlite otherwise;
 * NATS when NATS_URL, or 127.0.0.1:4222 without it, answers; the in-process bus otherwise),
 * trusting the test CA through NODE_EXTRA_CA_CERTS as a deployment would (not the `upstreamCa`
 * test seam: its per-connection `ca` list of every root certificate builds a TLS context for
 * each new provider connection, tens of milliseconds of CPU that production does not pay). The
 * agent speaks plain HTTP with undici (not an SDK, so the client is not what is measured):
 * `POST …/v1/chat/completions` with `"stream": true`, OpenAI style.
 *
 * `VLT_LLM_B_API_URL` points at this file's `--role=upstream`, a small HTTPS provider on the
 * test PKI (the mock of tests/support/mock-llm.ts sleeps between writes, so it cannot stream
 * fast, and it keeps every request it sees): `GET /v1/models` (the key check when the
 * connection is made) and `POST /v1/chat/completions`, whose `model` picks the stream —
 *   bench-ttfb   the mock's default answer (a role chunk, five short deltas, stop, [DONE]); the
 *                first event leaves at once, the rest 2 ms later;
 *   bench-pii    ~3000 chat-completion chunks of 2–7 characters each, one SSE event per write,
 *                as fast as the socket takes them; the text has an e-mail address every ~60
 *                characters, so most addresses are split across deltas (PII-dense);
 *   bench-clean  the same shape and size, the same sentences without an address (no PII hit);
 *   bench-slow   a role chunk at once, then one sentence with an address every 250 ms until
 *                this benchmark releases it (`POST /__bench/release-slow`, or after 60 s), then
 *                stop and [DONE]: a stream that stays open as long as the measurement needs.
 * `VLT_LLM_D_API_URL` points at the mock of tests/support/mock-llm.ts itself (in this process),
 * for a second time-to-first-byte pair against it.
 *
 * Set up over the API as tests/llm-proxy/openai-sdk.test.ts does: an owner, API-key connections
 * llm_b-chat and llm_d-chat, agents with read_write / stepUpApproval never policies; one of them
 * with the response rule `{ filter: { redact: [{ type: 'email' }] } }`. `startLlmGateway` itself
 * reads the vitest runner's injected context (tests/support/services.ts), so outside vitest the
 * same steps are taken here with the same helpers (mock-llm, api-client, identity-harness).
 *
 * Baselines, in the same run:
 *   direct  the same request straight to the provider (its key, HTTPS, keep-alive);
 *   bare    `--role=passthrough`: a minimal `node:http` proxy that swaps in the key and pipes
 *           the provider's stream back (keep-alive HTTPS agent), nothing else.
 * Measured in the same run as the baselines (time to first byte and throughput interleaved
 * round by round, so drift hits every mode alike):
 *   1. memory: STREAMS concurrent bench-slow streams through bare, the proxy without rules and
 *      the proxy with redaction, each on fresh connections (the provider first closes its idle
 *      ones); the proxying process's RSS and V8 heap (used + external) sampled every 50 ms from
 *      the first request until the streams are released (HOLD_MS after the last one opened),
 *      minus a baseline taken after a GC, divided by STREAMS; also the heap still live after a
 *      GC with every stream open, and the CPU the process burnt per stream. RSS never shrinks
 *      back, so the redaction mode runs on a restarted gateway (same database and master key,
 *      warmed up with the same requests as the first one). Even so RSS grows only where V8 and
 *      malloc had no free pages left, so it is printed, not judged: the verdicts read the peak
 *      of heap used + external (what the process needed at worst, garbage included) and, apart,
 *      what stays live per open stream after a GC (what each stream holds).
 *   2. time to first byte (first body chunk, c=1, warm connections, after TTFB_WARMUP_CALLS
 *      calls on each route): direct vs bare vs proxy;
 *      on NATS also, in the same rounds, a JetStream publish of an `execution_requested` on its
 *      own, acked. A call waits for that ack before its provider is called, so with the hop
 *      itself (bare) it is a floor under the proxy's added TTFB that code cannot remove; the
 *      verdict line prints that floor and the proxy's own time over it.
 *   3. throughput at c=1 and c=4 on bench-pii and bench-clean: responses/s of bare, proxy
 *      without rules, proxy with e-mail redaction (the same provider bytes per response, so the
 *      ratio is the input-throughput ratio), and the proxying process's CPU per response.
 *
 * `--uploads` measures large bodies instead (ADR 0096), after the same set-up and sanity checks:
 * `POST /v1/files` forms of 1 MiB, 8 MiB and 25 MB and streamed chat calls carrying a 9 MiB and
 * a 23 MiB image, one at a time, through bare and through the proxy. It prints what the carrying process
 * held at peak as a multiple of the body's size, its event loop's longest stall, and the call's
 * wall time.
 *
 * Targets (ADR 0043 issue): TTFB +≤ 1 ms p50 over direct; throughput without response rules
 * ≥ 0.9 × bare, with redaction ≥ 0.6 × on the PII-dense stream and ≥ 0.9 × on the clean one;
 * ≤ 64 KiB per concurrent stream. This prints; it never fails on numbers. It exits non-zero when
 * something broke: a non-2xx answer, a stream that does not end with [DONE], an address the
 * redaction let through.
 */
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Pool, request } from 'undici';
import { openBenchHarness, procCpuSeconds } from './harness.js';
import { openJetStreamProbe, reachable } from './support.js';

const THIS_FILE = fileURLToPath(import.meta.url);
const HARD_LIMIT_MS = 150_000;
/**
 * Calls each route serves before time to first byte is measured, eight at a time. The gateway
 * was restarted for the memory section and has served a few hundred calls since: its request
 * path would still run mostly as baseline code, not as V8's optimized code (ADR 0094).
 */
const TTFB_WARMUP_CALLS = Number(process.env.BENCH_WARMUP_CALLS ?? 4_000);
/** No new throughput round starts when it could not finish before this; the report still prints. */
const SOFT_LIMIT_MS = 105_000;
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 700);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const CONCURRENCY = [1, 4];
const TTFB_SAMPLES = Number(process.env.BENCH_TTFB_SAMPLES ?? 300);
const TTFB_BUDGET_MS = 9_000;
const STREAMS = Number(process.env.BENCH_STREAMS ?? 200);
const SLOW_GAP_MS = 250;
/** How long every stream stays open after the last one opened, before they are released. */
const HOLD_MS = 1_500;
/** The most the memory phase waits for STREAMS streams to open. */
const OPEN_LIMIT_MS = 20_000;
const BULK_DELTAS = 3000;
const TTFB_TAIL_MS = 2;
const SETTLE_MS = 100;
const TARGET = { ttfbP50Ms: 1, none: 0.9, redactPii: 0.6, redactClean: 0.9, perStreamKiB: 64 };
const EMAIL_RULE = { label: 'no e-mail', match: {}, filter: { redact: [{ type: 'email' }] } };
/** What the expected redacted text is computed with (the gateway's detector is its own). */
const EMAIL_RE = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;
const DONE = 'data: [DONE]\n\n';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// The provider's streams (built the same way in the upstream role and, for checks, in main)

type BulkKind = 'pii' | 'clean';

function sentence(kind: BulkKind, i: number): string {
  return kind === 'pii'
    ? `Forward invoice ${i} to jane.doe${i % 100}@example.com before noon. `
    : `Forward invoice ${i} to the billing desk upstairs before noon. `;
}

/** Token-sized deltas (2–7 characters), as a model streams text. */
function deltasOf(text: string): string[] {
  const sizes = [3, 5, 4, 7, 2, 6, 4, 5];
  const out: string[] = [];
  for (let i = 0, n = 0; i < text.length; n++) {
    const size = sizes[n % sizes.length]!;
    out.push(text.slice(i, i + size));
    i += size;
  }
  return out;
}

/** The chat-completion chunks of tests/support/mock-llm.ts, one SSE event each. */
function chatStream(model: string, deltas: string[]): string[] {
  const chunk = (delta: unknown, finish: string | null) =>
    `data: ${JSON.stringify({
      id: 'chatcmpl-bench',
      object: 'chat.completion.chunk',
      created: 1717495200,
      model,
      system_fingerprint: 'fp_bench',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    })}\n\n`;
  return [
    chunk({ role: 'assistant', content: '', refusal: null }, null),
    ...deltas.map((content) => chunk({ content }, null)),
    chunk({}, 'stop'),
    DONE,
  ];
}

function bulkStream(kind: BulkKind): { text: string; events: Buffer[] } {
  let text = '';
  for (let i = 0; deltasOf(text).length < BULK_DELTAS; i++) text += sentence(kind, i);
  return { text, events: chatStream(`bench-${kind}`, deltasOf(text)).map((e) => Buffer.from(e)) };
}

const TTFB_PARTS = ['Hello', ' from', ' the', ' mock', ' model.'];

/** The text an OpenAI-style SDK accumulates from a stream (`choices[0].delta.content`). */
function deltaText(sse: string): string {
  let text = '';
  for (const event of sse.split('\n\n')) {
    for (const line of event.split('\n')) {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const parsed = JSON.parse(line.slice(6)) as { choices?: { delta?: { content?: string } }[] };
      text += parsed.choices?.[0]?.delta?.content ?? '';
    }
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// Child roles

/** `process.memoryUsage()` on its own port (`?gc=1` collects first), for the memory phase. */
async function serveMemory(port: number, extra: () => object = () => ({})) {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  // How long the process's event loop was held at most since the last `?reset=1` (uploads).
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const server = http.createServer((req, res) => {
    if (req.url?.includes('gc=1')) {
      gc();
      gc();
    }
    const loopDelayMaxMs = loop.max / 1e6;
    if (req.url?.includes('reset=1')) loop.reset();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ...process.memoryUsage(), loopDelayMaxMs, ...extra() }));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
}

function sendJson(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function writeAll(res: ServerResponse, chunks: Buffer[]) {
  for (const c of chunks) {
    if (res.destroyed) return;
    // As fast as the socket takes it: one write per event, waiting only when the buffer is full.
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

/** Open slow streams, each ended (stop, [DONE]) by its release function. */
const slowStreams = new Set<() => void>();

function writeSlow(res: ServerResponse) {
  const [first, ...rest] = chatStream(
    'bench-slow',
    Array.from({ length: 240 }, (_, i) => sentence('pii', i)),
  );
  const deltas = rest.slice(0, -2);
  const end = rest.slice(-2).join('');
  res.write(first);
  let next = 0;
  const release = () => {
    clearInterval(timer);
    slowStreams.delete(release);
    if (!res.destroyed) res.end(end);
  };
  const timer = setInterval(() => {
    if (res.destroyed) release();
    else if (next < deltas.length) res.write(deltas[next++]);
    else release();
  }, SLOW_GAP_MS);
  slowStreams.add(release);
}

async function runUpstream() {
  const auth = `Bearer ${process.env.BENCH_LLM_KEY!}`;
  const bulk: Record<string, Buffer[]> = {
    'bench-pii': bulkStream('pii').events,
    'bench-clean': bulkStream('clean').events,
  };
  const ttfb = chatStream('bench-ttfb', TTFB_PARTS);
  const server = https.createServer(
    { key: process.env.BENCH_TLS_KEY!, cert: process.env.BENCH_TLS_CERT! },
    (req: IncomingMessage, res: ServerResponse) => {
      // The memory phase starts every mode on fresh provider connections.
      if (req.url === '/__bench/close-idle') {
        server.closeIdleConnections();
        return void res.writeHead(204, { connection: 'close' }).end();
      }
      if (req.url === '/__bench/release-slow') {
        for (const release of [...slowStreams]) release();
        return void res.writeHead(204).end();
      }
      if (req.headers.authorization !== auth)
        return sendJson(res, 401, {
          error: { message: 'invalid api key', type: 'invalid_request_error', code: 'invalid_api_key' },
        });
      if (req.method === 'GET' && req.url === '/v1/models')
        return sendJson(res, 200, {
          object: 'list',
          data: [{ id: 'bench-pii', object: 'model', created: 1700000000, owned_by: 'bench' }],
        });
      if (req.method === 'POST' && req.url === '/v1/files') {
        let bytes = 0;
        req.on('data', (c: Buffer) => (bytes += c.length));
        req.on('end', () => sendJson(res, 200, { id: 'file-bench', object: 'file', bytes }));
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions')
        return sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        let body: { model?: unknown; stream?: unknown } = {};
        try {
          body = JSON.parse(Buffer.concat(parts).toString('utf8')) as typeof body;
        } catch {
          // answered below
        }
        const model = String(body.model);
        if (body.stream !== true || !(model in bulk || model === 'bench-ttfb' || model === 'bench-slow'))
          return sendJson(res, 400, { error: { message: `this provider streams bench-* models only` } });
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        if (model === 'bench-slow') return writeSlow(res);
        if (model === 'bench-ttfb') {
          res.write(ttfb[0]);
          return void setTimeout(() => res.end(ttfb.slice(1).join('')), TTFB_TAIL_MS);
        }
        void writeAll(res, bulk[model]!);
      });
    },
  );
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));
}

/** The bare baseline: swap in the key, pipe both ways, nothing else. */
async function runPassthrough() {
  const upstream = new URL(process.env.BENCH_UPSTREAM!);
  const auth = `Bearer ${process.env.BENCH_LLM_KEY!}`;
  // Trusts the test CA through NODE_EXTRA_CA_CERTS, like the gateway.
  const agent = new https.Agent({ keepAlive: true, maxSockets: 512 });
  const hopByHop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);
  const server = http.createServer((req, res) => {
    const up = https.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host, authorization: auth },
        agent,
      },
      (ur) => {
        const headers = Object.fromEntries(Object.entries(ur.headers).filter(([k]) => !hopByHop.has(k)));
        res.writeHead(ur.statusCode ?? 502, headers);
        ur.pipe(res);
      },
    );
    up.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  server.keepAliveTimeout = 30_000;
  await serveMemory(Number(process.env.BENCH_MEM_PORT));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));
}

/** The all-in-one gateway, as the in-process test gateway starts it, in a process of its own. */
async function runGateway() {
  const { loadConfig } = await import('@vlt/config');
  const { startAllInOne } = await import('@vlt/all-in-one');
  const { createLogger } = await import('@vlt/telemetry');
  const logs = { lines: 0, warn: 0, error: 0, first: [] as string[] };
  // The production logger and its serializers; the lines are counted, not kept.
  const logger = createLogger({
    service: 'all-in-one',
    level: process.env.LOG_LEVEL ?? 'info',
    destination: new Writable({
      write(chunk, _enc, cb) {
        const line = String(chunk);
        logs.lines++;
        const level = /"level":"(\w+)"/.exec(line)?.[1];
        if (level === 'warn') logs.warn++;
        if (level === 'error' || level === 'fatal') logs.error++;
        if ((level === 'warn' || level === 'error' || level === 'fatal') && logs.first.length < 3)
          logs.first.push(line.slice(0, 400).trim());
        cb();
      },
    }),
  });
  const config = loadConfig('all-in-one', process.env);
  const gw = await startAllInOne(config, logger);
  await gw.app.listen({ port: config.port, host: '127.0.0.1' });
  await serveMemory(Number(process.env.BENCH_MEM_PORT), () => ({ logs }));
  process.once('SIGTERM', () => {
    void gw.close().finally(() => process.exit(0));
  });
  console.log(JSON.stringify({ port: config.port }));
}

// ---------------------------------------------------------------------------------------------
// Load generation

interface Route {
  label: string;
  origin: string;
  path: string;
  headers: Record<string, string>;
}

interface CallResult {
  ok: boolean;
  status: number;
  /** Request sent → first body chunk. */
  firstMs: number;
  bytes: number;
  /** The whole body when asked for, else ''. */
  text: string;
  problem?: string;
}

async function stopChild(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(5_000).then(() => child.kill('SIGKILL'))]);
}

const chatBody = (model: string) =>
  JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello.' }], stream: true });

/** One streamed chat completion; every problem (status, content type, no [DONE]) is reported, never thrown. */
async function call(
  pool: Pool,
  route: Route,
  model: string,
  opts: { keep?: boolean; onFirst?: () => void } = {},
): Promise<CallResult> {
  const t0 = performance.now();
  let status = 0;
  let firstMs = NaN;
  let bytes = 0;
  let head = '';
  let tail = '';
  const parts: Buffer[] = [];
  try {
    const res = await pool.request({
      method: 'POST',
      path: route.path,
      headers: { 'content-type': 'application/json', ...route.headers },
      body: chatBody(model),
    });
    status = res.statusCode;
    const ct = String(res.headers['content-type'] ?? '');
    for await (const chunk of res.body) {
      const c = chunk as Buffer;
      if (bytes === 0) {
        firstMs = performance.now() - t0;
        opts.onFirst?.();
      }
      bytes += c.length;
      if (opts.keep) parts.push(c);
      if (head.length < 300) head += c.toString('utf8', 0, 300);
      tail = (tail + c.toString('latin1')).slice(-DONE.length);
    }
    const text = opts.keep ? Buffer.concat(parts).toString('utf8') : '';
    const problem =
      status !== 200
        ? `HTTP ${status} (${ct}) ${head.slice(0, 300)}`
        : !ct.startsWith('text/event-stream')
          ? `content-type ${ct}: ${head.slice(0, 200)}`
          : tail !== DONE
            ? `the stream does not end with data: [DONE] (${bytes} bytes)`
            : undefined;
    return { ok: !problem, status, firstMs, bytes, text, ...(problem ? { problem } : {}) };
  } catch (err) {
    return { ok: false, status, firstMs, bytes, text: '', problem: `${(err as Error).message}` };
  }
}

interface Memory {
  rss: number;
  heapUsed: number;
  external: number;
  loopDelayMaxMs: number;
  logs?: { lines: number; warn: number; error: number; first: string[] };
}

async function memoryOf(url: string, gc = false, resetLoop = false): Promise<Memory> {
  const query = [gc && 'gc=1', resetLoop && 'reset=1'].filter(Boolean).join('&');
  const res = await request(`${url}/${query ? `?${query}` : ''}`);
  return (await res.body.json()) as Memory;
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-');
const kib = (bytes: number) => fmt(bytes / 1024, 1);
const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');

// ---------------------------------------------------------------------------------------------
// --uploads: what a large body costs the process that carries it (ADR 0096)

const UPLOADS_ONLY = process.argv.includes('--uploads');
const UPLOADS_PER_CASE = Number(process.env.BENCH_UPLOADS ?? 4);

interface LargeBody {
  label: string;
  /** Provider path; the proxy's is `/v1/vault/llm/llm_b` before it. */
  path: string;
  contentType: string;
  body: Buffer;
  /** What the provider's answer must show for the call to count as carried whole. */
  check: (status: number, answer: string) => boolean;
}

/** A `files.create` form around `size` random bytes, as an SDK writes one. */
function uploadForm(size: number): LargeBody {
  const boundary = `----bench${randomBytes(8).toString('hex')}`;
  const head =
    `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n` +
    'Content-Type: application/jsonl\r\n\r\n';
  return {
    label: `form ${(size / 1024 / 1024).toFixed(1)} MiB`,
    path: '/v1/files',
    contentType: `multipart/form-data; boundary=${boundary}`,
    body: Buffer.concat([Buffer.from(head), randomBytes(size), Buffer.from(`\r\n--${boundary}--\r\n`)]),
    check: (status, answer) =>
      status === 200 && ((JSON.parse(answer) as { bytes?: number }).bytes ?? 0) >= size,
  };
}

/** A streamed chat call carrying a base64 image of `size` random bytes, as an SDK writes one. */
function imageChat(size: number): LargeBody {
  const body = JSON.stringify({
    model: 'bench-ttfb',
    stream: true,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this picture?' },
          {
            type: 'image_url',
            image_url: { url: `data:image/png;base64,${randomBytes(size).toString('base64')}` },
          },
        ],
      },
    ],
  });
  return {
    label: `chat ${(Buffer.byteLength(body) / 1024 / 1024).toFixed(1)} MiB`,
    path: '/v1/chat/completions',
    contentType: 'application/json',
    body: Buffer.from(body),
    check: (status, answer) => status === 200 && answer.endsWith(DONE),
  };
}

/**
 * Forms of 1 MiB, 8 MiB and 25 MB and streamed chat calls with a 9 MiB and a 23 MiB image, one
 * at a time, through the bare passthrough (the baseline: it pipes, holding next to nothing) and
 * through the proxy. For each: the carrying process's peak heap used + external over its level after a
 * GC (sampled every 10 ms), as a multiple of the body's size; its event loop's longest stall;
 * the call's wall time.
 */
async function measureLargeBodies(
  origins: Record<'bare' | 'proxy', { origin: string; prefix: string; headers: Record<string, string> }>,
  memUrl: Record<'bare' | 'gateway', string>,
  fail: (where: string, problem: string) => void,
) {
  const heapOf = (m: Memory) => m.heapUsed + m.external;
  console.log(
    `\nlarge bodies, one at a time, ${UPLOADS_PER_CASE} per case (peak held = peak heap used +` +
      ' external over the level after a GC)',
  );
  console.log('body               mode     peak held (x size)   loop stall max   wall p50');
  const cases = [1024 * 1024, 8 * 1024 * 1024, 25_000_000].map(uploadForm);
  // A few images, and images near the 32 MiB limit (VLT_LLM_BODY_MAX_BYTES).
  cases.push(imageChat(9 * 1024 * 1024), imageChat(23 * 1024 * 1024));
  for (const c of cases) {
    for (const mode of ['bare', 'proxy'] as const) {
      const route = origins[mode];
      const url = mode === 'bare' ? memUrl.bare : memUrl.gateway;
      const pool = new Pool(route.origin, { connections: 1 });
      const held: number[] = [];
      const stalls: number[] = [];
      const walls: number[] = [];
      for (let i = 0; i < UPLOADS_PER_CASE; i++) {
        const before = await memoryOf(url, true, true);
        let peak = heapOf(before);
        let sampling = true;
        const sampler = (async () => {
          while (sampling) {
            const m = await memoryOf(url).catch(() => undefined);
            if (m) peak = Math.max(peak, heapOf(m));
            await sleep(10);
          }
        })();
        const t0 = performance.now();
        const res = await pool.request({
          method: 'POST',
          path: `${route.prefix}${c.path}`,
          headers: { 'content-type': c.contentType, ...route.headers },
          body: c.body,
        });
        const answer = await res.body.text();
        walls.push(performance.now() - t0);
        sampling = false;
        await sampler;
        const after = await memoryOf(url);
        if (!c.check(res.statusCode, answer))
          fail(`${c.label} via ${mode}`, `HTTP ${res.statusCode} ${answer.slice(0, 200)}`);
        held.push((Math.max(peak, heapOf(after)) - heapOf(before)) / c.body.length);
        stalls.push(after.loopDelayMaxMs);
      }
      await pool.close();
      const med = (xs: number[]) =>
        quantile(
          [...xs].sort((a, b) => a - b),
          0.5,
        );
      console.log(
        `${c.label.padEnd(17)}  ${mode.padEnd(7)}  ` +
          `${fmt(med(held)).padStart(6)} (max ${fmt(Math.max(...held))})` +
          `    ${fmt(med(stalls), 1).padStart(6)} ms     ${fmt(med(walls), 1).padStart(7)} ms`,
      );
    }
  }
}

async function main(): Promise<number> {
  const started = Date.now();
  const h = await openBenchHarness('llm-proxy', HARD_LIMIT_MS);
  const { pki, freePort, dataDir } = h;
  const { startMockLlm, LLM_SERVICE, RW_UNATTENDED } = await import('@vlt/test-support/mock-llm.js');
  const {
    apiKeyConnectionRequest,
    createPolicy,
    expectStatus,
    http: api,
    putAllowlists,
  } = await import('@vlt/test-support/api-client.js');
  const { agentToken, enrolledAgent, newUser } = await import('@vlt/test-support/identity-harness.js');
  let broken = 0;
  const problems: string[] = [];
  const note = (where: string, r: CallResult) => {
    broken++;
    if (problems.length < 8) problems.push(`${where}: ${r.problem}`);
  };

  try {
    // A throw-away database and bus prefix, as the test gateways use.
    const adminUrl = new URL(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres');
    let databaseUrl: string | undefined;
    if (await reachable(adminUrl.hostname || '127.0.0.1', Number(adminUrl.port || 5432))) {
      const { createRunDatabase } = await import('@vlt/test-support/run-database.js');
      const db = await createRunDatabase(
        adminUrl.toString(),
        `vlt_bench_llm_${randomBytes(4).toString('hex')}`,
      );
      h.afterServicesStop(db.drop);
      databaseUrl = db.url;
    }
    const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
    const natsFirst = new URL(natsUrl.split(',')[0]!.trim());
    const prefix = `bench${randomBytes(4).toString('hex')}`;
    const nats = (await reachable(natsFirst.hostname, Number(natsFirst.port || 4222))) ? natsUrl : undefined;
    if (nats) {
      h.afterServicesStop(async () => {
        const { purgeNatsPrefix } = await import('@vlt/bus');
        await purgeNatsPrefix({ servers: nats.split(','), prefix });
      });
    }
    // On NATS every call waits for JetStream to store its `execution_requested` before the
    // provider is called: measured on its own in the same rounds, it is a floor under the TTFB.
    const jetStream = nats
      ? await openJetStreamProbe(nats, `benchack${randomBytes(4).toString('hex')}`)
      : null;
    if (jetStream) h.afterServicesStop(() => jetStream.close());

    const llmKey = `sk-proj-${randomBytes(20).toString('hex')}`;
    const [upstream, mock] = await Promise.all([
      h.startRole(THIS_FILE, 'upstream', {
        BENCH_TLS_KEY: pki.key,
        BENCH_TLS_CERT: pki.cert,
        BENCH_LLM_KEY: llmKey,
      }),
      startMockLlm({ pki }),
    ]);
    h.onClose(() => mock.close());
    mock.stream = { parts: TTFB_PARTS, gapMs: 1 };
    // A host name, as providers have: the data plane resolves it for its SSRF check, and the
    // pipeline is asked again with the answers (ADR 0079).
    const upstreamBase = `https://localhost:${upstream.port}`;
    const [port, bareMemPort, gwMemPort] = await Promise.all([freePort(), freePort(), freePort()]);
    const gatewayEnv: Record<string, string> = {
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      VLT_DATA_DIR: dataDir,
      VLT_MASTER_KEY: randomBytes(32).toString('base64'),
      VLT_TRUST_PROXY: '127.0.0.1/32',
      VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32,::1/128',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      VLT_LLM_B_API_URL: upstreamBase,
      VLT_LLM_D_API_URL: mock.url,
      NODE_EXTRA_CA_CERTS: pki.caPath,
      BENCH_MEM_PORT: String(gwMemPort),
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      ...(nats ? { NATS_URL: nats, VLT_NATS_PREFIX: prefix } : {}),
    };
    const [bare, firstGateway] = await Promise.all([
      h.startRole(THIS_FILE, 'passthrough', {
        BENCH_UPSTREAM: upstreamBase,
        NODE_EXTRA_CA_CERTS: pki.caPath,
        BENCH_LLM_KEY: llmKey,
        BENCH_MEM_PORT: String(bareMemPort),
      }),
      h.startRole(THIS_FILE, 'gateway', gatewayEnv),
    ]);
    let gateway = firstGateway;
    h.onClose(() => stopChild(gateway.child));
    const base = `http://127.0.0.1:${port}`;
    const bareBase = `http://127.0.0.1:${bare.port}`;
    const memUrl = { bare: `http://127.0.0.1:${bareMemPort}`, gateway: `http://127.0.0.1:${gwMemPort}` };

    // Set-up over the API, as tests/llm-proxy/openai-sdk.test.ts (startLlmGateway) does it.
    const owner = await newUser(base, 'bench-llm');
    const admin = owner.admin;
    const connection = async (service: string, apiKey: string) =>
      expectStatus(await apiKeyConnectionRequest(admin, { service, apiKey }), 201).body.connection.id;
    const mockKey = mock.newKey('llm_d');
    const connB = await connection(LLM_SERVICE.llm_b, llmKey);
    const connD = await connection(LLM_SERVICE.llm_d, mockKey);
    const bind = async (connectionId: string, response: unknown[]) => {
      const agent = await enrolledAgent(admin);
      const { policy } = await createPolicy(admin, agent.id, connectionId, RW_UNATTENDED);
      if (response.length) {
        expectStatus(
          await api('PUT', `${base}/v1/policies/${policy.id}/rules`, {
            headers: admin.headers,
            json: { rules: { request: [], response } },
          }),
          200,
        );
      }
      return agentToken(base, agent);
    };
    const [tokNone, tokRedact, tokMock] = [
      await bind(connB, []),
      await bind(connB, [EMAIL_RULE]),
      await bind(connD, []),
    ];
    const setupMs = Date.now() - started;

    const chat = '/v1/chat/completions';
    const routes = {
      direct: {
        label: 'direct',
        origin: upstreamBase,
        path: chat,
        headers: { authorization: `Bearer ${llmKey}` },
      },
      bare: { label: 'bare passthrough', origin: bareBase, path: chat, headers: {} },
      none: {
        label: 'proxy, no rules',
        origin: base,
        path: `/v1/vault/llm/llm_b${chat}`,
        headers: { authorization: `Bearer ${tokNone}` },
      },
      redact: {
        label: 'proxy, e-mail redaction',
        origin: base,
        path: `/v1/vault/llm/llm_b${chat}`,
        headers: { authorization: `Bearer ${tokRedact}` },
      },
      mockDirect: {
        label: 'direct (test mock)',
        origin: mock.url,
        path: chat,
        headers: { authorization: `Bearer ${mockKey}` },
      },
      mockProxy: {
        label: 'proxy llm_d (test mock)',
        origin: base,
        path: `/v1/vault/llm/llm_d${chat}`,
        headers: { authorization: `Bearer ${tokMock}` },
      },
    } satisfies Record<string, Route>;
    type RouteKey = keyof typeof routes;
    const newPool = (origin: string, connections: number) =>
      new Pool(origin, {
        connections,
        keepAliveTimeout: 30_000,
        ...(origin.startsWith('https:') ? { connect: { ca: pki.caPem } } : {}),
      });
    const pools = new Map<string, Pool>();
    const poolOf = (route: Route) => {
      let p = pools.get(route.origin);
      if (!p) pools.set(route.origin, (p = newPool(route.origin, 8)));
      return p;
    };
    h.onClose(() => Promise.all([...pools.values()].map((p) => p.close())));

    // ---- Sanity, before anything is measured: every route streams, the proxy without rules
    // relays the provider's bytes, the redacting one lets no address through.
    const bulkText = { pii: bulkStream('pii').text, clean: bulkStream('clean').text };
    for (const model of ['bench-ttfb', 'bench-pii', 'bench-clean']) {
      const ref = await call(poolOf(routes.direct), routes.direct, model, { keep: true });
      if (!ref.ok) throw new Error(`sanity: direct ${model}: ${ref.problem}`);
      for (const key of ['bare', 'none', 'redact'] as const) {
        const r = await call(poolOf(routes[key]), routes[key], model, { keep: true });
        if (!r.ok) throw new Error(`sanity: ${routes[key].label} ${model}: ${r.problem}`);
        if (key !== 'redact') {
          if (r.text !== ref.text)
            console.log(
              `warning: ${routes[key].label} ${model}: the stream differs from the provider's bytes`,
            );
          continue;
        }
        const got = deltaText(r.text);
        if (got.includes('@example.com'))
          throw new Error(`sanity: redaction let an address through on ${model}`);
        if (model === 'bench-pii' && !got.includes('[REDACTED_EMAIL]'))
          throw new Error('sanity: the redacted PII stream shows no [REDACTED_EMAIL]');
        const kind = model === 'bench-ttfb' ? undefined : model === 'bench-pii' ? 'pii' : 'clean';
        const want = (kind ? bulkText[kind] : TTFB_PARTS.join('')).replace(EMAIL_RE, '[REDACTED_EMAIL]');
        if (got !== want) {
          let at = 0;
          while (got[at] === want[at]) at++;
          console.log(
            `warning: redacted ${model} text differs from the whole text redacted at ${at}: ` +
              `${JSON.stringify(got.slice(at, at + 40))} vs ${JSON.stringify(want.slice(at, at + 40))}`,
          );
        }
      }
    }
    for (const key of ['mockDirect', 'mockProxy'] as const) {
      const r = await call(poolOf(routes[key]), routes[key], 'gpt-mock', { keep: true });
      if (!r.ok) throw new Error(`sanity: ${routes[key].label}: ${r.problem}`);
      if (deltaText(r.text) !== TTFB_PARTS.join(''))
        throw new Error(`sanity: ${routes[key].label} streamed ${JSON.stringify(deltaText(r.text))}`);
    }

    if (UPLOADS_ONLY) {
      const agent = await enrolledAgent(admin);
      const { policy } = await createPolicy(admin, agent.id, connB, RW_UNATTENDED);
      expectStatus(
        await putAllowlists(admin, policy.id, [
          { baseUrl: upstreamBase, methods: ['POST'], pathPatterns: ['/v1/files', '/v1/chat/completions'] },
        ]),
        200,
      );
      const token = await agentToken(base, agent);
      await measureLargeBodies(
        {
          bare: { origin: bareBase, prefix: '', headers: {} },
          proxy: {
            origin: base,
            prefix: '/v1/vault/llm/llm_b',
            headers: { authorization: `Bearer ${token}` },
          },
        },
        memUrl,
        (where, problem) => note(where, { ok: false, status: 0, firstMs: NaN, bytes: 0, text: '', problem }),
      );
      console.log(`total ${fmt((Date.now() - started) / 1000, 1)} s`);
      if (broken) for (const p of problems) console.log(`  ${p}`);
      return broken ? 1 : 0;
    }

    // ---- 1. Memory: STREAMS concurrent slow streams, each mode on fresh connections.
    interface MemResult {
      /** When the last stream's first byte arrived, and the median stream's. */
      openMs: number;
      openP50Ms: number;
      opened: number;
      openAtGc: number;
      ok: number;
      before: Memory;
      peakRss: number;
      peakHeap: number;
      live: Memory;
      /** CPU seconds the proxying process burnt from the first request to the last [DONE]. */
      cpu: number;
    }
    const heapOf = (m: Memory) => m.heapUsed + m.external;
    const memory = new Map<'bare' | 'none' | 'redact', MemResult>();
    for (const key of ['bare', 'none', 'redact'] as const) {
      const route = routes[key];
      const url = key === 'bare' ? memUrl.bare : memUrl.gateway;
      if (key === 'redact') {
        // RSS never shrinks back: a fresh gateway process (same database, same master key),
        // warmed up like the first one was by the sanity checks.
        const client = pools.get(base);
        pools.delete(base);
        await client?.close();
        await stopChild(gateway.child);
        gateway = await h.startRole(THIS_FILE, 'gateway', gatewayEnv);
        for (const model of ['bench-ttfb', 'bench-pii', 'bench-clean']) {
          for (const k of ['none', 'redact'] as const) {
            const r = await call(poolOf(routes[k]), routes[k], model);
            if (!r.ok) note(`warm-up after the gateway restart, ${routes[k].label}`, r);
          }
        }
      }
      const pid = key === 'bare' ? bare.child.pid : gateway.child.pid;
      await (
        await poolOf(routes.direct).request({ method: 'POST', path: '/__bench/close-idle' })
      ).body.dump();
      await sleep(300);
      const before = await memoryOf(url, true);
      const cpu0 = await procCpuSeconds(pid);
      let peakRss = before.rss;
      let peakHeap = heapOf(before);
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const m = await memoryOf(url).catch(() => undefined);
          if (m) {
            peakRss = Math.max(peakRss, m.rss);
            peakHeap = Math.max(peakHeap, heapOf(m));
          }
          await sleep(50);
        }
      })();
      const pool = newPool(route.origin, STREAMS);
      let opened = 0;
      let openMs = NaN;
      let allOpen: () => void = () => undefined;
      const allOpened = new Promise<void>((resolve) => (allOpen = resolve));
      const t0 = performance.now();
      const running = Promise.all(
        Array.from({ length: STREAMS }, () =>
          call(pool, route, 'bench-slow', {
            onFirst: () => {
              if (++opened === STREAMS) {
                openMs = performance.now() - t0;
                allOpen();
              }
            },
          }),
        ),
      );
      // Every stream open: hold them, and take the heap still live after a GC meanwhile.
      await Promise.race([allOpened, sleep(OPEN_LIMIT_MS)]);
      await sleep(HOLD_MS / 2);
      const openAtGc = opened;
      const live = await memoryOf(url, true);
      await sleep(HOLD_MS / 2);
      await (
        await poolOf(routes.direct).request({ method: 'POST', path: '/__bench/release-slow' })
      ).body.dump();
      const results = await running;
      const cpu = (await procCpuSeconds(pid)) - cpu0;
      sampling = false;
      await sampler;
      await pool.close();
      let ok = 0;
      for (const r of results) {
        if (r.ok) ok++;
        else note(`memory ${route.label}`, r);
      }
      const firsts = results.map((r) => r.firstMs).filter(Number.isFinite);
      const openP50Ms = quantile(
        firsts.sort((a, b) => a - b),
        0.5,
      );
      memory.set(key, { openMs, openP50Ms, opened, openAtGc, ok, before, peakRss, peakHeap, live, cpu });
      await sleep(SETTLE_MS);
    }

    // ---- 2. Time to first byte, c=1 on warm connections, interleaved.
    const ttfbKeys = ['direct', 'bare', 'none', 'mockDirect', 'mockProxy'] as const;
    const modelFor = (k: RouteKey) => (k === 'mockDirect' || k === 'mockProxy' ? 'gpt-mock' : 'bench-ttfb');
    for (const k of ttfbKeys) {
      let left = TTFB_WARMUP_CALLS;
      const worker = async () => {
        while (left-- > 0) {
          const r = await call(poolOf(routes[k]), routes[k], modelFor(k));
          if (!r.ok) note(`ttfb warm-up ${routes[k].label}`, r);
        }
      };
      await Promise.all(Array.from({ length: 8 }, worker));
    }
    const ttfb = new Map<RouteKey, number[]>(ttfbKeys.map((k) => [k, []]));
    const jetStreamAck: number[] = [];
    const ttfbStart = performance.now();
    let ttfbRounds = 0;
    for (; ttfbRounds < TTFB_SAMPLES && performance.now() - ttfbStart < TTFB_BUDGET_MS; ttfbRounds++) {
      for (let j = 0; j < ttfbKeys.length; j++) {
        const k = ttfbKeys[(ttfbRounds + j) % ttfbKeys.length]!;
        const r = await call(poolOf(routes[k]), routes[k], modelFor(k));
        if (r.ok) ttfb.get(k)!.push(r.firstMs);
        else note(`ttfb ${routes[k].label}`, r);
      }
      if (jetStream) jetStreamAck.push(await jetStream.publishMs());
    }

    // ---- 3. Throughput, interleaved rounds.
    const tpModes = ['bare', 'none', 'redact'] as const;
    type TpMode = (typeof tpModes)[number];
    const kinds: BulkKind[] = ['pii', 'clean'];
    interface Sample {
      responses: number;
      bytes: number;
      errors: number;
      elapsedMs: number;
      proxyCpu: number;
      roundRates: number[];
    }
    const samples = new Map<string, Sample>();
    const cell = (mode: TpMode, kind: BulkKind, c: number) => `${mode}|${kind}|${c}`;
    const round = async (mode: TpMode, kind: BulkKind, concurrency: number, ms: number, record: boolean) => {
      const route = routes[mode];
      const pid = mode === 'bare' ? bare.child.pid : gateway.child.pid;
      const cpu0 = await procCpuSeconds(pid);
      const t0 = performance.now();
      const until = t0 + ms;
      let responses = 0;
      let bytes = 0;
      let errors = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (performance.now() < until) {
            const r = await call(poolOf(route), route, `bench-${kind}`);
            if (r.ok) {
              responses++;
              bytes += r.bytes;
            } else {
              errors++;
              note(`throughput ${route.label} ${kind} c=${concurrency}`, r);
            }
          }
        }),
      );
      const elapsed = performance.now() - t0;
      const cpu = (await procCpuSeconds(pid)) - cpu0;
      if (!record) return;
      const s = samples.get(cell(mode, kind, concurrency)) ?? {
        responses: 0,
        bytes: 0,
        errors: 0,
        elapsedMs: 0,
        proxyCpu: 0,
        roundRates: [],
      };
      samples.set(cell(mode, kind, concurrency), s);
      s.responses += responses;
      s.bytes += bytes;
      s.errors += errors;
      s.elapsedMs += elapsed;
      s.proxyCpu += cpu;
      s.roundRates.push(responses / (elapsed / 1000));
    };
    for (const kind of kinds) for (const mode of tpModes) await round(mode, kind, 4, 250, false);
    const perRoundMs = CONCURRENCY.length * kinds.length * tpModes.length * (ROUND_MS + SETTLE_MS + 100);
    let rounds = 0;
    for (let r = 0; r < ROUNDS; r++) {
      if (Date.now() - started + perRoundMs > SOFT_LIMIT_MS) break;
      for (const c of CONCURRENCY) {
        for (const kind of kinds) {
          // Rotated so no mode always runs first after a pause.
          for (let j = 0; j < tpModes.length; j++) {
            await round(tpModes[(r + j) % tpModes.length]!, kind, c, ROUND_MS, true);
            await sleep(SETTLE_MS);
          }
        }
      }
      rounds++;
    }
    const gwLogs = (await memoryOf(memUrl.gateway)).logs;

    // ---- Report
    console.log(
      `\nLLM proxy (ADR 0043), OpenAI-style streaming chat completions through /v1/vault/llm/llm_b, all-in-one gateway ` +
        `on ${databaseUrl ? 'PostgreSQL' : 'embedded PGlite'} with ${nats ? 'NATS' : 'the in-process bus'}, ` +
        `log level ${process.env.BENCH_LOG_LEVEL ?? 'info'}; setup ${fmt(setupMs / 1000, 1)} s; node ${process.version}; ${availableParallelism()} CPUs`,
    );
    const stream = bulkStream('pii').events;
    console.log(
      `  bench-pii / bench-clean: ${stream.length} events, ${fmt(stream.reduce((n, e) => n + e.length, 0) / 1e6)} MB per response; ` +
        `bench-slow: one event every ${SLOW_GAP_MS} ms, held ${HOLD_MS} ms after the last stream opened`,
    );

    console.log(
      `\n1. Memory with ${STREAMS} concurrent slow streams (per stream = Δ over the GC'd baseline ÷ ${STREAMS})`,
    );
    console.log(
      'mode                      first byte p50/last ms   ok   CPU ms/stream   peak RSS Δ MiB  KiB/stream   peak heap+ext Δ MiB  KiB/stream   live after GC KiB/stream   vs bare (live)',
    );
    const bareMem = memory.get('bare')!;
    const perStream = (m: MemResult) => ({
      rss: (m.peakRss - m.before.rss) / STREAMS,
      heap: (m.peakHeap - heapOf(m.before)) / STREAMS,
      live: (heapOf(m.live) - heapOf(m.before)) / STREAMS,
    });
    for (const key of ['bare', 'none', 'redact'] as const) {
      const m = memory.get(key)!;
      const p = perStream(m);
      console.log(
        `${routes[key].label.padEnd(25)} ${`${fmt(m.openP50Ms, 0)} / ${fmt(m.openMs, 0)}`.padStart(22)} ${String(m.ok).padStart(4)} ${fmt((1000 * m.cpu) / STREAMS, 1).padStart(15)} ${fmt((m.peakRss - m.before.rss) / 2 ** 20, 1).padStart(16)} ${kib(p.rss).padStart(11)} ${fmt((m.peakHeap - heapOf(m.before)) / 2 ** 20, 1).padStart(21)} ${kib(p.heap).padStart(11)} ${kib(p.live).padStart(26)} ${(key === 'bare' ? '' : fmt(p.live / perStream(bareMem).live)).padStart(16)}` +
          (m.openAtGc < STREAMS ? `  (only ${m.openAtGc} open at the GC sample)` : ''),
      );
    }

    console.log(
      `\n2. Time to first byte (request sent → first body chunk), c=1, ${ttfbRounds} interleaved rounds`,
    );
    console.log(
      'route                              n   p50 ms   p99 ms  mean ms   p50 vs direct   p99 vs direct',
    );
    const stats = (k: RouteKey) => {
      const xs = [...ttfb.get(k)!].sort((a, b) => a - b);
      return {
        n: xs.length,
        p50: quantile(xs, 0.5),
        p99: quantile(xs, 0.99),
        mean: xs.reduce((a, b) => a + b, 0) / xs.length,
      };
    };
    const ttfbRows: [RouteKey, string, RouteKey][] = [
      ['direct', 'direct → bench provider', 'direct'],
      ['bare', 'bare passthrough → provider', 'direct'],
      ['none', 'proxy llm_b → provider', 'direct'],
      ['mockDirect', 'direct → test mock', 'mockDirect'],
      ['mockProxy', 'proxy llm_d → test mock', 'mockDirect'],
    ];
    for (const [k, label, vs] of ttfbRows) {
      const s = stats(k);
      const b = stats(vs);
      const diff = (a: number, c: number) => (k === vs ? '' : `${a - c >= 0 ? '+' : ''}${fmt(a - c)} ms`);
      console.log(
        `${label.padEnd(30)} ${String(s.n).padStart(5)} ${fmt(s.p50).padStart(8)} ${fmt(s.p99).padStart(8)} ${fmt(s.mean).padStart(8)} ${diff(s.p50, b.p50).padStart(15)} ${diff(s.p99, b.p99).padStart(15)}` +
          (k === vs ? '' : `  (${fmt(s.p50 / b.p50)}× p50)`),
      );
    }

    if (jetStreamAck.length > 0) {
      const xs = [...jetStreamAck].sort((a, b) => a - b);
      console.log(
        `${'JetStream publish, acked'.padEnd(30)} ${String(xs.length).padStart(5)} ${fmt(quantile(xs, 0.5)).padStart(8)} ${fmt(quantile(xs, 0.99)).padStart(8)} ${fmt(xs.reduce((a, b) => a + b, 0) / xs.length).padStart(8)}` +
          '  (the durable record each call waits for before the provider is called)',
      );
    }

    console.log(`\n3. Streaming throughput, ${rounds} interleaved rounds of ${ROUND_MS} ms per cell`);
    console.log(
      'stream  mode                      conc  responses   resp/s    MB/s  errors  proxy CPU ms/resp   vs bare (min–max per round)',
    );
    const ratio = (mode: TpMode, kind: BulkKind, c: number) => {
      const x = samples.get(cell(mode, kind, c));
      const b = samples.get(cell('bare', kind, c));
      if (!x || !b) return { r: NaN, min: NaN, max: NaN };
      const perRound = x.roundRates.map((rate, i) => rate / b.roundRates[i]!).filter(Number.isFinite);
      return {
        r: x.responses / x.elapsedMs / (b.responses / b.elapsedMs),
        min: Math.min(...perRound),
        max: Math.max(...perRound),
      };
    };
    for (const c of CONCURRENCY) {
      for (const kind of kinds) {
        for (const mode of tpModes) {
          const x = samples.get(cell(mode, kind, c));
          if (!x) continue;
          const secs = x.elapsedMs / 1000;
          const q = ratio(mode, kind, c);
          console.log(
            `${kind.padEnd(7)} ${routes[mode].label.padEnd(25)} ${String(c).padStart(4)} ${String(x.responses).padStart(10)} ${fmt(x.responses / secs, 1).padStart(8)} ${fmt(x.bytes / 1e6 / secs, 1).padStart(7)} ${String(x.errors).padStart(7)} ${fmt((1000 * x.proxyCpu) / x.responses, 1).padStart(18)}   ` +
              (mode === 'bare' ? '' : `${fmt(q.r)} (${fmt(q.min)}–${fmt(q.max)})`),
          );
        }
      }
    }

    // ---- Targets
    console.log('\nTargets (reported, never enforced):');
    const t = {
      direct: stats('direct'),
      bare: stats('bare'),
      none: stats('none'),
      mockDirect: stats('mockDirect'),
      mockProxy: stats('mockProxy'),
    };
    const added = t.none.p50 - t.direct.p50;
    const addedMock = t.mockProxy.p50 - t.mockDirect.p50;
    console.log(
      `  TTFB p50 added by the proxy ≤ +${TARGET.ttfbP50Ms} ms: bench provider +${fmt(added)} ms → ${verdict(added <= TARGET.ttfbP50Ms)}; ` +
        `test mock +${fmt(addedMock)} ms → ${verdict(addedMock <= TARGET.ttfbP50Ms)} (p99 +${fmt(t.none.p99 - t.direct.p99)} / +${fmt(t.mockProxy.p99 - t.mockDirect.p99)} ms)`,
    );
    {
      // What no proxy can avoid, measured in the same rounds: the hop itself (the bare
      // passthrough) and, on NATS, the durable record before the provider call.
      const hop = t.bare.p50 - t.direct.p50;
      const ack = jetStreamAck.length
        ? quantile(
            [...jetStreamAck].sort((a, b) => a - b),
            0.5,
          )
        : 0;
      console.log(
        `    floor: the hop alone (bare passthrough) +${fmt(hop)} ms` +
          (ack ? `, plus the JetStream ack ${fmt(ack)} ms = +${fmt(hop + ack)} ms` : '') +
          `; the proxy's own time over that floor: +${fmt(added - hop - ack)} ms`,
      );
    }
    const tpTarget = (label: string, mode: TpMode, kindsFor: BulkKind[], target: number) => {
      const parts = CONCURRENCY.flatMap((c) =>
        kindsFor.map((kind) => {
          const q = ratio(mode, kind, c);
          return { text: `${kind} c=${c} ${fmt(q.r)}×`, ok: q.r >= target };
        }),
      );
      console.log(
        `  ${label} ≥ ${target} × bare: ${parts.map((p) => p.text).join(', ')} → ${verdict(parts.every((p) => p.ok))}` +
          (parts.some((p) => p.ok) && !parts.every((p) => p.ok)
            ? ` (${parts.filter((p) => p.ok).length} of ${parts.length} cells)`
            : ''),
      );
    };
    tpTarget('throughput, no response rules', 'none', kinds, TARGET.none);
    tpTarget('throughput, e-mail redaction, PII-dense', 'redact', ['pii'], TARGET.redactPii);
    tpTarget('throughput, e-mail redaction, no PII hit', 'redact', ['clean'], TARGET.redactClean);
    // Each cell is bound by the proxy's one thread, so a ratio is a ratio of CPU per response:
    // this is what the no-PII target leaves the redaction stages, against what they cost.
    for (const c of CONCURRENCY) {
      const cpuPerResp = (mode: TpMode) => {
        const x = samples.get(cell(mode, 'clean', c));
        return x && x.responses > 0 ? (1000 * x.proxyCpu) / x.responses : NaN;
      };
      const [bareCpu, noneCpu, redactCpu] = [cpuPerResp('bare'), cpuPerResp('none'), cpuPerResp('redact')];
      const budget = bareCpu / TARGET.redactClean - noneCpu;
      console.log(
        `    clean c=${c}: ≥ ${TARGET.redactClean} × leaves redaction ${fmt(budget)} ms of CPU per response ` +
          `(${fmt((1000 * budget) / BULK_DELTAS)} µs per event; bare ${fmt(bareCpu)} ms, no rules ${fmt(noneCpu)} ms); ` +
          `it adds ${fmt(redactCpu - noneCpu)} ms (${fmt((1000 * (redactCpu - noneCpu)) / BULK_DELTAS)} µs per event)`,
      );
    }
    for (const key of ['none', 'redact'] as const) {
      const p = perStream(memory.get(key)!);
      console.log(
        `  memory per concurrent stream ≤ ${TARGET.perStreamKiB} KiB (${routes[key].label}): peak heap+external ${kib(p.heap)} KiB → ${verdict(p.heap <= TARGET.perStreamKiB * 1024)}; ` +
          `live after GC ${kib(p.live)} KiB → ${verdict(p.live <= TARGET.perStreamKiB * 1024)} (peak RSS ${kib(p.rss)} KiB; bare: peak ${kib(perStream(bareMem).heap)}, live ${kib(perStream(bareMem).live)} KiB)`,
      );
    }

    if (gwLogs)
      console.log(
        `\ngateway log: ${gwLogs.lines} lines, ${gwLogs.warn} warnings, ${gwLogs.error} errors` +
          gwLogs.first.map((l) => `\n  ${l}`).join(''),
      );
    if (broken) {
      console.log(`\n${broken} failed requests (non-2xx, no [DONE], or no answer); first:`);
      for (const p of problems) console.log(`  ${p}`);
    }
    console.log(`total ${fmt((Date.now() - started) / 1000, 1)} s`);
    return broken ? 1 : 0;
  } finally {
    await h.close();
  }
}

const role = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length) ?? 'main';
if (role === 'upstream') await runUpstream();
else if (role === 'passthrough') await runPassthrough();
else if (role === 'gateway') await runGateway();
else {
  try {
    process.exit(await main());
  } catch (err) {
    console.error(`llm-proxy bench aborted: ${(err as Error).stack ?? (err as Error).message}`);
    process.exit(1);
  }
}
