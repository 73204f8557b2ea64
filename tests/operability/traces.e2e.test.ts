/**
 * One readable trace per call, across the split shape's processes: each service exports to an
 * OTLP/HTTP (JSON) receiver run by this test. An agent's call must read as one trace: the data
 * plane's route span, the upstream call, the durable publish of its events, and their
 * consumption by the audit service down to its database statement (the batch's, through its
 * link when another event opened the batch). A control-plane change whose event goes through
 * the outbox continues the admin request's trace. No span carries source text, a token, a
 * credential or a query value.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiJwt,
  bearerAdmin,
  createIssueTrackerConnection,
  createPolicy,
  enrolAgent,
  execute,
  http,
  signUp,
  type Admin,
} from '../support/api-client.js';
import { startE2eFixtures, type E2eFixtures } from '../support/e2e-fixtures.js';
import { ProcessGroup, freePort, sleep, type ServiceProcess } from '../support/processes.js';
import { ownDatabase, realServices } from '../support/services.js';

const unavailable = !realServices.hasPostgres() || !realServices.hasNats();

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  links?: { traceId: string; spanId: string }[];
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
}
interface ExportedSpan extends OtlpSpan {
  service: string;
}

/** OTLP kinds: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
const KIND = { server: 2, client: 3, producer: 4, consumer: 5 } as const;

function startReceiver(): Promise<{ server: Server; url: string; spans: ExportedSpan[]; raw: string[] }> {
  const spans: ExportedSpan[] = [];
  const raw: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      raw.push(body);
      const doc = JSON.parse(body) as {
        resourceSpans: {
          resource: { attributes: { key: string; value: { stringValue?: string } }[] };
          scopeSpans: { spans: OtlpSpan[] }[];
        }[];
      };
      for (const rs of doc.resourceSpans ?? []) {
        const service =
          rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '?';
        for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, service });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, raw }),
    ),
  );
}

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v ? Object.values(v)[0] : undefined;
};

describe.skipIf(unavailable)(`traces across the split shape ${realServices.missing()}`, () => {
  const group = new ProcessGroup();
  let fx: E2eFixtures;
  let db: Awaited<ReturnType<typeof ownDatabase>> | undefined;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let cp: ServiceProcess;
  let dp: ServiceProcess;
  let admin: Admin;

  beforeAll(async () => {
    [fx, db] = await Promise.all([startE2eFixtures(), ownDatabase('traces')]);
    receiver = await startReceiver();
    const cpPort = await freePort();
    const otel = {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_BSP_SCHEDULE_DELAY: '200',
    };
    const bus = {
      ...fx.commonEnv,
      ...otel,
      LOG_LEVEL: 'warn',
      PUBLIC_BASE_URL: `http://127.0.0.1:${cpPort}`,
      NATS_URL: realServices.natsUrl(),
      VLT_NATS_PREFIX: `${realServices.busPrefix()}_traces`,
    };
    const withDb = { ...bus, DATABASE_URL: db.url };
    cp = await group.start('control-plane', {
      port: cpPort,
      env: { ...withDb, VLT_MASTER_KEY: fx.masterKey },
    });
    [dp] = await Promise.all([
      group.start('data-plane', { env: bus }),
      group.start('audit', { env: withDb }),
      group.start('notifier', { env: withDb }),
    ]);
    const { user } = await signUp(cp.baseUrl, `traces-${Date.now()}@e2e.test`, 'traces-password-123');
    admin = bearerAdmin(cp.baseUrl, (await apiJwt(cp.baseUrl, user.session)).token);
  }, 180_000);

  afterAll(async () => {
    await group.stopAll();
    await new Promise<void>((r) => receiver?.server.close(() => r()));
    await fx?.dispose();
    await db?.drop();
  }, 60_000);

  /**
   * The statement that stored this trace's execution_requested row. The audit writer stores the
   * events it holds with one statement (ADR 0080) in a batch span that is a child of the first
   * event's consumer span, and every event's consumer span links to it (ADR 0008). So the
   * statement is in this trace only when this call's event opened the batch (an admin change
   * just before the call often did); the link leads to it either way.
   */
  const auditInsertOf = (trace: ExportedSpan[]): ExportedSpan | undefined => {
    const consumed = trace.find(
      (s) => s.service === 'vlt-audit' && s.kind === KIND.consumer && /execution_requested$/.test(s.name),
    );
    const linked = new Set((consumed?.links ?? []).map((l) => l.spanId));
    const batch = receiver.spans.find((s) => s.service === 'vlt-audit' && linked.has(s.spanId));
    return batch
      ? receiver.spans.find(
          (s) =>
            s.service === 'vlt-audit' &&
            s.kind === KIND.client &&
            s.parentSpanId === batch.spanId &&
            /^INSERT audit_events$/.test(s.name),
        )
      : undefined;
  };

  it('an agent call is one trace from the data plane through JetStream to the audit row', async () => {
    const { agent, token } = await enrolAgent(admin, cp.baseUrl, 'traced-agent');
    const conn = await createIssueTrackerConnection(admin, { siteUrl: fx.mock.baseUrl, ...fx.mockAccount });
    await createPolicy(admin, agent.id, conn.connection.id, { allowedModels: ['B'] });
    const r = await execute(dp.baseUrl, token, {
      connectionId: conn.connection.id,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/myself?apikey=QUERYSECRET`,
    });
    expect(r.status).toBe(200);

    // The route span of that call, then everything of its trace (exports arrive in batches).
    let root: ExportedSpan | undefined;
    let trace: ExportedSpan[] = [];
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      root = receiver.spans.find(
        (s) =>
          s.service === 'vlt-data-plane' && s.name === 'POST /v1/vault/execute' && s.kind !== KIND.client,
      );
      trace = root ? receiver.spans.filter((s) => s.traceId === root!.traceId) : [];
      const audited = trace.some((s) => s.service === 'vlt-audit' && s.kind === KIND.consumer);
      const dbWrite = auditInsertOf(trace) !== undefined;
      // Each process exports on its own schedule: wait for the last span of each kind asserted below.
      const completedPublished = trace.some(
        (s) =>
          s.service === 'vlt-data-plane' && s.kind === KIND.producer && /execution_completed$/.test(s.name),
      );
      if (audited && dbWrite && completedPublished) break;
      await sleep(200);
    }
    expect(root, 'the data plane names its route span by route').toBeDefined();
    const names = trace.map((s) => `${s.service} ${s.name}`);
    const has = (service: string, kind: number, name: RegExp) =>
      trace.some((s) => s.service === service && s.kind === kind && name.test(s.name));
    expect(has('vlt-data-plane', KIND.producer, /^publish .*execution_requested$/), names.join('\n')).toBe(
      true,
    );
    expect(has('vlt-data-plane', KIND.producer, /^publish .*execution_completed$/), names.join('\n')).toBe(
      true,
    );
    expect(has('vlt-data-plane', KIND.client, /^GET$|^GET /), names.join('\n')).toBe(true);
    expect(has('vlt-audit', KIND.consumer, /^process .*execution_requested$/), names.join('\n')).toBe(true);
    expect(
      auditInsertOf(trace),
      `a database span under the audit consumer:\n${names.join('\n')}`,
    ).toBeDefined();

    // The notifier is handed only what it acts on (ADR 0065): an allowed call is not, a denied
    // one is (the security-alert detector counts denials), and its span joins the call's trace.
    const denied = await execute(dp.baseUrl, token, {
      connectionId: conn.connection.id,
      method: 'GET',
      url: `${fx.mock.baseUrl}/rest/api/3/not-on-the-allowlist`,
    });
    expect(denied.status).toBe(403);
    let notified: ExportedSpan | undefined;
    const until = Date.now() + 20_000;
    while (!notified && Date.now() < until) {
      notified = receiver.spans.find(
        (s) => s.service === 'vlt-notifier' && s.kind === KIND.consumer && /execution_denied$/.test(s.name),
      );
      if (!notified) await sleep(200);
    }
    expect(notified, 'a notifier consumer span for the denial').toBeDefined();
    const deniedTrace = receiver.spans.filter((s) => s.traceId === notified!.traceId);
    expect(
      deniedTrace.some(
        (s) =>
          s.service === 'vlt-data-plane' && s.kind === KIND.producer && s.spanId === notified!.parentSpanId,
      ),
    ).toBe(true);
    expect(trace.some((s) => s.service === 'vlt-notifier')).toBe(false);

    // The upstream span carries the URL without its query value.
    const upstream = trace.find((s) => s.service === 'vlt-data-plane' && s.kind === KIND.client);
    expect(String(attr(upstream!, 'url.full') ?? '')).not.toContain('QUERYSECRET');

    // The consumer spans hang off the producer spans (W3C context in the message headers).
    const producers = new Set(trace.filter((s) => s.kind === KIND.producer).map((s) => s.spanId));
    const consumers = trace.filter((s) => s.kind === KIND.consumer);
    expect(consumers.every((c) => c.parentSpanId && producers.has(c.parentSpanId))).toBe(true);

    const exported = receiver.raw.join('\n');
    for (const secret of [token, fx.mockAccount.apiToken, 'QUERYSECRET', fx.masterKey]) {
      expect(exported).not.toContain(secret);
    }
    for (const s of receiver.spans) {
      expect(s.name.length, s.name).toBeLessThanOrEqual(160);
      expect(s.name).not.toMatch(/function|=>|\{/);
    }
  });

  it('a control-plane change keeps its trace through the outbox to the audit service', async () => {
    const { agent } = await enrolAgent(admin, cp.baseUrl, 'outbox-agent');
    const upd = await http('PUT', `${cp.baseUrl}/v1/agents/${agent.id}`, {
      headers: admin.headers,
      json: { description: 'traced through the outbox' },
    });
    expect(upd.status, upd.text).toBe(200);
    let trace: ExportedSpan[] = [];
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      const root = receiver.spans.find(
        (s) => s.service === 'vlt-control-plane' && s.name === 'PUT /v1/agents/:id' && s.kind !== KIND.client,
      );
      trace = root ? receiver.spans.filter((s) => s.traceId === root.traceId) : [];
      if (trace.some((s) => s.service === 'vlt-audit' && s.kind === KIND.consumer)) break;
      await sleep(200);
    }
    const names = trace.map((s) => `${s.service} ${s.kind} ${s.name}`);
    expect(
      trace.some(
        (s) => s.service === 'vlt-control-plane' && s.kind === KIND.producer && /agent_updated$/.test(s.name),
      ),
      names.join('\n'),
    ).toBe(true);
    expect(
      trace.some(
        (s) => s.service === 'vlt-audit' && s.kind === KIND.consumer && /agent_updated$/.test(s.name),
      ),
      names.join('\n'),
    ).toBe(true);
  });
});
