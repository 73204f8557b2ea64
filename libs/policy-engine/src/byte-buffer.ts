/**
 * A growable byte queue: appends are amortised O(1) and consumed bytes are dropped lazily, so a
 * stream that arrives one byte at a time costs linear, not quadratic, time.
 */
export class ByteBuffer {
  private data = new Uint8Array(0);
  private start = 0;
  private end = 0;

  get length(): number {
    return this.end - this.start;
  }

  append(chunk: Uint8Array): void {
    const needed = this.length + chunk.byteLength;
    if (this.end + chunk.byteLength > this.data.length) {
      if (needed <= this.data.length / 2 + 1 && this.data.length > 0) {
        this.data.copyWithin(0, this.start, this.end);
      } else {
        const next = new Uint8Array(Math.max(needed * 2, 1024));
        next.set(this.data.subarray(this.start, this.end));
        this.data = next;
      }
      this.end = this.length;
      this.start = 0;
    }
    this.data.set(chunk, this.end);
    this.end += chunk.byteLength;
  }

  /** A view of the unconsumed bytes; valid until the next append or consume. */
  view(): Uint8Array {
    return this.data.subarray(this.start, this.end);
  }

  at(i: number): number {
    return this.data[this.start + i]!;
  }

  /** A copy of bytes [from, to) relative to the unconsumed start. */
  copy(from: number, to: number): Uint8Array {
    return this.data.slice(this.start + from, this.start + to);
  }

  consume(n: number): void {
    this.start += n;
    if (this.start === this.end) this.start = this.end = 0;
  }

  clear(): void {
    this.start = this.end = 0;
  }
}
