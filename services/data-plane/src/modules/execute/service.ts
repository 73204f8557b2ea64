/**
 * Model B: the brokered request. Order (spec): policy lookup → time window → allowlist →
 * SSRF → provider constraints → rules → step-up → rate limit → payload size, decided by the
 * pure policy engine; then the durable `execution_requested` event (fail closed), credential
 * injection, the upstream call, response filtering, and the terminal event.
 */
import { BusError } from '@vlt/bus';
import {
  ApprovalCreateResponse,
  ApprovalRedeemResponse,
  eventCategory,
  type AuditAction,
  type AuditDecision,
  type AuditEventMessage,
  type ConnectionDescriptor,
  type ExecuteModelB,
} from '@vlt/contracts';
import {
  sanitizeRequestHeaders,
  createResponseFilterNodeStream,
  evaluateExecution,
  filterResponseBody,
  type ExecutionDecision,
} from '@vlt/policy-engine';
import { AppError, Errors, uuidv7 } from '@vlt/service-kit';
import { UpstreamError, type UpstreamResponse, type UpstreamStreamResponse } from '@vlt/upstream';
import { PassThrough, pipeline, Transform, type Readable } from 'node:stream';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import type { Reservation } from '../../rate-counter.js';

export interface ExecutionResult {
  model: 'B';
  status: number;
  headers: Record<string, string>;
  body: unknown;
  auditId: string;
}

/** A response streamed to the agent as the provider sends it (no envelope). */
export interface StreamedResult {
  streamed: true;
  status: number;
  headers: Record<string, string>;
  body: Readable;
}

export interface ApprovalRequired {
  approvalRequired: true;
  approvalRequestId: string;
  expiresAt: string;
  auditId: string;
}

const REDEEM_REFUSALS: Record<string, { status: number; message: string }> = {
  not_found: { status: 403, message: 'approval not found for this agent' },
  pending: { status: 403, message: 'approval is still pending' },
  denied: { status: 403, message: 'approval was denied' },
  expired: { status: 403, message: 'approval has expired' },
  consumed: { status: 409, message: 'approval has already been used' },
  mismatch: { status: 403, message: 'approval was granted for a different request' },
};

/** Request headers as the reviewer of an approval sees them: what would be forwarded. */
function forwardedHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  const out = sanitizeRequestHeaders(headers);
  return out.ok ? out.headers : {};
}

/** Request/reply to the control plane; when it cannot answer, the call fails closed with 503. */
async function ask<T>(
  deps: DataPlaneDeps,
  subject: string,
  payload: unknown,
  schema: { parse(v: unknown): T },
  unavailable: string,
): Promise<T> {
  try {
    return schema.parse(await deps.bus.request(subject, payload, { timeoutMs: 3_000 }));
  } catch (err) {
    if (err instanceof BusError) throw Errors.unavailable(unavailable);
    throw err;
  }
}

interface Ctx {
  agent: AgentPrincipal;
  connection: ConnectionDescriptor;
  method: string;
  path: string;
  requestAuditId: string;
}

function event(
  deps: DataPlaneDeps,
  ctx: Pick<Ctx, 'agent'> & { connectionId: string | null; outcome?: { recorded: boolean } },
  action: AuditAction,
  decision: AuditDecision,
  metadata: Record<string, unknown>,
): AuditEventMessage {
  const now = deps.now();
  if (action !== 'execution_requested' && ctx.outcome) ctx.outcome.recorded = true;
  return {
    v: 1,
    auditId: uuidv7(now.getTime()),
    action,
    timestamp: now.toISOString(),
    actor: `agent:${ctx.agent.agentId}`,
    workspaceId: ctx.agent.workspaceId,
    agentId: ctx.agent.agentId,
    connectionId: ctx.connectionId,
    decision,
    metadata,
  };
}

async function publish(deps: DataPlaneDeps, e: AuditEventMessage): Promise<void> {
  await deps.bus.publish(deps.names.eventSubject(eventCategory(e.action), e.action), e, { msgId: e.auditId });
}

