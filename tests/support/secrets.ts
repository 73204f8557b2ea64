/**
 * Collects every secret a scenario handles, then searches text (process logs, API responses,
 * audit exports) for any of them. Reports name the secret by label and mask the value, so a
 * failure message never spreads the secret further.
 */
import type { LogLine } from './processes.js';

export interface Leak {
  label: string;
  where: string;
  excerpt: string;
}

export class SecretBag {
  private readonly entries: { label: string; value: string }[] = [];

  /**
   * Registers a secret. With `prefix` (e.g. `vltt_`), the part after it is searched for too,
   * in case something logs the token body without its prefix.
   */
  add(label: string, value: string | undefined, prefix?: string): void {
    if (!value) return;
    // Short strings would match by accident; nothing this bag is given is that short.
    if (value.length < 12) throw new Error(`secret ${label} is too short to search for reliably`);
    this.entries.push({ label, value });
    if (prefix && value.startsWith(prefix) && value.length - prefix.length >= 16) {
      this.entries.push({ label: `${label} (without ${prefix})`, value: value.slice(prefix.length) });
    }
  }

  /** A JWT leaks if the whole token or just its signature shows up. */
  addJwt(label: string, jwt: string): void {
    this.add(label, jwt);
    const sig = jwt.split('.')[2];
    if (sig && sig.length >= 16) this.entries.push({ label: `${label} signature`, value: sig });
  }

  get size(): number {
    return this.entries.length;
  }

  labels(): string[] {
    return [...new Set(this.entries.map((e) => e.label))];
  }

  scanText(where: string, text: string): Leak[] {
    const leaks: Leak[] = [];
    for (const e of this.entries) {
      const at = text.indexOf(e.value);
      if (at >= 0)
        leaks.push({
          label: e.label,
          where,
          excerpt: this.mask(text.slice(Math.max(0, at - 120), at + e.value.length + 120)),
        });
    }
    return leaks;
  }

  scanLines(lines: LogLine[]): Leak[] {
    return lines.flatMap((l, i) => this.scanText(`${l.process} ${l.stream} line ${i}`, l.text));
  }

  private mask(text: string): string {
    let out = text;
    for (const e of this.entries) out = out.split(e.value).join(`<${e.label}>`);
    return out;
  }
}
