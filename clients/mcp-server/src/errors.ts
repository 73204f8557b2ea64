/**
 * Errors of vlt-mcp itself (configuration, downloads), and the scrubbing every text that leaves
 * the process goes through. The vault's own refusals are @vlt/sdk's typed errors.
 */

/** Bad configuration: the message names the setting, never its value (it may be a secret). */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** A download that could not be written to the download directory. */
export class DownloadError extends Error {
  override name = 'DownloadError';
}

/**
 * The vault's credential prefixes: access tokens, bootstrap secrets, PATs. None should ever
 * reach this process's output; if one does (a provider echoing a header into an error, a bug),
 * it is cut here rather than trusted to every call site.
 */
const VAULT_CREDENTIAL = /\bvlt[tbp]_[A-Za-z0-9_-]+/g;

export function scrubText(text: string): string {
  return text.replace(VAULT_CREDENTIAL, (m) => `${m.slice(0, 5)}[redacted]`);
}
