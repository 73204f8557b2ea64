/**
 * Model B decides while `execution_requested` is being stored (ADR 0072), and nothing that acts
 * runs before it is: these tests hold the store's answer back, or refuse it, and watch what the
 * call does meanwhile. The bus, caches, credentials, rate counter and provider are fakes that
 * count what was asked of them.
 */
import { busNames, type Bus } from '@vlt/bus';
import type { DataPlaneSettings } from '@vlt/config';
import type { AuditEventMessage, ConnectionDescriptor, ExecuteModelB, PolicyDocument } from '@vlt/contracts';
import { compilePolicy, hydratePolicy } from '@vlt/policy-engine';
import { AppError } from '@vlt/service-kit';
import { compileSecretForms, UpstreamError, type UpstreamClient } from '@vlt/upstream';
import type { FastifyBaseLogger } from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import type { SnapshotCaches } from '../../caches.js';
import type { CredentialCache } from '../../credentials.js';
import type { DataPlaneDeps } from '../../deps.js';
import type { RateCounter } from '../../rate-counter.js';
import { executeModelB } from './service.js';

const names = busNames('recordtest');
const IDS = {
  workspace: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
  agent: '1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e',
  connection: '2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
  policy: '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b',
  approval: '7a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d',
};
const agent = { agentId: IDS.agent, workspaceId: IDS.workspace, tokenHash: 'h' };
const connection: ConnectionDescriptor = {
  v: 1,
  id: IDS.connection,
  workspaceId: IDS.workspace,
  provider: 'code_host',
  service: 'code_host',
  label: 'repos',
  status: 'healthy',
  singleton: false,
  baseUrl: null,
};

function policyDoc(overrides: Partial<PolicyDocument>): PolicyDocument {
  return {
    id: IDS.policy,
    workspaceId: IDS.workspace,
    agentId: IDS.agent,
    connectionId: IDS.connection,
    allowedModels: ['B'],
    defaultMode: 'read_write',
    stepUpApproval: 'never',
    allowlists: [
      { baseUrl: 'https://api.example.com', methods: ['GET', 'POST'], pathPatterns: ['/repos/*'] },
    ],
    rateLimits: { maxRequestsPerHour: 100 },
    timeWindows: [],
    providerConstraints: null,
    rules: { request: [], response: [] },
    version: 1,
    ...overrides,
  };
}

/** What the call asked of each fake, in order. */
interface Trace {
  /** Every step that acted or was asked, in the order it happened. */
  steps: string[];
  /** Audit actions the bus stored, in order. */
  stored: string[];
  /** Audit actions handed to the bus, in order. */
  sent: string[];
  /** For each time the call asked the bus whether its publishes were sent: what it had published by then. */
  sentAsked: string[][];
  /** The body of each request handed to the provider. */
  providerBodies: unknown[];
}

/**
 * A data plane whose bus stores `execution_requested` only when `store` is called: with true it
 * is stored, with false the bus refuses it (as JetStream does when the stream is unavailable).
 */
