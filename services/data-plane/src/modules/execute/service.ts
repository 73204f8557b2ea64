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
import { evaluateExecution, filterResponseBody, type ExecutionDecision } from '@vlt/policy-engine';
import { AppError, Errors, uuidv7 } from '@vlt/service-kit';
import { UpstreamError } from '@vlt/upstream';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import type { Reservation } from '../../rate-counter.js';

// Never forwarded from the agent: credentials, routing and hop-by-hop headers.
const STRIPPED_REQUEST_HEADERS = new Set([
  'authorization',
  'cookie',
  'host',
  'proxy-authorization',
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-host',
  'x-forwarded-proto',
  'x-real-ip',
]);

export interface ExecutionResult {
  model: 'B';
  status: number;
  headers: Record<string, string>;
  body: unknown;
  auditId: string;
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

function sanitisedHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) {
    const key = k.toLowerCase();
    if (!STRIPPED_REQUEST_HEADERS.has(key) && !key.startsWith('x-vlt-') && !key.startsWith('proxy-'))
      out[key] = v;
  }
  return out;
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
  ctx: Pick<Ctx, 'agent'> & { connectionId: string | null },
  action: AuditAction,
  decision: AuditDecision,
  metadata: Record<string, unknown>,
): AuditEventMessage {
  const now = deps.now();
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
  ctx: Pick<Ctx, 'agent'> & { connectionId: string | null },
  status: number,
  reason: string,
  metadata: Record<string, unknown>,
  retryAfter?: number,
): Promise<never> {
  const e = event(deps, ctx, status === 429 ? 'rate_limit_exceeded' : 'execution_denied', 'denied', {
    ...metadata,
    reason,
  });
  try {
    await publish(deps, e);
  } catch {
    // A denial changes nothing upstream; answer it even when the event cannot be stored yet.
    void publishEventually(deps, e);
  }
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
): Promise<ExecutionResult | ApprovalRequired> {
  if (!req.connectionId && !req.service) throw Errors.badRequest('connectionId or service is required');
  if (req.stream || req.download)
    throw Errors.badRequest('stream and download are not available for this service yet');

  const targetId = resolveConnection(deps, agent, req)?.id ?? req.connectionId;
  let found;
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

  const base = { agent, connectionId: conn.id };
  const meta = { model: 'B', method: req.method, provider: conn.provider, service: conn.service };
  if (!found.policy) return deny(deps, base, 403, 'no policy allows this agent to use this connection', meta);

  const policy = found.policy.runtime;
  const input = {
    method: req.method,
    url: req.url,
    query: req.query,
    headers: req.headers,
    body: req.body,
    requestFullFields: req.requestFullFields,
    context: req.context,
  };
  // Narrowed copies for the closure below.
  const connection: ConnectionDescriptor = conn;
  const policyId = found.policy.snapshot.policyId;
  const now = deps.now();
  // Only rate-limited policies pay for the shared counter (two KV round trips).
  let reservation: Reservation | undefined;
  if (policy.rateLimits) {
    try {
      reservation = await deps.rateCounter.reserve(agent.agentId, conn.id, now);
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

  async function decideAndRun(): Promise<ExecutionResult | ApprovalRequired> {
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
        let redeemed;
        try {
          redeemed = ApprovalRedeemResponse.parse(
            await deps.bus.request(
              deps.names.rpc.approvalsRedeem,
              {
                v: 1,
                approvalId: req.approvalId,
                workspaceId: agent.workspaceId,
                agentId: agent.agentId,
                connectionId: connection.id,
                fingerprint,
              },
              { timeoutMs: 3_000 },
            ),
          );
        } catch (err) {
          if (err instanceof BusError) throw Errors.unavailable('cannot verify the approval right now');
          throw err;
        }
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
      return deny(deps, base, 403, 'url is outside the connection site', { ...meta, path: target.pathname });
    }

    const run: Ctx = {
      agent,
      connection,
      method: req.method,
      path: target.pathname,
      requestAuditId: '',
    };
    const requested = event(deps, base, 'execution_requested', 'allowed', {
      ...meta,
      path: target.pathname,
      host: target.host,
    });
    run.requestAuditId = requested.auditId;
    try {
      await publish(deps, requested);
    } catch {
      // Fail closed: no provider call without a durable record of it.
      throw Errors.unavailable('cannot record the request; not executed');
    }

    let creds;
    try {
      creds = await deps.credentials.get({
        workspaceId: agent.workspaceId,
        agentId: agent.agentId,
        connectionId: connection.id,
      });
    } catch {
      await publishEventually(
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
      await publishEventually(deps, terminal);
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
    let res;
    try {
      res = await deps.upstream.request({
        url: target,
        method: req.method,
        headers,
        body,
        maxResponseBytes: policy.limits?.maxResponseSizeBytes ?? 10 * 1024 * 1024,
      });
    } catch (err) {
      const kind = err instanceof UpstreamError ? err.kind : 'unavailable';
      const terminal = event(deps, base, 'execution_error', 'denied', {
        ...meta,
        path: run.path,
        requestAuditId: run.requestAuditId,
        error: kind,
      });
      await publishEventually(deps, terminal);
      if (kind === 'ssrf_blocked')
        throw Errors.policyDenied('destination address is not allowed', { auditId: terminal.auditId });
      if (kind === 'timeout') throw Errors.upstreamTimeout(undefined, { auditId: terminal.auditId });
      if (kind === 'too_large')
        throw Errors.upstreamBadResponse('provider response exceeds the size limit', {
          auditId: terminal.auditId,
        });
      throw Errors.upstreamUnavailable(undefined, { auditId: terminal.auditId });
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
    await publishEventually(deps, terminal);
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

async function requestApproval(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  connectionId: string,
  policyId: string,
  req: ExecuteModelB,
  decision: Extract<ExecutionDecision, { outcome: 'require_approval' }>,
): Promise<ApprovalRequired> {
  let created;
  try {
    created = ApprovalCreateResponse.parse(
      await deps.bus.request(
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
            headers: sanitisedHeaders(req.headers),
            body: req.body ?? null,
            requestFullFields: req.requestFullFields ?? false,
            ...(req.context && { context: req.context }),
          },
        },
        { timeoutMs: 3_000 },
      ),
    );
  } catch (err) {
    if (err instanceof BusError) throw Errors.unavailable('cannot create the approval request right now');
    throw err;
  }
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
