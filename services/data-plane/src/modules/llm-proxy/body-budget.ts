/**
 * The bytes of large request bodies one process holds at once (ADR 0096). A call through the
 * LLM proxy is held in memory while it is judged and sent, an upload while it is rewritten
 * too; without a bound, a few agents sending large bodies at once could exhaust a pod that
 * serves everyone else's calls.
 */
export class BodyBudget {
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