/**
 * Terminal events must not be lost once the upstream call happened: retried in the
 * background with backoff (the msgId makes retries idempotent).
 */
function publishEventually(deps: DataPlaneDeps, e: AuditEventMessage): Promise<void> {
  return publish(deps, e).catch((err: Error) => {
    deps.logger.warn(
      { auditId: e.auditId, err: err.message },
      'terminal audit event not yet stored; retrying',
    );
    let attempt = 0;
    const retry = () => {
      attempt++;
      publish(deps, e).catch(() => {
        if (attempt < 20) setTimeout(retry, Math.min(30_000, 250 * 2 ** attempt)).unref();
        else deps.logger.error({ auditId: e.auditId, action: e.action }, 'audit event lost after retries');
      });
    };
    setTimeout(retry, 250).unref();
  });
}

async function deny(
  deps: DataPlaneDeps,
  ctx: Pick<Ctx, 'agent'> & {
    connectionId: string | null;
    requestAuditId?: string;
    outcome?: { recorded: boolean };
  },
  status: number,
  reason: string,
  metadata: Record<string, unknown>,
  retryAfter?: number,
): Promise<never> {
  const e = event(deps, ctx, status === 429 ? 'rate_limit_exceeded' : 'execution_denied', 'denied', {
    ...metadata,
    reason,
    ...(ctx.requestAuditId && { requestAuditId: ctx.requestAuditId }),
  });
  // The request is already durably recorded; its outcome follows without holding the answer.
  void publishEventually(deps, e);
  throw new AppError(
    status === 413 ? 'PAYLOAD_TOO_LARGE' : status === 429 ? 'RATE_LIMITED' : 'POLICY_DENIED',
    status,
    reason,
    {
      auditId: e.auditId,
      ...(retryAfter !== undefined && { retryAfter, headers: { 'retry-after': String(retryAfter) } }),
    },
  );
}

function resolveConnection(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  req: ExecuteModelB,
): ConnectionDescriptor | null {
  if (req.connectionId) return deps.caches.connection(req.connectionId);
  if (req.service) {
    const matches = deps.caches
      .connectionsOf(agent.workspaceId)
      .filter((c) => c.service === req.service && c.singleton && c.status !== 'revoked');
    return matches.length === 1 ? matches[0]! : null;
  }
  return null;
}

function decodeBody(buf: Buffer, contentType: string | undefined): unknown {
  if (buf.length === 0) return null;
  const ct = (contentType ?? '').toLowerCase();
  if (ct.includes('json')) {
    try {
      return JSON.parse(buf.toString('utf8'));
    } catch {
      return buf.toString('utf8');
    }
  }
  if (ct.startsWith('text/') || ct.includes('xml') || ct.includes('x-www-form-urlencoded') || ct === '') {
    return buf.toString('utf8');
  }
  // Binary content inside a JSON envelope: base64 (use `download: true` for raw bytes).
  return buf.toString('base64');
}

