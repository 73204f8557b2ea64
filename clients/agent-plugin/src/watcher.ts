/**
 * The background approval watcher (spec, "Plugin behaviour"): every approval the plugin saw
 * filed (a 202) is polled with `GET /v1/approvals/:id` every `WATCHER_POLL_MS`; once it is
 * approved, denied, expired or consumed the agent is woken. Approvals of language-model calls
 * (`llm://` URLs) are not woken — waking the agent would start another model call — but handed
 * over to be replayed on the session's next user turn.
 *
 * Polling runs only while something is pending, one round at a time, on an unref'd timer: an
 * idle plugin makes no requests and never keeps the host process alive.
 */
import type { ApprovalView } from '@vlt/sdk';
import { VaultReenrolmentError, VaultPluginError } from './errors.js';
import type { Log } from './log.js';
import type { SessionRef } from './session.js';

export type TerminalStatus = 'approved' | 'denied' | 'expired' | 'consumed';

export interface ApprovalResolution {
  approvalRequestId: string;
  status: TerminalStatus;
  /** The request as the vault recorded it (method, and the URL reviewers saw). */
  method: string;
  url: string;
  session: SessionRef;
  approval: ApprovalView;
}

export interface WatcherOptions {
  /** Reads one approval; throws the plugin's typed errors. */
  getApproval(id: string): Promise<ApprovalView>;
  pollMs: number;
  /** An approval of an ordinary request was decided: wake the agent. */
  onWake(resolution: ApprovalResolution): void;
  /** An approval of a model call (`llm://`) was decided: keep it for the next user turn. */
  onDeferred(resolution: ApprovalResolution): void;
  log: Log;
  /** At most this many approvals are watched; the oldest is dropped first. */
  maxTracked?: number;
}

const DEFAULT_MAX_TRACKED = 200;
/** Approvals expire after 5 minutes; one not settled after an hour is not worth polling. */
const MAX_AGE_MS = 60 * 60 * 1000;

interface Watched {
  session: SessionRef;
  since: number;
}

export function isLlmUrl(url: string): boolean {
  return url.startsWith('llm://');
}

export class ApprovalWatcher {
  readonly #o: WatcherOptions;
  readonly #pending = new Map<string, Watched>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #polling = false;
  #stopped = false;

  constructor(o: WatcherOptions) {
    this.#o = o;
  }

  get size(): number {
    return this.#pending.size;
  }

  has(id: string): boolean {
    return this.#pending.has(id);
  }

  track(id: string, session: SessionRef): void {
    if (this.#stopped) return;
    this.#pending.delete(id);
    this.#pending.set(id, { session, since: Date.now() });
    const max = this.#o.maxTracked ?? DEFAULT_MAX_TRACKED;
    for (const oldest of this.#pending.keys()) {
      if (this.#pending.size <= max) break;
      this.#pending.delete(oldest);
      this.#o.log.warn(`approval watcher is full: no longer watching approval ${oldest}`);
    }
    this.#schedule();
  }

  /** Stops watching `id` (a caller now waits for it itself); true when it was watched. */
  untrack(id: string): boolean {
    return this.#pending.delete(id);
  }

  stop(): void {
    this.#stopped = true;
    this.#pending.clear();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#timer || this.#polling || this.#stopped || this.#pending.size === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#poll();
    }, this.#o.pollMs);
    this.#timer.unref?.();
  }

  async #poll(): Promise<void> {
    this.#polling = true;
    let keepPolling = true;
    try {
      for (const [id, watched] of [...this.#pending]) {
        if (this.#stopped) return;
        if (!this.#pending.has(id)) continue;
        if (Date.now() - watched.since > MAX_AGE_MS) {
          this.#pending.delete(id);
          this.#o.log.warn(`approval ${id} stayed undecided for an hour; no longer watching it`);
          continue;
        }
        keepPolling = await this.#check(id, watched);
        if (!keepPolling) break;
      }
    } finally {
      this.#polling = false;
      if (keepPolling) this.#schedule();
    }
  }

  /** Polls one approval; false when polling must pause (the enrolment is broken). */
  async #check(id: string, watched: Watched): Promise<boolean> {
    let approval: ApprovalView;
    try {
      approval = await this.#o.getApproval(id);
    } catch (err) {
      if (err instanceof VaultReenrolmentError) {
        // Every poll would cost two refused token requests: pause until something new is tracked.
        this.#o.log.error(`approval watcher paused: ${err.message}`);
        return false;
      }
      if (err instanceof VaultPluginError && err.status === 404) {
        this.#pending.delete(id);
        this.#o.log.warn(`approval ${id} no longer exists; no longer watching it`);
        return true;
      }
      this.#o.log.debug(`approval ${id} could not be read this round (${(err as Error).message})`);
      return true;
    }
    if (approval.status === 'pending') return true;
    // A waiter may have taken it over while the request was in flight.
    if (!this.#pending.delete(id)) return true;
    const details = approval.requestDetails;
    const resolution: ApprovalResolution = {
      approvalRequestId: id,
      status: approval.status,
      method: typeof details.method === 'string' ? details.method : '',
      url: typeof details.url === 'string' ? details.url : '',
      session: watched.session,
      approval,
    };
    this.#o.log.info(`approval ${id} is ${approval.status}`);
    try {
      if (isLlmUrl(resolution.url)) this.#o.onDeferred(resolution);
      else this.#o.onWake(resolution);
    } catch (err) {
      this.#o.log.error(`waking the agent for approval ${id} failed: ${(err as Error).message}`);
    }
    return true;
  }
}