function harness(policy: Partial<PolicyDocument>) {
  const trace: Trace = { steps: [], stored: [], sent: [], sentAsked: [], providerBodies: [] };
  // Open unless a test holds it: the bus's answer to "is everything published so far sent?".
  let sentGate: Promise<void> = Promise.resolve();
  const holdSent = () => {
    let release!: () => void;
    sentGate = new Promise<void>((r) => (release = r));
    return release;
  };
  let store!: (ok: boolean) => void;
  const requestStored = new Promise<boolean>((r) => (store = r));
  const bus = {
    async publish(_subject: string, data: unknown) {
      const e = data as AuditEventMessage;
      trace.sent.push(e.action);
      if (e.action === 'execution_requested') {
        trace.steps.push('publish execution_requested');
        if (!(await requestStored)) throw new Error('stream unavailable');
      }
      trace.stored.push(e.action);
    },
    async sent() {
      trace.sentAsked.push([...trace.sent]);
      await sentGate;
    },
    async request(subject: string) {
      if (subject === names.rpc.approvalsRedeem) {
        trace.steps.push('redeem approval');
        return { ok: true };
      }
      if (subject === names.rpc.approvalsCreate) {
        trace.steps.push('file approval');
        return {
          ok: true,
          approvalRequestId: IDS.approval,
          expiresAt: new Date(Date.now() + 60_000).toISOString(),
          auditId: 'a-1',
        };
      }
      throw new Error(`unexpected request on ${subject}`);
    },
  } as unknown as Bus;
  const snapshot = {
    v: 1 as const,
    policyId: IDS.policy,
    workspaceId: IDS.workspace,
    agentId: IDS.agent,
    connectionId: IDS.connection,
    version: 1,
    compiled: compilePolicy(policyDoc(policy), connection),
  };
  const runtime = hydratePolicy(snapshot.compiled);
  const caches = {
    policyFor: async () => ({ policy: { snapshot, runtime }, connection }),
    connection: () => connection,
    connectionsOf: () => [connection],
  } as unknown as SnapshotCaches;
  const credentials = {
    async get() {
      trace.steps.push('fetch credentials');
      return { ok: true, credentials: { type: 'bearer', token: 'provider-token' }, ttlMs: 60_000 };
    },
    invalidate() {},
    secretForms: (_c: unknown, secrets: readonly string[]) => compileSecretForms(secrets),
  } as unknown as CredentialCache;
  const rateCounter: RateCounter = {
    async reserve() {
      trace.steps.push('reserve rate slot');
      return {
        previous: 0,
        oldestAt: undefined,
        release: async () => void trace.steps.push('release rate slot'),
      };
    },
  };
  const upstream = {
    resolve: async () => ['93.184.216.34'],
    async request(r: { body?: unknown }) {
      trace.steps.push('call provider');
      trace.providerBodies.push(r.body);
      throw new UpstreamError('unavailable', 'connection refused');
    },
    async stream() {
      trace.steps.push('stream from provider');
      throw new UpstreamError('unavailable', 'connection refused');
    },
  } as unknown as UpstreamClient;
  const logger = { warn() {}, error() {}, info() {}, debug() {} } as unknown as FastifyBaseLogger;
  const deps: DataPlaneDeps = {
    config: { ssrfAllowCidrs: [] } as unknown as DataPlaneSettings,
    bus,
    names,
    logger,
    caches,
    credentials,
    rateCounter,
    upstream,
    now: () => new Date(),
  };
  return { deps, trace, store, holdSent };
}

function call(over: Partial<ExecuteModelB> = {}): ExecuteModelB {
  return {
    model: 'B',
    connectionId: IDS.connection,
    method: 'GET',
    url: 'https://api.example.com/repos/a',
    ...over,
  };
}

/** Lets every pending callback and timer of this turn run. */
const settle = () => new Promise((r) => setTimeout(r, 20));

/** The call's outcome without throwing: the AppError it ended with, or what it returned. */
async function outcome(
  p: Promise<unknown>,
): Promise<{ status: number; code: string; message: string } | unknown> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof AppError) return { status: err.statusCode, code: err.code, message: err.message };
    throw err;
  }
}