export async function executeModelB(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  req: ExecuteModelB,
): Promise<ExecutionResult | ApprovalRequired | StreamedResult> {
  if (!req.connectionId && !req.service) throw Errors.badRequest('connectionId or service is required');

  const targetId = resolveConnection(deps, agent, req)?.id ?? req.connectionId;
  let found: Awaited<ReturnType<DataPlaneDeps['caches']['policyFor']>>;
  try {
    found = targetId
      ? await deps.caches.policyFor(agent.agentId, targetId)
      : { policy: null, connection: null };
  } catch (err) {
    if (err instanceof BusError) throw Errors.unavailable('cannot load the policy right now');
    throw err;
  }
  const conn = found.connection;
  // Another workspace's connection is indistinguishable from none at all.
  if (!conn || conn.workspaceId !== agent.workspaceId) throw Errors.notFound('connection not found');
  if (conn.status === 'revoked') throw Errors.conflict('connection has been revoked');
  if (conn.status === 'needs_reauth') throw Errors.conflict('connection needs reauthentication');

  const meta = { model: 'B', method: req.method, provider: conn.provider, service: conn.service };
  // Every call that names a usable connection is recorded before anything is decided, so the
  // audit log holds one execution_requested and exactly one terminal event per call (ADR 0004).
  // Durable before the provider can be reached: no record, no call (fail closed).
  const requested = event(deps, { agent, connectionId: conn.id }, 'execution_requested', 'allowed', {
    ...meta,
    url: redactedUrl(req.url),
  });
  try {
    await publish(deps, requested);
  } catch {
    throw Errors.unavailable('cannot record the request; not executed');
  }
  // Narrowed copies for the closures below.
  const usable: ConnectionDescriptor = conn;
  const foundPolicy = found.policy;
  const base = {
    agent,
    connectionId: conn.id,
    requestAuditId: requested.auditId,
    outcome: { recorded: false },
  };
  // Whatever happens from here, the call ends with exactly one terminal event.
  try {
    const out = await runRecorded();
    if ('approvalRequired' in out) {
      void publishEventually(
        deps,
        event(deps, base, 'execution_denied', 'denied', {
          ...meta,
          reason: 'step-up approval required',
          approvalRequestId: out.approvalRequestId,
          requestAuditId: requested.auditId,
        }),
      );
    }
    return out;
  } catch (err) {
    if (!base.outcome.recorded) {
      const client = err instanceof AppError && err.statusCode < 500;
      void publishEventually(
        deps,
        event(deps, base, client ? 'execution_denied' : 'execution_error', 'denied', {
          ...meta,
          requestAuditId: requested.auditId,
          error: err instanceof AppError ? err.code : 'INTERNAL',
          ...(client && { reason: (err as AppError).message }),
        }),
      );
    }
    throw err;
  }

  async function runRecorded(): Promise<ExecutionResult | ApprovalRequired | StreamedResult> {
    if (!foundPolicy)
      return deny(deps, base, 403, 'no policy allows this agent to use this connection', meta);

    const policy = foundPolicy.runtime;
    const input = {
      method: req.method,
      url: req.url,
      query: req.query,
      headers: req.headers,
      body: req.body,
      requestFullFields: req.requestFullFields,
      context: req.context,
    };
    const connection = usable;
    const policyId = foundPolicy.snapshot.policyId;
    const now = deps.now();
    // Only rate-limited policies pay for the shared counter (two KV round trips).
    let reservation: Reservation | undefined;
    if (policy.rateLimits) {
      try {
        reservation = await deps.rateCounter.reserve(agent.agentId, usable.id, now);
      } catch {
        throw Errors.unavailable('cannot count requests for the rate limit right now');
      }
    }
    const ctxBase = {
      now,
      model: 'B' as const,
      requestsInLastHour: reservation?.previous ?? 0,
      ...(reservation?.oldestAt && { oldestRequestInWindowAt: reservation.oldestAt }),
      ssrfAllowCidrs: deps.config.ssrfAllowCidrs,
    };
    // Set just before the provider is called: from then on the request counts, whatever happens.
    let sent = false;
    try {
      const out = await decideAndRun();
      if (!sent) await reservation?.release();
      return out;
    } catch (err) {
      // A request that never reached the provider (denied, 429, awaiting approval) gives its slot back.
      if (reservation && !sent) await reservation.release().catch(() => undefined);
      throw err;
    }

    async function decideAndRun(): Promise<ExecutionResult | ApprovalRequired | StreamedResult> {
      let ctx: Parameters<typeof evaluateExecution>[2] = ctxBase;
      let decision: ExecutionDecision = evaluateExecution(input, policy, ctx);
      if (decision.outcome === 'needs_resolution') {
        let addresses: string[];
        try {
          addresses = await deps.upstream.resolve(decision.host);
        } catch {
          return deny(deps, base, 403, 'destination host cannot be resolved', meta);
        }
        ctx = { ...ctxBase, resolvedAddresses: addresses };
        decision = evaluateExecution(input, policy, ctx);
      }

      if (decision.outcome === 'require_approval') {
        const fingerprint = decision.fingerprint;
        if (!req.approvalId) return requestApproval(deps, agent, connection.id, policyId, req, decision);
        // Evaluate as if approved first: the approval is consumed only when the request will run.
        const approved = evaluateExecution(input, policy, {
          ...ctx,
          approval: { status: 'approved', fingerprintMatches: true },
        });
        if (approved.outcome === 'allow') {
          const redeemed = await ask(
            deps,
            deps.names.rpc.approvalsRedeem,
            {
              v: 1,
              approvalId: req.approvalId,
              workspaceId: agent.workspaceId,
              agentId: agent.agentId,
              connectionId: connection.id,
              fingerprint,
            },
            ApprovalRedeemResponse,
            'cannot verify the approval right now',
          );
          if (!redeemed.ok) {
            const refusal = REDEEM_REFUSALS[redeemed.code]!;
            return deny(deps, base, refusal.status, refusal.message, {
              ...meta,
              step: 'step_up',
              approvalRequestId: req.approvalId,
            });
          }
        }
        decision = approved;
      }

      switch (decision.outcome) {
        case 'bad_request':
          throw Errors.badRequest(decision.reason);
        case 'deny':
          return deny(
            deps,
            base,
            decision.status,
            decision.reason,
            { ...meta, step: decision.step, ...decision.audit },
            decision.retryAfter,
          );
        case 'require_approval':
          return deny(deps, base, 403, `step-up approval required: ${decision.reason}`, {
            ...meta,
            step: 'step_up',
          });
        case 'needs_resolution':
          return deny(deps, base, 403, 'destination could not be verified', meta);
        case 'allow':
          break;
      }

      const target = new URL(decision.target.href);
      // The issue tracker's base URL comes from the connection: nothing else may be reached with its credentials.
      if (connection.baseUrl && target.origin !== new URL(connection.baseUrl).origin) {
        return deny(deps, base, 403, 'url is outside the connection site', {
          ...meta,
          path: target.pathname,
        });
      }

      const run: Ctx = {
        agent,
        connection,
        method: req.method,
        path: target.pathname,
        requestAuditId: requested.auditId,
      };

      let creds;
      try {
        creds = await deps.credentials.get({
          workspaceId: agent.workspaceId,
          agentId: agent.agentId,
          connectionId: connection.id,
        });
      } catch {
        void publishEventually(
          deps,
          event(deps, base, 'execution_error', 'denied', {
            ...meta,
            path: run.path,
            requestAuditId: run.requestAuditId,
            error: 'credentials unavailable',
          }),
        );
        throw Errors.unavailable('credentials are unavailable right now');
      }
      if (!creds.ok) {
        const terminal = event(deps, base, 'execution_denied', 'denied', {
          ...meta,
          path: run.path,
          requestAuditId: run.requestAuditId,
          reason: creds.code,
        });
        void publishEventually(deps, terminal);
        if (creds.code === 'revoked')
          throw Errors.conflict('connection has been revoked', { auditId: terminal.auditId });
        if (creds.code === 'needs_reauth')
          throw Errors.conflict('connection needs reauthentication', { auditId: terminal.auditId });
        throw Errors.policyDenied('no policy allows this agent to use this connection', {
          auditId: terminal.auditId,
        });
      }

      // Send exactly what the policy engine judged: its canonical URL, headers and body.
      const headers: Record<string, string> = { ...decision.target.headers };
      const body = decision.target.body;
      if (body !== undefined && typeof req.body !== 'string' && !('content-type' in headers)) {
        headers['content-type'] = 'application/json';
      }
      const c = creds.credentials;
      headers.authorization =
        c.type === 'basic'
          ? `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`
          : `Bearer ${c.token}`;
      headers.accept ??= 'application/json';

      sent = true;
      const started = performance.now();
      const maxResponseBytes = policy.limits?.maxResponseSizeBytes ?? 10 * 1024 * 1024;
      const failed = async (err: unknown): Promise<never> => {
        const kind = err instanceof UpstreamError ? err.kind : 'unavailable';
        const terminal = event(deps, base, 'execution_error', 'denied', {
          ...meta,
          path: run.path,
          requestAuditId: run.requestAuditId,
          error: kind,
        });
        void publishEventually(deps, terminal);
        const extra = { auditId: terminal.auditId };
        if (kind === 'ssrf_blocked') throw Errors.policyDenied('destination address is not allowed', extra);
        if (kind === 'timeout') throw Errors.upstreamTimeout(undefined, extra);
        if (kind === 'too_large')
          throw Errors.upstreamBadResponse('provider response exceeds the size limit', extra);
        throw Errors.upstreamUnavailable(undefined, extra);
      };

      let bufferedError: UpstreamResponse | undefined;
      if (req.stream || req.download) {
        let streamed;
        try {
          streamed = await deps.upstream.stream({ url: target, method: req.method, headers, body });
        } catch (err) {
          return failed(err);
        }
        // Spec: a non-2xx answer is returned as a buffered error body, in the usual envelope.
        if (streamed.status >= 200 && streamed.status < 300) {
          return streamResponse(deps, {
            upstream: streamed,
            filter: req.download
              ? () => null
              : (beforeChunk) =>
                  createResponseFilterNodeStream(
                    streamed.headers['content-type'],
                    policy,
                    { method: req.method, path: target.pathname },
                    {},
                    { beforeChunk },
                  ),
            download: req.download === true,
            maxResponseBytes,
            started,
            onEnd: (metadata, action) =>
              publishEventually(
                deps,
                event(deps, base, action, action === 'execution_completed' ? 'allowed' : 'denied', {
                  ...meta,
                  path: run.path,
                  requestAuditId: run.requestAuditId,
                  stream: true,
                  ...metadata,
                }),
              ),
          });
        }
        // The provider already answered: buffer that answer, never ask a second time.
        try {
          bufferedError = {
            status: streamed.status,
            headers: streamed.headers,
            body: await readCapped(streamed.body, maxResponseBytes),
          };
        } catch (err) {
          return failed(err);
        }
      }

      let res: UpstreamResponse;
      if (bufferedError) {
        res = bufferedError;
      } else {
        try {
          res = await deps.upstream.request({
            url: target,
            method: req.method,
            headers,
            body,
            maxResponseBytes,
          });
        } catch (err) {
          return failed(err);
        }
      }

      const contentType = res.headers['content-type'];
      const decoded = decodeBody(res.body, contentType);
      const filtered = filterResponseBody(decoded, contentType ?? '', policy, {
        method: req.method,
        path: target.pathname,
      });
      const terminal = event(deps, base, 'execution_completed', 'allowed', {
        ...meta,
        path: run.path,
        requestAuditId: run.requestAuditId,
        responseStatus: res.status,
        dataSize: res.body.length,
        durationMs: Math.round(performance.now() - started),
      });
      void publishEventually(deps, terminal);
      // The body may have changed size after filtering.
      delete res.headers['content-length'];
      return {
        model: 'B',
        status: res.status,
        headers: res.headers,
        body: filtered,
        auditId: terminal.auditId,
      };
    }
  }
}

