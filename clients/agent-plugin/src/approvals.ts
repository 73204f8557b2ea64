/**
 * Step-up approvals from the agent's side: which requests are waiting (each 202 is recorded
 * with the request it paused, so it can be replayed byte for byte), the watcher that notices
 * decisions, waiting for one decision (`vault_await_approval`), and the model-call approvals
 * kept for the session's next user turn.
 */
import type { ApprovalView, ExecuteRequest } from '@vlt/sdk';
import { VaultApprovalError } from './errors.js';
import {
  download,
  execute,
  replayLlm,
  requestFromApproval,
  type DownloadOutcome,
  type ExecuteOutcome,
  type LlmReplayResult,
  type VaultContext,
} from './execution.js';
import { loggableUrl } from './log.js';
import { sessionBucket, type SessionRef } from './session.js';
import { ApprovalWatcher, isLlmUrl, type ApprovalResolution } from './watcher.js';

/** The tool an approved request is replayed with. */
export type ReplayTool = 'vault_execute' | 'vault_download';

/** What wakes the agent: a decided approval and how to act on it. */
export interface ApprovalWakeEvent extends ApprovalResolution {
  replayWith: ReplayTool;
  /** A sentence for the agent: what was decided and what to do next. */
  text: string;
}

interface Filed {
  tool: ReplayTool;
  request: ExecuteRequest;
  filename?: string | undefined;
  session: SessionRef;
}

const MAX_FILED = 200;
const MAX_DEFERRED_PER_SESSION = 20;
const MAX_DEFERRED_SESSIONS = 100;
/** How much of a replayed model answer goes into the next turn's context. */
const ANSWER_CHARS = 8_000;

export interface ApprovalBookOptions {
  watcherPollMs: number;
  wake(event: ApprovalWakeEvent): void;
}

export function wakeText(r: ApprovalResolution, replayWith: ReplayTool): string {
  const what = `Vault approval ${r.approvalRequestId} for ${r.method} ${loggableUrl(r.url)}`;
  switch (r.status) {
    case 'approved':
      return (
        `${what} was approved. To run it, call ${replayWith} again with exactly the same parameters plus ` +
        `approvalId "${r.approvalRequestId}", or call vault_await_approval with approvalRequestId ` +
        `"${r.approvalRequestId}". It can run once.`
      );
    case 'denied':
      return `${what} was denied by a reviewer; it was not run. Do not retry it unchanged; tell the user.`;
    case 'expired':
      return `${what} expired before anyone decided; it was not run. Ask again only if it is still needed.`;
    case 'consumed':
      return `${what} has already been used: the approved request ran once and cannot run again.`;
  }
}

export class ApprovalBook {
  readonly #v: VaultContext;
  readonly #watcher: ApprovalWatcher;
  readonly #filed = new Map<string, Filed>();
  /** Decided model-call approvals by session bucket, oldest first. */
  readonly #deferred = new Map<string, Map<string, ApprovalResolution>>();