describe('Model B decides while execution_requested is stored (ADR 0072)', () => {
  it('takes the rate slot meanwhile, but fetches credentials and calls the provider only once it is stored', async () => {
    const { deps, trace, store } = harness({});
    let done = false;
    const result = outcome(executeModelB(deps, agent, call())).finally(() => (done = true));
    await settle();
    expect(trace.steps).toEqual(['publish execution_requested', 'reserve rate slot']);
    expect(done).toBe(false);

    store(true);
    expect(await result).toMatchObject({ status: 502 });
    expect(trace.steps).toEqual([
      'publish execution_requested',
      'reserve rate slot',
      'fetch credentials',
      'call provider',
    ]);
    await settle();
    expect(trace.stored).toEqual(['execution_requested', 'execution_error']);
  });

  it('decides only once execution_requested has been handed to the bus, so it is stored meanwhile (ADR 0086)', async () => {
    const { deps, trace, store, holdSent } = harness({});
    // The bus has not written the request yet (a NATS publish leaves at the end of the turn).
    const release = holdSent();
    const result = outcome(executeModelB(deps, agent, call()));
    await settle();
    expect(trace.sentAsked).toEqual([['execution_requested']]);
    // Nothing of the decision ran: the rate slot is its first step.
    expect(trace.steps).toEqual(['publish execution_requested']);

    release();
    await settle();
    expect(trace.steps).toEqual(['publish execution_requested', 'reserve rate slot']);
    store(true);
    expect(await result).toMatchObject({ status: 502 });
  });

  it('answers only once the terminal event has been handed to the bus (ADR 0085)', async () => {
    const { deps, trace, store, holdSent } = harness({});
    let done = false;
    const result = outcome(executeModelB(deps, agent, call())).finally(() => (done = true));
    await settle();
    const release = holdSent();
    store(true);
    await settle();
    // Asked after the outcome was published (the first ask: before deciding, ADR 0086), and the
    // answer waits for the bus's reply.
    expect(trace.sentAsked).toEqual([['execution_requested'], ['execution_requested', 'execution_error']]);
    expect(done).toBe(false);
    release();
    expect(await result).toMatchObject({ status: 502 });
  });

  it('a request that cannot be stored is answered 503: nothing fetched, redeemed or sent, its rate slot given back, no terminal event', async () => {
    const { deps, trace, store } = harness({ stepUpApproval: 'always' });
    const result = outcome(executeModelB(deps, agent, call({ method: 'POST', approvalId: IDS.approval })));
    await settle();
    store(false);
    expect(await result).toEqual({
      status: 503,
      code: 'SERVICE_UNAVAILABLE',
      message: 'cannot record the request; not executed',
    });
    await settle();
    expect(trace.steps).toEqual(['publish execution_requested', 'reserve rate slot', 'release rate slot']);
    expect(trace.stored).toEqual([]);
  });

  it('an approval is neither redeemed nor filed before the request is stored', async () => {
    const cases = [
      { stepUp: 'always', approvalId: IDS.approval, then: 'redeem approval' },
      { stepUp: 'always', approvalId: undefined, then: 'file approval' },
      // An approval presented where none is needed is still checked and consumed (ADR 0045).
      { stepUp: 'never', approvalId: IDS.approval, then: 'redeem approval' },
    ] as const;
    for (const c of cases) {
      const { deps, trace, store } = harness({ stepUpApproval: c.stepUp });
      const result = outcome(executeModelB(deps, agent, call({ method: 'POST', approvalId: c.approvalId })));
      await settle();
      expect(trace.steps).toEqual(['publish execution_requested', 'reserve rate slot']);
      store(true);
      await result;
      expect(trace.steps[2]).toBe(c.then);
    }
  });

  it('a refusal decided meanwhile is answered, and recorded after its request, only once the request is stored', async () => {
    const { deps, trace, store } = harness({});
    let done = false;
    const result = outcome(
      executeModelB(deps, agent, call({ url: 'https://api.example.com/admin' })),
    ).finally(() => (done = true));
    await settle();
    expect(done).toBe(false);
    expect(trace.stored).toEqual([]);

    store(true);
    expect(await result).toMatchObject({ status: 403, code: 'POLICY_DENIED' });
    await settle();
    expect(trace.stored).toEqual(['execution_requested', 'execution_denied']);
    expect(trace.steps).not.toContain('fetch credentials');
  });

  it('a refusal decided meanwhile becomes the 503 when the request cannot be stored, and is never recorded', async () => {
    const { deps, trace, store } = harness({});
    const result = outcome(executeModelB(deps, agent, call({ url: 'https://api.example.com/admin' })));
    await settle();
    store(false);
    expect(await result).toMatchObject({ status: 503, message: 'cannot record the request; not executed' });
    await settle();
    expect(trace.stored).toEqual([]);
  });
});