async function requestApproval(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  connectionId: string,
  policyId: string,
  req: ExecuteModelB,
  decision: Extract<ExecutionDecision, { outcome: 'require_approval' }>,
): Promise<ApprovalRequired> {
  const created = await ask(
    deps,
    deps.names.rpc.approvalsCreate,
    {
      v: 1,
      workspaceId: agent.workspaceId,
      agentId: agent.agentId,
      connectionId,
      policyId,
      fingerprint: decision.fingerprint,
      reason: decision.reason,
      requestDetails: {
        method: req.method,
        url: req.url,
        query: req.query ?? {},
        headers: forwardedHeaders(req.headers),
        body: req.body ?? null,
        requestFullFields: req.requestFullFields ?? false,
        ...(req.context && { context: req.context }),
      },
    },
    ApprovalCreateResponse,
    'cannot create the approval request right now',
  );
  if (!created.ok) {
    if (created.code === 'revoked') throw Errors.conflict('connection has been revoked');
    throw Errors.policyDenied('no policy allows this agent to use this connection');
  }
  return {
    approvalRequired: true,
    approvalRequestId: created.approvalRequestId,
    expiresAt: created.expiresAt,
    auditId: created.auditId,
  };
}

/**
 * Pipes the provider's body to the agent through the policy's response filter (per SSE event,
 * NDJSON line or text chunk), counting bytes against maxResponseSizeBytes, and records exactly
 * one terminal event when the stream ends, fails or is cut short.
 */
