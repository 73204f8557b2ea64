/**
 * Model A (token vending) throughput: `pnpm bench model-a` (bounded to 90 s).
 *
 * The all-in-one gateway runs in this process (real PostgreSQL when DATABASE_URL is set or
 * 127.0.0.1:5432 answers, on a throw-away database; embedded PGlite otherwise; the in-process
 * bus, as bench/token-endpoint.ts). It trusts a local HTTPS mock OAuth provider
 * (tests/support/mock-providers.ts, `VLT_SUITE_A_*` pointed at it) through the test CA (the
 * `upstreamCa` seam) and `VLT_SSRF_ALLOW_CIDRS=127.0.0.1/32`, and this process as its edge
 * proxy (every control-plane client gets its own X-Forwarded-For address, so the per-IP limits
 * never answer instead of the endpoints).
 *
 * Everything is set up over the public API, like tests/connections: an admin signs up, AGENTS
 * agents are enrolled, one suite_a-mail connection is made through the OAuth flow (start with
 * `agentId` and `allowedModels: ['A','B']`, the mock's authorize endpoint, its redirect to
 * `/v1/connections/callback`), and the other agents get a policy allowing A and B on it.
 *
 * Measured, interleaved round by round at concurrency 1 and 16, against the same process:
 *   /health     the baseline (absolute numbers on a shared machine are noise; ratios are the result),
 *   model-a     `POST /v1/vault/execute {model:'A', connectionId}` with agent bearer tokens, spread
 *               round-robin over AGENTS agents as a gateway with many agents sees them. The mock
 *               issued a one-hour access token, so every vend is a warm token: a cache read, a
 *               policy decision and a durable `token_vended` audit event, no provider refresh
 *               (the refreshes the mock saw during the run are printed to prove it);
 *   token       the agent token endpoint (`POST /v1/agents/token`), as bench/token-endpoint.ts
 *               does it: a fresh ES256 client assertion per request, signed before its round.
 *
 * A vend answers once the bus holds its `token_vended` event; the audit writer stores it in the
 * database behind the answers. On PostgreSQL the run ends by counting the stored rows against
 * the vends answered and watching the backlog drain for a few seconds (printed, not judged).
 *
 * Target: warm-token vending ≥ 0.15 × /health throughput at c=16. Every answer must be 200; any
 * other status is counted and reported. This prints; it never fails on numbers.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import pg from 'pg';
import { Pool } from 'undici';
import { serviceSpec } from '@vlt/contracts';
import { createPolicy } from '@vlt/test-support/api-client.js';
import { agentToken, enrolledAgent, newUser, type TestAgent } from '@vlt/test-support/identity-harness.js';
import {
  connectOAuth,
  providerEnv,
  startMockProviders,
  type MockProviders,
} from '@vlt/test-support/mock-providers.js';
import { createTestPki } from '@vlt/test-support/test-pki.js';
import { benchDatabase, installWatchdog, startBenchGateway } from './support.js';

const HARD_LIMIT_MS = 90_000;
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = [1, 16];
const AGENTS = Number(process.env.BENCH_AGENTS ?? 16);
const TARGET = 0.15;
const SERVICE = 'suite_a-mail';
/** How long to watch the audit writer catch up after the rounds. */
const AUDIT_WAIT_MS = 5_000;

const started = Date.now();
let cleanup: () => Promise<void> = async () => {};
installWatchdog('model-a', HARD_LIMIT_MS, () => cleanup);

let ipCounter = 0;
/** A new client address per token request (172.16.0.0/12, apart from the set-up helpers' 10/8). */
function nextIp(): string {
  ipCounter += 1;
  return `172.${16 + ((ipCounter >> 16) & 15)}.${(ipCounter >> 8) & 255}.${ipCounter & 255}`;
}

interface Result {
  ok: number;
  /** Status → count; 0 is a request that failed without an answer. */
  errors: Map<number, number>;
  latencies: number[];
  elapsedMs: number;
}

