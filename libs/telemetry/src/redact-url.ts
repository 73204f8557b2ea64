/*
 * URLs reach logs and span attributes from many places (incoming requests, upstream calls made for
 * agents) and can carry bearer material: an SSE token passed as a query parameter, an OAuth `code`,
 * an upstream API key in `?key=`, userinfo, a bot token or a quick-action token inside the path. Query values are
 * therefore never kept, only their keys; the rest is scrubbed by the patterns below.
 */

export const REDACTED = 'REDACTED';

/** Query keys that look like ordinary parameter names are kept; anything else could itself be a secret. */
const PLAIN_KEY = /^[A-Za-z0-9_.[\]-]{1,64}$/;

/** Secrets recognisable anywhere in a URL: this product's own tokens and chat-bot API path tokens (`/bot<id>:<secret>/`). */
const EMBEDDED_SECRETS: readonly [RegExp, string][] = [
  [/\bvlt([ptb])_[A-Za-z0-9_-]+/g, `vlt$1_${REDACTED}`],
  [/\/bot\d+:[A-Za-z0-9_-]+/g, `/bot${REDACTED}`],
  // Bot-chat Approve/Deny links: the path segment is the credential.
  [/\/api\/quick-action\/[^/?#]+/g, `/api/quick-action/${REDACTED}`],
];

function scrubEmbedded(text: string): string {
  return EMBEDDED_SECRETS.reduce((acc, [pattern, replacement]) => acc.replace(pattern, replacement), text);
}

/** `a=1&b=2` → `a=REDACTED&b=REDACTED`; keys that are not plain names become `REDACTED` too. */
export function redactQuery(query: string): string {
  const q = query.startsWith('?') ? query.slice(1) : query;
  if (q === '') return '';
  return q
    .split('&')
    .filter(Boolean)
    .map((pair) => {
      const rawKey = pair.split('=', 1)[0] ?? '';
      let key: string;
      try {
        key = decodeURIComponent(rawKey.replace(/\+/g, ' '));
      } catch {
        key = '';
      }
      return `${PLAIN_KEY.test(key) ? encodeURIComponent(key) : REDACTED}=${REDACTED}`;
    })
    .join('&');
}

/**
 * Redacts a URL or a request target (`/path?query`) for logging and tracing: drops userinfo and
 * fragment, keeps only query keys, and scrubs known embedded secrets. Never throws.
 */
export function redactUrl(url: string): string {
  if (typeof url !== 'string' || url === '') return '';
  const hashAt = url.indexOf('#');
  const noFragment = hashAt === -1 ? url : url.slice(0, hashAt);
  const queryAt = noFragment.indexOf('?');
  let base = queryAt === -1 ? noFragment : noFragment.slice(0, queryAt);
  const query = queryAt === -1 ? '' : redactQuery(noFragment.slice(queryAt + 1));
  // Userinfo: `scheme://user:pass@host` → `scheme://REDACTED@host` (string surgery, so odd inputs never throw).
  base = base.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/]*@/, `$1${REDACTED}@`);
  return scrubEmbedded(query ? `${base}?${query}` : base);
}