function streamResponse(
  deps: DataPlaneDeps,
  o: {
    upstream: UpstreamStreamResponse;
    /** The response filter, counting the provider's bytes with `beforeChunk`; null: none. */
    filter: (beforeChunk: (chunk: Uint8Array) => void) => Transform | null;
    download: boolean;
    maxResponseBytes: number;
    started: number;
    onEnd: (
      metadata: Record<string, unknown>,
      action: 'execution_completed' | 'execution_error',
    ) => Promise<void>;
  },
): StreamedResult {
  let bytes = 0;
  let settled = false;
  const settle = (action: 'execution_completed' | 'execution_error', metadata: Record<string, unknown>) => {
    if (settled) return;
    settled = true;
    void o.onEnd(
      {
        responseStatus: o.upstream.status,
        dataSize: bytes,
        durationMs: Math.round(performance.now() - o.started),
        ...metadata,
      },
      action,
    );
  };
  const count = (chunk: Uint8Array) => {
    bytes += chunk.length;
    if (bytes > o.maxResponseBytes) {
      settle('execution_error', { error: 'too_large' });
      throw new Error('provider response exceeds the size limit');
    }
  };
  // With a filter the bytes are counted inside it: one stream stage less per chunk.
  const filter = o.filter(count);
  const stage =
    filter ??
    new Transform({
      transform(chunk: Buffer, _enc, cb) {
        try {
          count(chunk);
        } catch (err) {
          cb(err as Error);
          return;
        }
        cb(null, chunk);
      },
    });
  const source = o.upstream.body;
  // Destroying the provider body after the pipeline settled (size limit, agent gone) makes
  // undici emit an abort error with no listener left: absorb it, the outcome is recorded.
  source.on('error', () => undefined);
  const out = new PassThrough();
  const done = (err: NodeJS.ErrnoException | null) => {
    if (!err) return settle('execution_completed', {});
    settle('execution_error', {
      error: err.message === 'provider response exceeds the size limit' ? 'too_large' : 'stream_interrupted',
    });
  };
  pipeline(source, stage, out, done);
  // The agent hung up: stop reading from the provider.
  out.on('close', () => {
    if (!settled) {
      source.destroy();
      settle('execution_error', { error: 'client_closed' });
    }
  });
  const headers: Record<string, string> = {};
  for (const name of ['content-type', 'content-disposition', 'content-language', 'etag', 'last-modified']) {
    const v = o.upstream.headers[name];
    if (v) headers[name] = v;
  }
  if (o.download && o.upstream.headers['content-length'])
    headers['content-length'] = o.upstream.headers['content-length'];
  headers['cache-control'] = 'no-cache';
  // Proxies in front of us must not hold back a live event stream.
  headers['x-accel-buffering'] = 'no';
  return { streamed: true, status: o.upstream.status, headers, body: out };
}

/** The requested URL for the audit trail, with query values dropped (they may carry data). */
function redactedUrl(raw: string): string {
  try {
    const u = new URL(raw);
    const keys = [...new Set([...u.searchParams.keys()])];
    return `${u.origin}${u.pathname}${keys.length ? `?${keys.map((k) => `${encodeURIComponent(k)}=`).join('&')}` : ''}`;
  } catch {
    return '(unparseable)';
  }
}

async function readCapped(body: Readable, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > max) {
      body.destroy();
      throw new UpstreamError('too_large', 'provider response exceeds the size limit');
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
