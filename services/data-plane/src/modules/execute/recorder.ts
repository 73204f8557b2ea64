/**
 * The audit trail of one brokered call: `execution_requested`, then exactly one terminal event,
 * whatever path the call takes (ADR 0004). The exactly-once guarantee lives here, in one flag,
 * instead of in every branch of the caller. The request is published when the call begins and
 * the caller decides while JetStream stores it (ADR 0072); `recorded` is the gate every side
 * effect waits at (no record, no call: fail closed), and a terminal event is published only
 * after its request was stored, never without it.
 */
import { eventCategory, type AuditAction, type AuditDecision, type AuditEventMessage } from '@vlt/contracts';
import { auditUrl, AppError, Errors, uuidv7 } from '@vlt/service-kit';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';

type TerminalAction = Exclude<AuditAction, 'execution_requested'>;

function auditEvent(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  connectionId: string | null,
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
    actor: `agent:${agent.agentId}`,
    workspaceId: agent.workspaceId,
    agentId: agent.agentId,
    connectionId,
    decision,
    metadata,
  };
}

async function publish(deps: DataPlaneDeps, e: AuditEventMessage): Promise<void> {
  deps.metrics?.decision(e.action, e.decision);
  await deps.bus.publish(deps.names.eventSubject(eventCategory(e.action), e.action), e, { msgId: e.auditId });
}

/**
 * Terminal events must not be lost once the call went ahead: retried in the background with
 * backoff (the msgId makes retries idempotent). The answer to the agent does not wait for its
 * ack; a brokered call's answer waits until it is sent (`outcomeSent`, ADR 0085).
 */
function publishEventually(deps: DataPlaneDeps, e: AuditEventMessage): void {
  publish(deps, e).catch((err: Error) => {
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

/**
 * One agent-triggered event outside a brokered call (Model A, resolve). `durable`: published
 * before the caller goes on (503 when the bus cannot take it: no audit, no credential);
 * otherwise retried in the background like a terminal event.
 */
export async function recordAgentEvent(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  connectionId: string | null,
  e: { action: AuditAction; decision: AuditDecision; metadata: Record<string, unknown>; durable: boolean },
): Promise<string> {
  const event = auditEvent(deps, agent, connectionId, e.action, e.decision, e.metadata);
  if (!e.durable) {
    publishEventually(deps, event);
    return event.auditId;
  }
  try {
    await publish(deps, event);
  } catch {
    throw Errors.unavailable('cannot record the request; nothing was handed out');
  }
  return event.auditId;
}

export interface Denial {
  status: number;
  reason: string;
  /** The error code the agent sees; by default derived from the status. */
  code?: string;
  retryAfter?: number;
  metadata?: Record<string, unknown>;
}

export class CallRecorder {
  private settledAuditId: string | null = null;
  private terminalSent: Promise<void> = Promise.resolve();
  private readonly context: Record<string, unknown>;

  private constructor(
    private readonly deps: DataPlaneDeps,
    private readonly agent: AgentPrincipal,
    private readonly connectionId: string,
    readonly requestAuditId: string,
    meta: Record<string, unknown>,
    /**
     * Resolves once `execution_requested` is stored; rejects with the 503 when the event bus
     * cannot take it. Await it before anything that acts (an approval redeemed or filed,
     * credentials fetched, the provider called) and before answering.
     */
    readonly recorded: Promise<void>,
  ) {
    this.context = { ...meta, requestAuditId };
  }

  /** Starts publishing `execution_requested`; the caller may decide meanwhile (ADR 0072). */
  static begin(
    deps: DataPlaneDeps,
    agent: AgentPrincipal,
    connectionId: string,
    meta: Record<string, unknown>,
    url: string,
  ): CallRecorder {
    const requested = auditEvent(deps, agent, connectionId, 'execution_requested', 'allowed', {
      ...meta,
      url: auditUrl(url),
    });
    const recorded = publish(deps, requested).catch(() => {
      throw Errors.unavailable('cannot record the request; not executed');
    });
    // Every path awaits it before answering; this only keeps an early refusal from reporting
    // the rejection as unhandled before that await.
    recorded.catch(() => undefined);
    return new CallRecorder(deps, agent, connectionId, requested.auditId, meta, recorded);
  }

  get settled(): boolean {
    return this.settledAuditId !== null;
  }

  /** Adds fields every later event carries (the canonical path once it is known). */
  annotate(fields: Record<string, unknown>): void {
    Object.assign(this.context, fields);
  }

  /** Records the terminal event unless one was recorded already; returns its audit id. */
  terminal(action: TerminalAction, metadata: Record<string, unknown>): string {
    if (this.settledAuditId !== null) return this.settledAuditId;
    const decision: AuditDecision = action === 'execution_completed' ? 'allowed' : 'denied';
    const e = auditEvent(this.deps, this.agent, this.connectionId, action, decision, {
      ...this.context,
      ...metadata,
    });
    this.settledAuditId = e.auditId;
    // After its request is stored, so the stream holds them in order; never without it (the
    // agent is then answered 503 instead, as though nothing had been decided).
    this.recorded.then(
      () => publishEventually(this.deps, e),
      () => undefined,
    );
    // Registered after the publish above, so the bus is asked once the event is queued.
    this.terminalSent = this.recorded.then(
      () => this.deps.bus.sent(),
      () => undefined,
    );
    return e.auditId;
  }

  /**
   * Resolves once the terminal event (if any yet) has been handed to the bus's connection. The
   * answer to the agent waits for it, so a data plane killed after answering has sent the
   * outcome already (ADR 0085); it does not wait for the broker's ack (ADR 0004).
   */
  get outcomeSent(): Promise<void> {
    return this.terminalSent;
  }

  completed(metadata: Record<string, unknown>): string {
    return this.terminal('execution_completed', metadata);
  }

  failed(error: string, metadata: Record<string, unknown> = {}): string {
    return this.terminal('execution_error', { ...metadata, error });
  }

  /** Records a refusal and returns the error to throw. */
  deny(d: Denial): AppError {
    const action = d.status === 429 ? 'rate_limit_exceeded' : 'execution_denied';
    const auditId = this.terminal(action, { ...d.metadata, reason: d.reason });
    const code =
      d.code ??
      (d.status === 413 ? 'PAYLOAD_TOO_LARGE' : d.status === 429 ? 'RATE_LIMITED' : 'POLICY_DENIED');
    return new AppError(code, d.status, d.reason, {
      auditId,
      ...(d.retryAfter !== undefined && {
        retryAfter: d.retryAfter,
        headers: { 'retry-after': String(d.retryAfter) },
      }),
    });
  }

  /** For an error no branch recorded: a client error is a denial, anything else an error. */
  settleFromError(err: unknown): void {
    if (this.settled) return;
    const client = err instanceof AppError && err.statusCode < 500;
    this.terminal(client ? 'execution_denied' : 'execution_error', {
      error: err instanceof AppError ? err.code : 'INTERNAL',
      ...(client && { reason: err.message }),
    });
  }
}
