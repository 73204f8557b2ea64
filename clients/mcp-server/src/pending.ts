/**
 * Requests the vault paused for approval, by approval id, so `vault_await_approval` can run
 * exactly what the agent asked for once a person approves it. Shared by every MCP session of
 * the process (they all act as the one agent). Bounded: the oldest entries go first; an
 * approval that is no longer here is replayed from the vault's own record of the request.
 */
import type { ExecuteRequest } from '@vlt/sdk';

export type PendingCall =
  | { kind: 'execute'; request: ExecuteRequest }
  | { kind: 'download'; request: ExecuteRequest; filename: string | undefined };

const DEFAULT_CAPACITY = 256;

export class PendingCalls {
  private readonly calls = new Map<string, PendingCall>();

  constructor(private readonly capacity = DEFAULT_CAPACITY) {}

  remember(approvalId: string, call: PendingCall): void {
    this.calls.delete(approvalId);
    this.calls.set(approvalId, call);
    while (this.calls.size > this.capacity) {
      const oldest = this.calls.keys().next().value;
      if (oldest === undefined) break;
      this.calls.delete(oldest);
    }
  }

  get(approvalId: string): PendingCall | undefined {
    return this.calls.get(approvalId);
  }

  forget(approvalId: string): void {
    this.calls.delete(approvalId);
  }

  get size(): number {
    return this.calls.size;
  }
}