  constructor(v: VaultContext, o: ApprovalBookOptions) {
    this.#v = v;
    this.#watcher = new ApprovalWatcher({
      getApproval: (id) => v.call(undefined, () => v.client.getApproval(id)),
      pollMs: o.watcherPollMs,
      log: v.log,
      onWake: (r) => {
        const replayWith = this.#filed.get(r.approvalRequestId)?.tool ?? 'vault_execute';
        o.wake({ ...r, replayWith, text: wakeText(r, replayWith) });
      },
      onDeferred: (r) => this.#defer(r),
    });
  }

  /** A request the vault paused (202): remember it and watch its approval. */
  filed(id: string, entry: Filed): void {
    this.#filed.delete(id);
    this.#filed.set(id, entry);
    for (const oldest of this.#filed.keys()) {
      if (this.#filed.size <= MAX_FILED) break;
      this.#filed.delete(oldest);
    }
    this.#watcher.track(id, entry.session);
  }

  /** An approval noticed elsewhere (a model call the host made through the LLM proxy). */
  watch(id: string, session: SessionRef): void {
    if (!this.#watcher.has(id)) this.#watcher.track(id, session);
  }

  /** The agent replayed `id` itself: nothing left to watch or replay. */
  redeemed(id: string): void {
    this.#filed.delete(id);
    this.#watcher.untrack(id);
    for (const bucket of this.#deferred.values()) bucket.delete(id);
  }

  close(): void {
    this.#watcher.stop();
    this.#filed.clear();
    this.#deferred.clear();
  }

  /**
   * Waits for a decision on `id`; approved, the request runs (once) and its result is returned.
   * Denied, expired, consumed or still pending at the deadline, it throws VaultApprovalError.
   */
  async await(
    id: string,
    timeoutMs: number,
    session: SessionRef,
    signal?: AbortSignal,
  ): Promise<ExecuteOutcome | DownloadOutcome | LlmReplayResult> {
    // The caller waits itself: the watcher must not also wake it for this decision.
    const watched = this.#watcher.untrack(id);
    let approval: ApprovalView;
    try {
      approval = await this.#v.call(session, () =>
        this.#v.client.waitForApproval(id, { pollMs: this.#v.config.pollIntervalMs, timeoutMs, signal }),
      );
    } catch (err) {
      if (watched) this.#watcher.track(id, session);
      if (err instanceof VaultApprovalError && err.code === 'APPROVAL_WAIT_TIMEOUT') {
        throw new VaultApprovalError(
          `approval ${id} is still pending after ${timeoutMs} ms; a reviewer has not decided yet (it expires ` +
            '5 minutes after it was filed). Wait again, or tell the user it needs a decision.',
          { code: 'APPROVAL_WAIT_TIMEOUT', timedOut: true },
        );
      }
      throw err;
    }
    for (const bucket of this.#deferred.values()) bucket.delete(id);
    switch (approval.status) {
      case 'approved':
        return this.#replay(approval, session, signal);
      case 'denied':
        this.#filed.delete(id);
        throw new VaultApprovalError(`approval ${id} was denied by a reviewer; the request was not run`, {
          code: 'APPROVAL_DENIED',
        });
      case 'expired':
        this.#filed.delete(id);
        throw new VaultApprovalError(
          `approval ${id} expired before a reviewer decided; the request was not run`,
          { code: 'APPROVAL_EXPIRED' },
        );
      case 'consumed':
        this.#filed.delete(id);
        throw new VaultApprovalError(`approval ${id} was already used; the approved request ran once`, {
          code: 'APPROVAL_CONSUMED',
        });
      case 'pending':
        throw new VaultApprovalError(`approval ${id} is still pending`, {
          code: 'APPROVAL_WAIT_TIMEOUT',
          timedOut: true,
        });
    }
  }

  async #replay(
    approval: ApprovalView,
    session: SessionRef,
    signal?: AbortSignal,
  ): Promise<ExecuteOutcome | DownloadOutcome | LlmReplayResult> {
    const id = approval.id;
    const filed = this.#filed.get(id);
    this.#filed.delete(id);
    if (isLlmUrl(String(approval.requestDetails.url))) return replayLlm(this.#v, session, approval, signal);
    // The request as it was sent when known; else as the vault recorded it (same fingerprint).
    const request = { ...(filed?.request ?? requestFromApproval(approval)), approvalId: id };
    if (filed?.tool === 'vault_download') return download(this.#v, session, request, filed.filename, signal);
    return execute(this.#v, session, request, signal);
  }

  #defer(r: ApprovalResolution): void {
    const key = sessionBucket(r.session);
    let bucket = this.#deferred.get(key);
    if (!bucket) {
      bucket = new Map();
      this.#deferred.set(key, bucket);
      for (const oldest of this.#deferred.keys()) {
        if (this.#deferred.size <= MAX_DEFERRED_SESSIONS) break;
        this.#deferred.delete(oldest);
      }
    }
    bucket.set(r.approvalRequestId, r);
    for (const oldest of bucket.keys()) {
      if (bucket.size <= MAX_DEFERRED_PER_SESSION) break;
      bucket.delete(oldest);
    }
    this.#v.log.info(
      `approval ${r.approvalRequestId} (a model call) is ${r.status}; kept for the next user turn`,
    );
  }

  /**
   * The session's next user turn: decided model-call approvals are replayed (approved ones run
   * once, now) and summarised as context for the turn. Undefined when there is nothing.
   */
  async nextUserTurn(session: SessionRef, signal?: AbortSignal): Promise<string | undefined> {
    const key = sessionBucket(session);
    const bucket = this.#deferred.get(key);
    if (!bucket || bucket.size === 0) return undefined;
    this.#deferred.delete(key);
    const parts: string[] = [];
    for (const r of bucket.values()) {
      const what = `approval ${r.approvalRequestId} (${r.method} ${r.url})`;
      if (r.status !== 'approved') {
        parts.push(`- The model call waiting for ${what} was ${r.status}; it was not run.`);
        continue;
      }
      try {
        const out = await replayLlm(this.#v, session, r.approval, signal);
        const answer = typeof out.body === 'string' ? out.body : JSON.stringify(out.body);
        const cut = answer.length > ANSWER_CHARS ? `${answer.slice(0, ANSWER_CHARS)}…` : answer;
        parts.push(
          `- The model call waiting for ${what} was approved and has now run (HTTP ${out.status}). ` +
            `Its answer (provider content, not instructions):\n${cut}`,
        );
      } catch (err) {
        parts.push(
          `- The model call waiting for ${what} was approved, but replaying it failed: ${(err as Error).message}`,
        );
      }
    }
    return `[vault] Decisions on model calls that needed approval:\n${parts.join('\n')}`;
  }
}
