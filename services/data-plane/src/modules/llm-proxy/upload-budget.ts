/**
 * The upload bytes one process holds at once (ADR 0096). An upload through the LLM proxy is
 * held in memory while it is read, rewritten and sent; without a bound, a few agents sending
 * large forms at once could exhaust a pod that serves everyone else's calls.
 */
export class UploadBudget {
  private held = 0;

  constructor(readonly capacity: number) {}

  /** Bytes reserved now. */
  get inUse(): number {
    return this.held;
  }

  /**
   * Reserves `bytes`, or refuses (null) when they would take the total over the capacity. The
   * release it returns gives them back once, however often it is called.
   */
  tryReserve(bytes: number): (() => void) | null {
    if (this.held + bytes > this.capacity) return null;
    this.held += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held -= bytes;
    };
  }
}
