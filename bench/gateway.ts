/**
 * Gateway overhead benchmark: `pnpm tsx bench/gateway.ts` (bounded to two and a half minutes).
 *
 * The same upstream call (GET /rest/api/3/myself on a local HTTPS issue-tracker mock) made
 *   direct       – the load generator calls the upstream itself with undici,
 *   passthrough  – through a bare Fastify + undici proxy (this file, `--role=passthrough`) that
 *                  does the minimum a gateway must: parse the JSON request, inject Basic
 *                  credentials, call upstream, wrap the answer in the Model B envelope,
 *   gateway      – through the real data plane: the all-in-one process, set up over the API,
 *                  `POST /v1/vault/execute` with an agent token (full pipeline incl. audit);
 *                  with `--shape=split`, the production shape over PostgreSQL and NATS: control
 *                  plane, two data planes (calls alternate), audit writer and notifier,
 * in interleaved rounds (direct, passthrough, gateway, direct, …) so drift and noise hit all
 * three alike, at concurrency 1 and at saturation. Upstream and both proxies run in their own
 * processes so no mode shares an event loop with the load generator.
 *
 * Targets (the performance issue): ≤ 1 ms added p50 and ≤ 2 ms added p99 at concurrency 1;
 * throughput at saturation ≥ 0.85 × passthrough (all-in-one) or ≥ 0.5 × (split); CPU per call
 * of the vault's processes ≤ 2 × the bare proxy's. This prints; it never fails on numbers.
 * CPU per call is also given process by process, and for each process's main thread alone: one
 * event loop serves at most one call per main-thread CPU time of a call, so the ratio of the
 * gateway's main thread to the bare proxy's bounds the throughput ratio at saturation. And over
 * the whole machine (load generator, upstream, PostgreSQL and NATS servers too): the cores are
 * shared, so the sums bound it too, and show what a target leaves the vault (ADR 0084). And the
 * main-thread pauses for garbage collection of the processes serving calls, with the share of
 * calls at c=1 that meet one: above 1 %, the pauses are within the p99 (ADR 0083).
 * `--built` runs the services as the production image does (compiled, plain node).
 * `--db=postgres` runs the all-in-one on the PostgreSQL server at DATABASE_URL instead of its
 * embedded database (ADR 0083).
 * `--profile` writes a CPU profile of every vault process and of the bare proxy, and prints a
 * summary of each over the measured rounds (bench/cpu-profile.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, Pool, request } from 'undici';
import {
  GC_PAUSE_ARGS,
  commandCpuSeconds,
  cpuSecondsBetween,
  gcPausesIn,
  machineCpuSeconds,
  mainThreadCpuSeconds,
  openBenchHarness,
  procCpuSeconds,
  type GcPause,
} from './harness.js';
import { cpuProfileArgs, monotonicUs, printCpuProfiles, type ProfileWindow } from './cpu-profile.js';
import { openJetStreamProbe } from './support.js';

const THIS_FILE = fileURLToPath(import.meta.url);
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1_500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SATURATION = Number(process.env.BENCH_SATURATION ?? 32);
/** `all-in-one` (default, needs nothing) or `split` (`--shape=split`: real PostgreSQL and NATS). */
const SHAPE = process.argv.includes('--shape=split') ? 'split' : 'all-in-one';
/**
 * `--built`: the services as deploy/Dockerfile ships them, compiled bundles on plain node with
 * production dependencies, instead of TypeScript through tsx (whose `keepNames` output calls a
 * helper each time a closure is made). The build and its offline install add to the setup.
 */
const BUILT = process.argv.includes('--built');
/**
 * `--db=postgres`: the all-in-one on the PostgreSQL server at DATABASE_URL (its production
 * option) instead of its embedded database, so the audit rows are stored outside its process.
 */
const EXTERNAL_DB = process.argv.includes('--db=postgres');
/** `--profile`: CPU profiles of the vault's processes and the bare proxy, summarised at the end. */
const PROFILE = process.argv.includes('--profile');
/**
 * Calls each serving process gets before anything is measured. V8 compiles a function to
 * optimized code only after it has run enough, and the vault's path is long: warmed for a fixed
 * 700 ms, the split shape's data planes (each with half the calls, at a few hundred a second)
 * still ran most of it as baseline code through the c=1 rounds (ADR 0094). So the warm-up is
 * counted in calls per process, not in time.
 */
