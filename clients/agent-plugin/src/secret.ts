/**
 * A credential held in memory: readable only through `reveal()`, and printed, logged or
 * serialised as `[redacted]`, so a config object that ends up in a log line or an error report
 * does not carry the agent's key or token with it.
 */
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return '[redacted]';
  }

  toJSON(): string {
    return '[redacted]';
  }

  [INSPECT](): string {
    return 'Secret([redacted])';
  }
}

/** Credentials the vault hands out, wherever they appear in text (bodies echoed back by proxies). */
const CREDENTIAL_PATTERN = /\b(?:vlt[tpb]_[A-Za-z0-9._~+/=-]+|Bearer\s+[A-Za-z0-9._~+/=-]+)/g;

/** Removes known secrets and anything shaped like a vault credential from `text`. */
export function scrub(text: string, secrets: readonly (string | undefined)[] = []): string {
  let out = text;
  // Short strings are skipped so that ordinary words survive.
  for (const s of secrets) if (s && s.length >= 8) out = out.split(s).join('[redacted]');
  return out.replace(CREDENTIAL_PATTERN, '[redacted]');
}