interface Req {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** Runs `make(i)` requests with `concurrency` in flight for `durationMs`. */
async function measure(
  pool: Pool,
  concurrency: number,
  durationMs: number,
  make: (i: number) => Req,
): Promise<Result> {
  const latencies: number[] = [];
  const errors = new Map<number, number>();
  let ok = 0;
  let i = 0;
  const t0 = performance.now();
  const deadline = t0 + durationMs;
  async function worker() {
    while (performance.now() < deadline) {
      const req = make(i++);
      const s = performance.now();
      let status = 0;
      try {
        const res = await pool.request(req);
        await res.body.dump();
        status = res.statusCode;
      } catch {
        status = 0;
      }
      latencies.push(performance.now() - s);
      if (status === 200) ok++;
      else errors.set(status, (errors.get(status) ?? 0) + 1);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ok, errors, latencies, elapsedMs: performance.now() - t0 };
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const settle = () => new Promise((r) => setTimeout(r, 150));

async function main() {
  const db = await benchDatabase('model_a');
  const pki = await createTestPki();
  let mock: MockProviders | undefined;
  // Whatever happens (start-up failure, the hard time limit), the throw-away database goes.
  cleanup = async () => {
    await mock?.close().catch(() => undefined);
    await pki.dispose().catch(() => undefined);
    await db?.drop();
  };
  try {
    mock = await startMockProviders({ pki });
    await run(db, mock);
  } finally {
    await cleanup();
  }
}

async function run(db: { url: string } | null, mock: MockProviders) {
  // A one-hour provider token: every vend in the run is warm (nothing to refresh).
  mock.accessTokenExpiresIn = 3600;
  mock.refreshExpiresIn = 3600;

  const gateway = await startBenchGateway(
    'model-a',
    {
      VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32',
      ...providerEnv(mock, ['suite_a']),
      ...(db ? { DATABASE_URL: db.url } : {}),
    },
    { upstreamCa: [mock.pki.caPem] },
  );
  const base = gateway.base;
  const pool = new Pool(base, { connections: Math.max(...CONCURRENCY), keepAliveTimeout: 30_000 });

  try {
    // An admin, AGENTS enrolled agents and one OAuth connection, over the API like a real client.
    const owner = await newUser(base, 'bench-model-a');
    const agents: (TestAgent & { token: string })[] = [];
    for (let n = 0; n < AGENTS; n++) {
      const agent = await enrolledAgent(owner.admin);
      agents.push({ ...agent, token: await agentToken(base, agent) });
    }
    const { connection } = await connectOAuth(
      { admin: owner.admin, mock },
      {
        service: SERVICE,
        scopes: [...serviceSpec(SERVICE)!.defaultScopes],
        agentId: agents[0]!.id,
        allowedModels: ['A', 'B'],
      },
    );
    for (const a of agents.slice(1)) {
      await createPolicy(owner.admin, a.id, connection.id, { allowedModels: ['A', 'B'] });
    }
    const setupMs = Date.now() - started;

    const vendBody = JSON.stringify({ model: 'A', connectionId: connection.id });
    const vend = (i: number): Req => ({
      method: 'POST',
      path: '/v1/vault/execute',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${agents[i % agents.length]!.token}`,
      },
      body: vendBody,
    });
    const health = (): Req => ({ method: 'GET', path: '/health', headers: {} });

    // Sanity: every agent gets the provider's token before anything is measured.
    const issued = mock.lastIssued(mock.deploymentApp('suite_a').clientId);
    for (let n = 0; n < agents.length; n++) {
      const res = await pool.request(vend(n));
      const text = await res.body.text();
      if (res.statusCode !== 200) {
        throw new Error(`Model A for agent ${n} answered ${res.statusCode}: ${text.slice(0, 400)}`);
      }
      const body = JSON.parse(text) as { model: string; accessToken: string; expiresIn: number };
      if (body.model !== 'A' || body.accessToken !== issued?.accessToken) {
        throw new Error(`Model A answered an unexpected body: model ${body.model}, not the issued token`);
      }
    }

    const sign = (a: TestAgent) => {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({})
        .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
        .setIssuer(a.id)
        .setSubject(a.id)
        .setAudience(base)
        .setIssuedAt(now)
        .setExpirationTime(now + 60)
        .setJti(randomUUID())
        .sign(a.keys.privateKey);
    };
    const tokenBody = (assertion: string) =>
      JSON.stringify({
        grant_type: 'client_assertion',
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: assertion,
      });
    const tokenReq = (assertion: string): Req => ({
      method: 'POST',
      path: '/v1/agents/token',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': nextIp() },
      body: tokenBody(assertion),
    });

    // Warm-up: JIT, connection pools, prepared statements, caches. Not recorded.
    const warm = await Promise.all(Array.from({ length: 40 }, (_, i) => sign(agents[i % agents.length]!)));
    await measure(pool, 4, 600, (i) => tokenReq(warm[i % warm.length]!));
    const warmVends = await measure(pool, 8, 800, vend);
    await measure(pool, 8, 300, health);
    await settle();
    const refreshesBefore = mock.refreshCount;
    const tokenRequestsBefore = mock.tokenRequests.length;

    const totals = new Map<string, Result[]>();
    const add = (k: string, r: Result) => totals.set(k, [...(totals.get(k) ?? []), r]);
    /** Enough pre-signed assertions for one round at the best rate seen so far (plus margin). */
    const bestTokenRps = new Map<number, number>();
    const tokenRound = async (c: number) => {
      const need = Math.ceil((((bestTokenRps.get(c) ?? 400) * ROUND_MS) / 1000) * 1.5) + 50;
      const assertions = await Promise.all(
        Array.from({ length: need }, (_, i) => sign(agents[i % agents.length]!)),
      );
      let short = 0;
      const r = await measure(pool, c, ROUND_MS, (i) => {
        // Out of pre-signed assertions (faster than expected): a reuse is a replay (401) and shows as non-200.
        if (i >= assertions.length) short++;
        return tokenReq(assertions[Math.min(i, assertions.length - 1)]!);
      });
      if (short) console.warn(`token c${c}: ${short} requests ran out of pre-signed assertions`);
      bestTokenRps.set(c, Math.max(bestTokenRps.get(c) ?? 0, (r.ok * 1000) / r.elapsedMs));
      add(`token c${c}`, r);
    };
    for (let round = 0; round < ROUNDS; round++) {
      for (const c of CONCURRENCY) {
        add(`health c${c}`, await measure(pool, c, ROUND_MS, health));
        await settle();
        add(`model-a c${c}`, await measure(pool, c, ROUND_MS, vend));
        // A short pause between rows; the audit writer's backlog of `token_vended` rows is not
        // waited out (it would take longer than the run): it drains during the following rows.
        await settle();
        await tokenRound(c);
        await settle();
      }
    }
    const refreshes = mock.refreshCount - refreshesBefore;
    const providerTokenCalls = mock.tokenRequests.length - tokenRequestsBefore;

    const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-');
    const sum = (k: string) => (totals.get(k) ?? []).reduce((a, r) => a + r.ok, 0);
    const summary = (k: string) => {
      const rs = totals.get(k)!;
      const ok = rs.reduce((a, r) => a + r.ok, 0);
      const ms = rs.reduce((a, r) => a + r.elapsedMs, 0);
      const lat = rs.flatMap((r) => r.latencies).sort((a, b) => a - b);
      const errors = new Map<number, number>();
      for (const r of rs) for (const [s, n] of r.errors) errors.set(s, (errors.get(s) ?? 0) + n);
      return {
        rps: (ok * 1000) / ms,
        p50: quantile(lat, 0.5),
        p99: quantile(lat, 0.99),
        n: lat.length,
        errors,
      };
    };

    // The audit writer stores `token_vended` behind the answers (the vend waits only for the bus
    // to take the event): how far behind it was when the rounds ended, and how fast it catches up.
    const vended = agents.length + warmVends.ok + CONCURRENCY.reduce((a, c) => a + sum(`model-a c${c}`), 0);
    let auditLine = 'token_vended audit rows: not counted (embedded PGlite)';
    if (db) {
      const sql = new pg.Client({ connectionString: db.url });
      await sql.connect();
      try {
        const stored = async () =>
          Number(
            (
              await sql.query<{ n: string }>(
                "SELECT count(*) AS n FROM audit_events WHERE action = 'token_vended'",
              )
            ).rows[0]!.n,
          );
        const t0 = performance.now();
        const atEnd = await stored();
        let now = atEnd;
        const waitUntil = t0 + Math.min(AUDIT_WAIT_MS, started + HARD_LIMIT_MS - 12_000 - Date.now());
        while (now < vended && performance.now() < waitUntil) {
          await new Promise((r) => setTimeout(r, 100));
          now = await stored();
        }
        const waited = (performance.now() - t0) / 1000;
        auditLine =
          `token_vended audit rows: ${vended} vends answered, ${atEnd} stored when the rounds ended ` +
          `(backlog ${vended - atEnd}); ` +
          (now >= vended
            ? `all stored ${fmt(waited, 1)} s later`
            : `${now - atEnd} more stored in the next ${fmt(waited, 1)} s (${fmt((now - atEnd) / waited, 0)} rows/s), ${vended - now} still behind`);
      } finally {
        await sql.end();
      }
    }

    console.log(
      `Model A vending and agent token endpoint vs /health, in-process all-in-one on ${db ? 'PostgreSQL' : 'embedded PGlite'}, ` +
        `${AGENTS} agents round-robin, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms; setup ${(setupMs / 1000).toFixed(1)} s; node ${process.version}`,
    );
    console.log('endpoint   conc     req/s    p50 ms    p99 ms  requests  vs /health  non-200');
    let nonOk = 0;
    for (const c of CONCURRENCY) {
      const h = summary(`health c${c}`);
      for (const name of ['health', 'model-a', 'token']) {
        const s = summary(`${name} c${c}`);
        const bad = [...s.errors].map(([st, n]) => `${n}×${st === 0 ? 'no-answer' : st}`).join(' ') || '0';
        nonOk += [...s.errors.values()].reduce((a, n) => a + n, 0);
        console.log(
          `${name.padEnd(9)} ${String(c).padStart(5)} ${fmt(s.rps, 0).padStart(9)} ${fmt(s.p50).padStart(9)} ${fmt(s.p99).padStart(9)} ${String(s.n).padStart(9)} ${fmt(s.rps / h.rps, 3).padStart(11)}  ${bad}`,
        );
      }
    }
    const ratio = summary('model-a c16').rps / summary('health c16').rps;
    console.log(
      `target: warm-token vending ≥ ${TARGET} × /health throughput at c=16 → ${ratio >= TARGET ? 'met' : 'NOT met'} (${fmt(ratio, 3)})`,
    );
    console.log(
      `token endpoint / /health at c=16: ${fmt(summary('token c16').rps / summary('health c16').rps, 3)} (no target; reported)`,
    );
    console.log(
      `provider calls during the measured rounds: ${refreshes} refreshes, ${providerTokenCalls} token-endpoint requests (warm: expected 0)`,
    );
    console.log(auditLine);
    if (nonOk)
      console.log(`${nonOk} non-200 answers (counted above; excluded from req/s, included in latencies)`);
    console.log(`total ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } finally {
    await pool.close();
    await gateway.close();
  }
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    console.error(`model-a bench failed: ${err.stack ?? err.message}`);
    process.exit(1);
  },
);