const WARMUP_CALLS = Number(process.env.BENCH_WARMUP_CALLS ?? 4_000);
/** The most any one mode's warm-up may take. */
const WARMUP_CAP_MS = 25_000;
const HARD_LIMIT_MS = BUILT ? 300_000 : 150_000;
const ACCOUNT = { email: 'bench@tracker.test', apiToken: `itk_${randomBytes(12).toString('hex')}` };
const BASIC = `Basic ${Buffer.from(`${ACCOUNT.email}:${ACCOUNT.apiToken}`).toString('base64')}`;

// ---------------------------------------------------------------------------------------------
// Child roles

async function runUpstream() {
  const { startMockIssueTracker } = await import('@vlt/test-support/mock-issue-tracker.js');
  const mock = await startMockIssueTracker({
    ...ACCOUNT,
    apiToken: process.env.BENCH_API_TOKEN!,
    tls: { key: process.env.BENCH_TLS_KEY!, cert: process.env.BENCH_TLS_CERT! },
    record: false,
    keepAliveTimeoutMs: 60_000,
  });
  console.log(JSON.stringify({ port: mock.port }));
}

async function runPassthrough() {
  const { default: Fastify } = await import('fastify');
  const basic = process.env.BENCH_BASIC!;
  // Trusts the test CA through NODE_EXTRA_CA_CERTS, like the data plane.
  const upstream = new Agent({ keepAliveTimeout: 30_000 });
  const app = Fastify({ logger: false });
  const stripped = new Set(['authorization', 'cookie', 'host']);
  app.post('/execute', async (req) => {
    const b = req.body as {
      method: string;
      url: string;
      headers?: Record<string, string>;
      query?: Record<string, string>;
      body?: unknown;
    };
    const url = new URL(b.url);
    for (const [k, v] of Object.entries(b.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(b.headers ?? {})) if (!stripped.has(k.toLowerCase())) headers[k] = v;
    headers.authorization = basic;
    let body: string | undefined;
    if (b.body !== undefined) {
      body = typeof b.body === 'string' ? b.body : JSON.stringify(b.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await request(url, { method: b.method as 'GET', headers, body, dispatcher: upstream });
    const text = await res.body.text();
    const json = /json/.test(String(res.headers['content-type'] ?? ''));
    return {
      model: 'B',
      status: res.statusCode,
      headers: res.headers,
      body: json && text ? JSON.parse(text) : text,
    };
  });
  // Exiting, rather than dying of the signal, is what writes a `--cpu-prof` profile.
  process.once('SIGTERM', () => void app.close().finally(() => process.exit(0)));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address();
  console.log(JSON.stringify({ port: typeof addr === 'object' && addr ? addr.port : 0 }));
}

// ---------------------------------------------------------------------------------------------
// Load generation

type Mode = 'direct' | 'passthrough' | 'gateway';

interface Target {
  mode: Mode;
  /** One pool per instance; calls alternate between them (the split shape's two data planes). */
  pools: Pool[];
  send(pool: Pool): Promise<number>;
}

interface Sample {
  latenciesNs: bigint[];
  ok: number;
  errors: number;
  elapsedMs: number;
}

async function round(target: Target, concurrency: number, ms: number, sample: Sample) {
  const until = performance.now() + ms;
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    while (performance.now() < until) {
      const t0 = process.hrtime.bigint();
      try {
        const status = await target.send(target.pools[next++ % target.pools.length]!);
        if (status === 200) {
          sample.ok++;
          sample.latenciesNs.push(process.hrtime.bigint() - t0);
        } else sample.errors++;
      } catch {
        sample.errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  sample.elapsedMs += performance.now() - started;
}

function percentile(sorted: bigint[], p: number): number {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return Number(sorted[Math.max(0, i)]!) / 1e6;
}

function summarize(sample: Sample) {
  const sorted = [...sample.latenciesNs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return {
    requests: sample.ok,
    errors: sample.errors,
    rps: sample.ok / (sample.elapsedMs / 1000),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
  };
}

async function main() {
  const started = Date.now();
  const h = await openBenchHarness('gateway', HARD_LIMIT_MS);
  const { pki, group, freePort, api, dataDir } = h;
  // Kept after the run (the data directory is not), for DevTools.
  const profileRoot = PROFILE ? await mkdtemp(path.join(tmpdir(), 'vlt-bench-profiles-')) : '';
  const profiled = (label: string) => (PROFILE ? cpuProfileArgs(path.join(profileRoot, label)) : []);
  let printProfiles: (() => Promise<void>) | undefined;

  try {
    const upstream = await h.startRole(THIS_FILE, 'upstream', {
      BENCH_TLS_KEY: pki.key,
      BENCH_TLS_CERT: pki.cert,
      BENCH_API_TOKEN: ACCOUNT.apiToken,
    });
    // The processes serving calls report their garbage collection pauses (bench/gc-pauses.mjs).
    const passthrough = await h.startRole(
      THIS_FILE,
      'passthrough',
      { BENCH_BASIC: BASIC, NODE_EXTRA_CA_CERTS: pki.caPath },
      [...GC_PAUSE_ARGS, ...profiled('passthrough')],
    );
    // A host name, as providers have: the data plane resolves it for its SSRF check (ADR 0079).
    const upstreamBase = `https://localhost:${upstream.port}`;

    let built: string | undefined;
    if (BUILT) {
      const { prepareProductionBuild } = await import('@vlt/test-support/production-build.js');
      built = path.join(dataDir, 'app');
      await mkdir(built);
      await prepareProductionBuild(built);
    }
    const port = await freePort();
    const publicBaseUrl = `http://127.0.0.1:${port}`;
    const common = {
      HOST: '127.0.0.1',
      PUBLIC_BASE_URL: publicBaseUrl,
      VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32,::1/128',
      NODE_EXTRA_CA_CERTS: pki.caPath,
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      // Set to compare: 0 resolves the provider's name on every call.
      ...(process.env.VLT_DNS_CACHE_MS && { VLT_DNS_CACHE_MS: process.env.VLT_DNS_CACHE_MS }),
    };
    const masterKey = randomBytes(32).toString('base64');
    let adminBase: string;
    // Split shape: the JetStream publish every call waits for, measured on its own (c=1).
    let jetStream: Awaited<ReturnType<typeof openJetStreamProbe>> | undefined;
    // A database of this run's own on the server at DATABASE_URL, dropped after the services stop.
    const runDatabase = async (runId: string) => {
      const { createRunDatabase } = await import('@vlt/test-support/run-database.js');
      const db = await createRunDatabase(
        process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
        `vlt_bench_${runId}`,
      );
      h.afterServicesStop(db.drop);
      return db;
    };
    let gatewayBases: string[];
    if (SHAPE === 'split') {
      // Production shape, as the performance issue measured it: control plane, two data planes
      // (the agent's calls alternate between them), the audit writer and the notifier over real
      // PostgreSQL and NATS.
      const runId = randomBytes(4).toString('hex');
      const db = await runDatabase(runId);
      const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
      const { purgeNatsPrefix } = await import('@vlt/bus');
      h.afterServicesStop(async () => {
        await purgeNatsPrefix({ servers: natsUrl, prefix: `bench${runId}` });
      });
      const bus = {
        ...common,
        NATS_URL: natsUrl,
        VLT_NATS_PREFIX: `bench${runId}`,
      };
      const cp = await group.start('control-plane', {
        built,
        port,
        env: { ...bus, DATABASE_URL: db.url, VLT_MASTER_KEY: masterKey },
        nodeArgs: profiled('control-plane'),
      });
      const dataPlane = (label: string) =>
        group.start('data-plane', {
          built,
          label,
          env: bus,
          nodeArgs: [...GC_PAUSE_ARGS, ...profiled(label)],
        });
      const [dp1, dp2] = await Promise.all([
        dataPlane('data-plane-1'),
        dataPlane('data-plane-2'),
        group.start('audit', { built, env: { ...bus, DATABASE_URL: db.url }, nodeArgs: profiled('audit') }),
        group.start('notifier', {
          built,
          env: { ...bus, DATABASE_URL: db.url },
          nodeArgs: profiled('notifier'),
        }),
      ]);
      adminBase = cp.baseUrl;
      gatewayBases = [dp1!.baseUrl, dp2!.baseUrl];
      jetStream = await openJetStreamProbe(natsUrl, `benchack${runId}`);
      h.afterServicesStop(() => jetStream!.close());
    } else {
      const database = EXTERNAL_DB
        ? { DATABASE_URL: (await runDatabase(randomBytes(4).toString('hex'))).url }
        : undefined;
      const aio = await group.start('all-in-one', {
        built,
        port,
        env: { ...common, VLT_DATA_DIR: dataDir, VLT_MASTER_KEY: masterKey, ...database },
        nodeArgs: [...GC_PAUSE_ARGS, ...profiled('all-in-one')],
      });
      adminBase = aio.baseUrl;
      gatewayBases = [aio.baseUrl];
    }
    const { user } = await api.signUp(
      adminBase,
      `bench-${Date.now()}@e2e.test`,
      `pw-${randomBytes(8).toString('hex')}`,
    );
    const admin = api.bearerAdmin(adminBase, (await api.apiJwt(adminBase, user.session)).token);
    const { agent, token } = await api.enrolAgent(admin, publicBaseUrl, 'bench-agent');
    const conn = await api.createIssueTrackerConnection(admin, { siteUrl: upstreamBase, ...ACCOUNT });
    const policy = await api.createPolicy(admin, agent.id, conn.connection.id);
    api.expectStatus(
      await api.putAllowlists(admin, policy.policy.id, [
        { baseUrl: upstreamBase, methods: ['GET'], pathPatterns: ['/rest/api/3/myself'] },
      ]),
      200,
    );
    const setupMs = Date.now() - started;

    const upstreamUrl = `${upstreamBase}/rest/api/3/myself`;
    const envelopeBody = JSON.stringify({
      model: 'B',
      connectionId: conn.connection.id,
      method: 'GET',
      url: upstreamUrl,
    });
    const readJson = async (res: Awaited<ReturnType<Pool['request']>>) => {
      JSON.parse(await res.body.text());
      return res.statusCode;
    };
    const pools: Pool[] = [];
    const pool = (origin: string, tls = false) => {
      const p = new Pool(origin, { connections: SATURATION, ...(tls ? { connect: { ca: pki.caPem } } : {}) });
      pools.push(p);
      return p;
    };
    const targets: Target[] = [
      {
        mode: 'direct',
        pools: [pool(upstreamBase, true)],
        send: async (p) =>
          readJson(
            await p.request({ method: 'GET', path: '/rest/api/3/myself', headers: { authorization: BASIC } }),
          ),
      },
      {
        mode: 'passthrough',
        pools: [pool(`http://127.0.0.1:${passthrough.port}`)],
        send: async (p) =>
          readJson(
            await p.request({
              method: 'POST',
              path: '/execute',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ method: 'GET', url: upstreamUrl }),
            }),
          ),
      },
      {
        mode: 'gateway',
        pools: gatewayBases.map((b) => pool(b)),
        send: async (p) =>
          readJson(
            await p.request({
              method: 'POST',
              path: '/v1/vault/execute',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
              body: envelopeBody,
            }),
          ),
      },
    ];
    h.onClose(() => Promise.all(pools.map((p) => p.close())));

    // Sanity: each path answers 200 before anything is measured.
    for (const t of targets) {
      for (const p of t.pools) {
        const status = await t.send(p);
        if (status !== 200) throw new Error(`${t.mode} answered ${status} on the first call`);
      }
    }
    // Warm-up (JIT, connection pools, caches); not recorded. WARMUP_CALLS per serving process.
    const warmupStarted = performance.now();
    for (const t of targets) {
      const warm = { latenciesNs: [], ok: 0, errors: 0, elapsedMs: 0 };
      const end = performance.now() + WARMUP_CAP_MS;
      while (warm.ok + warm.errors < WARMUP_CALLS * t.pools.length && performance.now() < end) {
        await round(t, 8, 500, warm);
      }
    }
    const warmupMs = performance.now() - warmupStarted;
    console.error(`gateway bench: warmed up in ${(warmupMs / 1000).toFixed(1)} s; measuring`);

    // CPU the vault processes burn during each mode's rounds: their own load, and any backlog
    // (audit writes) that would otherwise silently tax the other modes' rounds.
    const aioCpu = new Map<string, number>();
    const passCpu = new Map<string, number>();
    // The same, process by process (gateway rounds only): where the vault's CPU goes.
    const byProcessCpu = new Map<string, Map<string, number>>();
    const processCpu = async () =>
      new Map(
        (
          await Promise.all(
            group.processes.map(async (p) => [
              [p.label, await procCpuSeconds(p.pid)] as const,
              [`${p.label} main thread`, await mainThreadCpuSeconds(p.pid)] as const,
            ]),
          )
        ).flat(),
      );
    const cpuSeconds = async () => {
      let total = 0;
      for (const p of group.processes) total += await procCpuSeconds(p.pid);
      return total;
    };
    const passthroughCpu = () => procCpuSeconds(passthrough.child.pid);
    const passMainCpu = new Map<string, number>();
    // The whole machine during each mode's rounds: the load generator (this process), the
    // upstream, the PostgreSQL and NATS servers, and how busy the cores were. Everything shares
    // the same cores, so once they are busy, throughput is bound by the CPU of a call summed
    // over all of these, not by the proxy's share alone.
    const machine = new Map<string, MachineCpu>();
    const serversCpu = async () => {
      const [upstreamCpu, postgres, nats] = await Promise.all([
        procCpuSeconds(upstream.child.pid),
        commandCpuSeconds('postgres'),
        commandCpuSeconds('nats-server'),
      ]);
      return { upstream: upstreamCpu, postgres, nats };
    };
    // Main-thread pauses for garbage collection of the process(es) serving a mode, during that
    // mode's rounds: the line counts of their output before a round, and the pauses since.
    const serving = group.processes.filter(
      (p) => p.label === 'all-in-one' || p.label.startsWith('data-plane'),
    );
    const outputMarks = (mode: Mode): number[] =>
      mode === 'gateway'
        ? serving.map((p) => p.lines.length)
        : mode === 'passthrough'
          ? [passthrough.stderr.length]
          : [];
    const pausesSince = (mode: Mode, marks: number[]): GcPause[] =>
      mode === 'gateway'
        ? serving.flatMap((p, i) => gcPausesIn(p.lines.slice(marks[i]).map((l) => l.text)))
        : mode === 'passthrough'
          ? gcPausesIn(passthrough.stderr.slice(marks[0]))
          : [];
    const pauses = new Map<string, GcPause[]>();
    const results = new Map<string, Sample>();
    const jetStreamAck: number[] = [];
    const measured: ProfileWindow = { fromUs: monotonicUs(), toUs: Infinity };
    for (const concurrency of [1, SATURATION]) {
      for (let r = 0; r < ROUNDS; r++) {
        for (const t of targets) {
          const key = `${t.mode}@${concurrency}`;
          const sample = results.get(key) ?? { latenciesNs: [], ok: 0, errors: 0, elapsedMs: 0 };
          results.set(key, sample);
          const [cpu0, pass0, each0] = [await cpuSeconds(), await passthroughCpu(), await processCpu()];
          const marks0 = outputMarks(t.mode);
          const passMain0 = await mainThreadCpuSeconds(passthrough.child.pid);
          const servers0 = await serversCpu();
          const cores0 = await machineCpuSeconds();
          const loadGenerator0 = process.cpuUsage();
          await round(t, concurrency, ROUND_MS, sample);
          const loadGenerator = process.cpuUsage(loadGenerator0);
          const cores = await machineCpuSeconds();
          const servers = await serversCpu();
          const m = machine.get(key) ?? {
            loadGenerator: 0,
            upstream: 0,
            postgres: 0,
            nats: 0,
            busy: 0,
            total: 0,
          };
          machine.set(key, {
            loadGenerator: m.loadGenerator + (loadGenerator.user + loadGenerator.system) / 1e6,
            upstream: m.upstream + servers.upstream - servers0.upstream,
            postgres: m.postgres + cpuSecondsBetween(servers0.postgres, servers.postgres),
            nats: m.nats + cpuSecondsBetween(servers0.nats, servers.nats),
            busy: m.busy + cores.busy - cores0.busy,
            total: m.total + cores.total - cores0.total,
          });
          aioCpu.set(key, (aioCpu.get(key) ?? 0) + (await cpuSeconds()) - cpu0);
          if (t.mode === 'gateway') {
            const spent = byProcessCpu.get(key) ?? new Map<string, number>();
            byProcessCpu.set(key, spent);
            for (const [label, s] of await processCpu()) {
              spent.set(label, (spent.get(label) ?? 0) + s - (each0.get(label) ?? 0));
            }
          }
          passCpu.set(key, (passCpu.get(key) ?? 0) + (await passthroughCpu()) - pass0);
          const passMain = (await mainThreadCpuSeconds(passthrough.child.pid)) - passMain0;
          passMainCpu.set(key, (passMainCpu.get(key) ?? 0) + passMain);
          if (jetStream && concurrency === 1 && t.mode === 'gateway') {
            for (const end = performance.now() + ROUND_MS / 5; performance.now() < end;) {
              jetStreamAck.push(await jetStream.publishMs());
            }
          }
          // Let asynchronous work of the previous mode (audit writes) settle before the next one.
          await new Promise((res) => setTimeout(res, 150));
          // After the settling, so that the reports of the round's last pauses have arrived.
          if (t.mode !== 'direct') {
            pauses.set(key, [...(pauses.get(key) ?? []), ...pausesSince(t.mode, marks0)]);
          }
        }
      }
    }
    measured.toUs = monotonicUs();

    const rows = [...results].map(([key, sample]) => {
      const [mode, c] = key.split('@') as [Mode, string];
      const calls = sample.ok + sample.errors;
      // CPU per call of the process(es) doing the proxying: the vault's for the gateway, the
      // bare proxy's for passthrough (PostgreSQL and NATS servers excluded in both).
      const proxyCpu =
        mode === 'gateway' ? aioCpu.get(key) : mode === 'passthrough' ? passCpu.get(key) : undefined;
      return {
        mode,
        concurrency: Number(c),
        aioCpu: (100 * (aioCpu.get(key) ?? 0)) / (sample.elapsedMs / 1000),
        cpuMsPerCall: proxyCpu === undefined || calls === 0 ? NaN : (proxyCpu * 1000) / calls,
        ...summarize(sample),
      };
    });
    const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-');
    console.log(
      `\nGateway benchmark (${SHAPE} shape${EXTERNAL_DB && SHAPE !== 'split' ? ' on PostgreSQL' : ''}${BUILT ? ', production build' : ''}): ${ROUNDS} interleaved rounds of ${ROUND_MS} ms per mode and concurrency; setup ${(setupMs / 1000).toFixed(1)} s; warm-up ${WARMUP_CALLS} calls per serving process, ${(warmupMs / 1000).toFixed(1)} s; node ${process.version}`,
    );
    console.log(
      'mode         conc   requests    req/s   p50 ms   p99 ms  errors  vault-processes CPU %  proxy CPU ms/call',
    );
    for (const r of rows) {
      console.log(
        `${r.mode.padEnd(12)} ${String(r.concurrency).padStart(4)} ${String(r.requests).padStart(10)} ${fmt(r.rps, 0).padStart(8)} ${fmt(r.p50).padStart(8)} ${fmt(r.p99).padStart(8)} ${String(r.errors).padStart(7)} ${fmt(r.aioCpu, 0).padStart(8)} ${fmt(r.cpuMsPerCall, 3).padStart(18)}`,
      );
    }
    const get = (mode: Mode, c: number) => rows.find((r) => r.mode === mode && r.concurrency === c)!;
    for (const c of [1, SATURATION]) {
      const calls = get('gateway', c).requests;
      const parts = [...(byProcessCpu.get(`gateway@${c}`) ?? [])].map(
        ([label, s]) => `${label} ${fmt((s * 1000) / calls, 3)}`,
      );
      const passMain = (1000 * (passMainCpu.get(`passthrough@${c}`) ?? NaN)) / get('passthrough', c).requests;
      console.log(
        `gateway CPU ms/call by process at c=${c}: ${parts.join(', ')} (passthrough main thread ${fmt(passMain, 3)})`,
      );
    }
    printPauses(rows, pauses);
    const throughputBar = SHAPE === 'split' ? 0.5 : 0.85;
    printMachineBound(
      rows.map((r) => ({ ...r, machine: machine.get(`${r.mode}@${r.concurrency}`)! })),
      throughputBar,
    );
    {
      // The other bound: one event loop serves at most one call per main-thread CPU ms of a call.
      const gS = get('gateway', SATURATION);
      const pS = get('passthrough', SATURATION);
      const [label, seconds] = [...(byProcessCpu.get(`gateway@${SATURATION}`) ?? [])]
        .filter(([l]) => l.endsWith(' main thread'))
        .reduce((a, b) => (b[1] > a[1] ? b : a), ['-', 0] as [string, number]);
      const ms = (seconds * 1000) / gS.requests;
      console.log(
        `  event-loop bound: the busiest vault main thread (${label}) ${fmt(ms, 3)} ms per call → ≤ ${fmt(1000 / ms, 0)} req/s = ${fmt(1000 / ms / pS.rps)} × passthrough; ` +
          `${throughputBar} × needs it within ${fmt(1000 / (throughputBar * pS.rps), 3)} ms`,
      );
    }
    const g1 = get('gateway', 1);
    const gS = get('gateway', SATURATION);
    for (const base of ['direct', 'passthrough'] as const) {
      const b1 = get(base, 1);
      const bS = get(base, SATURATION);
      console.log(
        `gateway vs ${base.padEnd(11)}: p50 added at c=1 ${fmt(g1.p50 - b1.p50)} ms (p99 ${fmt(g1.p99 - b1.p99)} ms); throughput ratio at c=${SATURATION} ${fmt(gS.rps / bS.rps)}`,
      );
    }
    const p = get('passthrough', 1);
    const pS = get('passthrough', SATURATION);
    if (jetStreamAck.length > 0) {
      // A floor under the added latency that no code change in the data plane removes: its
      // `execution_requested` must be stored before the provider is called.
      const xs = [...jetStreamAck].sort((a, b) => a - b);
      const ack = xs[Math.floor(xs.length / 2)]!;
      console.log(
        `JetStream publish, acked, c=1 (the record each call waits for): p50 ${fmt(ack)} ms, p99 ${fmt(xs[Math.floor(xs.length * 0.99)]!)} ms over ${xs.length}; ` +
          `added p50 over passthrough less that: ${fmt(g1.p50 - p.p50 - ack)} ms`,
      );
    }
    // The performance issue's targets (throughputBar above); the split shape shares two cores
    // with PostgreSQL, NATS and the audit service, hence its lower throughput bar.
    const cpuRatio = g1.cpuMsPerCall / p.cpuMsPerCall;
    const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
    console.log(
      [
        `targets: added p50 ≤ 1 ms → ${verdict(g1.p50 - p.p50 <= 1)}`,
        `added p99 ≤ 2 ms → ${verdict(g1.p99 - p.p99 <= 2)}`,
        `throughput ≥ ${throughputBar} × passthrough → ${verdict(gS.rps / pS.rps >= throughputBar)}`,
        `CPU per call ≤ 2 × passthrough (now ${fmt(cpuRatio, 1)} ×) → ${verdict(cpuRatio <= 2)}`,
      ].join('; '),
    );
    console.log(`total ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (PROFILE) {
      const gatewayCalls = get('gateway', 1).requests + get('gateway', SATURATION).requests;
      const passthroughCalls = get('passthrough', 1).requests + get('passthrough', SATURATION).requests;
      const profiles = [
        ...group.processes.map((p) => ({
          label: p.label,
          dir: path.join(profileRoot, p.label),
          calls: gatewayCalls,
          per: 'gateway call',
        })),
        {
          label: 'passthrough',
          dir: path.join(profileRoot, 'passthrough'),
          calls: passthroughCalls,
          per: 'passthrough call',
        },
      ];
      // The processes write their profiles as they exit, after the services are stopped.
      printProfiles = async () => {
        console.log(
          `CPU profiles over the measured rounds, c=1 and c=${SATURATION} (files in ${profileRoot}):`,
        );
        await printCpuProfiles(profiles, measured);
      };
    }
  } finally {
    await h.close();
  }
  await printProfiles?.();
}

/**
 * The main-thread pauses for garbage collection of the process(es) serving each mode, during its
 * own rounds. At c=1 a call that meets a pause waits for all of it, so once more than 1 % of the
 * calls meet one, the pauses are within the p99 whatever the calls' own work costs (ADR 0083).
 * At saturation a pause holds every call in flight; the pause time per call is what counts.
 */
function printPauses(
  rows: ReadonlyArray<{ mode: Mode; concurrency: number; requests: number }>,
  pauses: ReadonlyMap<string, readonly GcPause[]>,
) {
  const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  const share = new Map<Mode, number>();
  console.log(
    'main-thread pauses for garbage collection of the process(es) serving each mode, during its rounds:',
  );
  console.log(
    'mode         conc      calls  scavenges  median ms   p90 ms  other pauses  pause ms/call  calls meeting one',
  );
  for (const r of rows) {
    const all = pauses.get(`${r.mode}@${r.concurrency}`);
    if (!all) continue;
    const scavenges = all
      .filter((p) => p.kind === 'minor')
      .map((p) => p.ms)
      .sort((a, b) => a - b);
    const at = (q: number) =>
      scavenges[Math.min(scavenges.length - 1, Math.floor(q * scavenges.length))] ?? NaN;
    const perCall = all.reduce((sum, p) => sum + p.ms, 0) / r.requests;
    const meeting = r.concurrency === 1 ? Math.min(1, all.length / r.requests) : NaN;
    if (r.concurrency === 1) share.set(r.mode, meeting);
    console.log(
      `${r.mode.padEnd(12)} ${String(r.concurrency).padStart(4)} ${String(r.requests).padStart(10)} ${String(scavenges.length).padStart(10)} ${fmt(at(0.5)).padStart(10)} ${fmt(at(0.9)).padStart(8)} ${String(all.length - scavenges.length).padStart(13)} ${fmt(perCall, 3).padStart(14)} ${(Number.isFinite(meeting) ? `${fmt(100 * meeting)} %` : '-').padStart(18)}`,
    );
  }
  const g = share.get('gateway');
  if (g !== undefined) {
    console.log(
      `  at c=1, ${fmt(100 * g)} % of the gateway's calls met a pause (passthrough's: ${fmt(100 * (share.get('passthrough') ?? NaN))} %); ` +
        `above 1 %, the pauses are within its p99 (ADR 0083)`,
    );
  }
}

interface MachineCpu {
  /** CPU seconds over the mode's rounds. */
  loadGenerator: number;
  upstream: number;
  postgres: number;
  nats: number;
  /** The cores' busy and elapsed seconds, summed over cores. */
  busy: number;
  total: number;
}

/**
 * CPU per call at saturation over every process of the machine, and what it implies: while the
 * cores are busy, req/s ≈ cores ÷ (CPU per call, summed), so the throughput ratio of two modes
 * is bound by the inverse ratio of their sums. Printed with what a target leaves the vault and
 * its PostgreSQL and NATS servers, and the ratio a vault as cheap as the bare proxy would reach
 * with today's servers: where that is below the target, no change to the vault's code meets it.
 */
function printMachineBound(
  rows: ReadonlyArray<{
    mode: Mode;
    concurrency: number;
    requests: number;
    rps: number;
    cpuMsPerCall: number;
    machine: MachineCpu;
  }>,
  throughputBar: number,
) {
  const fmt = (n: number, d = 3) => (Number.isFinite(n) ? n.toFixed(d) : '-');
  const at = rows.filter((r) => r.concurrency === SATURATION);
  const perCall = (r: (typeof at)[number]) => {
    const ms = (s: number) => (s * 1000) / r.requests;
    const proxy = Number.isFinite(r.cpuMsPerCall) ? r.cpuMsPerCall : 0;
    const clients = ms(r.machine.loadGenerator) + ms(r.machine.upstream);
    const servers = ms(r.machine.postgres) + ms(r.machine.nats);
    return { proxy, clients, servers, total: proxy + clients + servers, ms };
  };
  console.log(
    `whole machine at c=${SATURATION}, CPU ms per call (PostgreSQL and NATS servers included; cores busy = share of the machine's CPU time):`,
  );
  console.log('mode         load-gen  upstream     proxy  postgres      nats     total  cores busy');
  for (const r of at) {
    const c = perCall(r);
    console.log(
      `${r.mode.padEnd(12)} ${fmt(c.ms(r.machine.loadGenerator)).padStart(8)} ${fmt(c.ms(r.machine.upstream)).padStart(9)} ${fmt(c.proxy).padStart(9)} ${fmt(c.ms(r.machine.postgres)).padStart(9)} ${fmt(c.ms(r.machine.nats)).padStart(9)} ${fmt(c.total).padStart(9)} ${fmt((100 * r.machine.busy) / r.machine.total, 0).padStart(10)} %`,
    );
  }
  const pass = at.find((r) => r.mode === 'passthrough');
  const gateway = at.find((r) => r.mode === 'gateway');
  if (!pass || !gateway) return;
  const p = perCall(pass);
  const g = perCall(gateway);
  const busy = gateway.machine.busy / gateway.machine.total;
  console.log(
    `throughput bound by CPU: passthrough ${fmt(p.total)} ÷ gateway ${fmt(g.total)} ms per call = ${fmt(p.total / g.total, 2)} × ` +
      `(measured ${fmt(gateway.rps / pass.rps, 2)} ×; cores ${fmt(100 * busy, 0)} % busy` +
      `${busy < 0.95 ? ': not all busy, so one event loop, not the cores, was the limit' : ''})`,
  );
  // Generous to the gateway: its load generator and upstream cost per call what they do at the
  // bare proxy's (higher) rate. What is left of the bar is all the vault and its servers may use.
  const budget = p.total / throughputBar - p.clients;
  console.log(
    `  ${throughputBar} × needs the vault and its PostgreSQL and NATS servers within ${fmt(budget)} ms per call; ` +
      `now ${fmt(g.proxy + g.servers)} (vault ${fmt(g.proxy)}, servers ${fmt(g.servers)}); ` +
      `a vault as cheap as the bare proxy with today's servers: ≤ ${fmt(p.total / (p.total + g.servers), 2)} ×`,
  );
}

const role = process.argv.find((a) => a.startsWith('--role='))?.slice('--role='.length) ?? 'main';
if (role === 'upstream') await runUpstream();
else if (role === 'passthrough') await runPassthrough();
else await main();