describe('a request is read once per call, however often the pipeline is asked', () => {
  /** How many times `JSON.parse` was handed exactly `text` while `run` ran. */
  async function parsesOf(text: string, run: () => Promise<unknown>): Promise<number> {
    const parse = vi.spyOn(JSON, 'parse');
    try {
      await run();
      return parse.mock.calls.filter(([arg]) => arg === text).length;
    } finally {
      parse.mockRestore();
    }
  }

  it('a JSON body is parsed once, though the pipeline is asked again with the DNS answers and as if approved', async () => {
    const body = JSON.stringify({ title: 'parsed-once', items: [1, 2, 3] });
    const cases = [
      // api.example.com needs DNS: asked, then asked again with its addresses.
      { stepUp: 'never', approvalId: undefined, then: 'call provider' },
      // And once more as if approved, before the approval is redeemed.
      { stepUp: 'always', approvalId: IDS.approval, then: 'call provider' },
    ] as const;
    for (const c of cases) {
      const { deps, trace, store } = harness({ stepUpApproval: c.stepUp });
      store(true);
      const parses = await parsesOf(body, () =>
        outcome(
          executeModelB(
            deps,
            agent,
            call({
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body,
              approvalId: c.approvalId,
            }),
          ),
        ),
      );
      expect(trace.steps.at(-1)).toBe(c.then);
      expect(parses).toBe(1);
    }
  });

  it("a body that asks to stream is streamed, judged on the pipeline's own parse of it", async () => {
    const asks = JSON.stringify({ stream: true, prompt: 'hi' });
    const { deps, trace, store } = harness({});
    store(true);
    const seen: unknown[] = [];
    const parses = await parsesOf(asks, () =>
      outcome(
        executeModelB(
          deps,
          agent,
          call({ method: 'POST', headers: { 'content-type': 'application/json' }, body: asks }),
          {
            streamWhen: (b) => {
              seen.push(b);
              return b.kind === 'json' && (b.value as { stream?: unknown }).stream === true;
            },
          },
        ),
      ),
    );
    expect(trace.steps.at(-1)).toBe('stream from provider');
    expect(seen).toEqual([{ kind: 'json', value: { stream: true, prompt: 'hi' } }]);
    expect(parses).toBe(1);

    // A body that does not ask is answered buffered.
    const other = harness({});
    other.store(true);
    await outcome(
      executeModelB(
        other.deps,
        agent,
        call({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"stream":false}' }),
        { streamWhen: (b) => b.kind === 'json' && (b.value as { stream?: unknown }).stream === true },
      ),
    );
    expect(other.trace.steps.at(-1)).toBe('call provider');
    expect(other.trace.steps).not.toContain('stream from provider');
  });
});

describe("a text body's bytes (ExecuteOptions.textBytes)", () => {
  const text = JSON.stringify({ title: 'héllo 😀' });
  const post = call({ method: 'POST', headers: { 'content-type': 'application/json' }, body: text });

  it('are sent as they are when they are what the pipeline decided to send', async () => {
    const bytes = Buffer.from(text, 'utf8');
    const { deps, trace, store } = harness({});
    store(true);
    await outcome(executeModelB(deps, agent, post, { textBytes: bytes }));
    expect(trace.providerBodies).toHaveLength(1);
    expect(trace.providerBodies[0]).toBe(bytes);
  });

  it('are never sent when they are not as long as the text encoded: the text is', async () => {
    const { deps, trace, store } = harness({});
    store(true);
    await outcome(executeModelB(deps, agent, post, { textBytes: Buffer.from(`${text} `, 'utf8') }));
    expect(trace.providerBodies).toEqual([text]);
  });
});
