/**
 * Headers an agent may pass to the upstream (docs/decisions/0006). Credentials, hop-by-hop,
 * `Proxy-*`, forwarding and `x-vlt-*` headers are stripped (the data plane injects credentials
 * and owns the connection); method-override headers are refused because they would let a GET
 * that the rules judged as a read act as a write upstream.
 */

const STRIPPED = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'cookie2',
  // Routing overrides some frameworks and proxies honour: the URL judged must be the URL served.
  'x-original-url',
  'x-rewrite-url',
  'x-original-uri',
  'x-override-url',
  'x-http-destinationurl',
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'expect',
  'forwarded',
  'via',
  'x-real-ip',
]);

const REFUSED = new Set(['x-http-method-override', 'x-http-method', 'x-method-override']);

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const VALUE = /^[\t\u0020-\u007e\u0080-\u00ff]*$/;

export type SanitizedHeaders = { ok: true; headers: Record<string, string> } | { ok: false; reason: string };

export function sanitizeRequestHeaders(headers: Record<string, unknown> | undefined): SanitizedHeaders {
  const out: Record<string, string> = {};
  if (headers === undefined) return { ok: true, headers: out };
  for (const [rawName, rawValue] of Object.entries(headers)) {
    const name = rawName.toLowerCase();
    // Never echo an invalid name raw: it may hold NUL or lone surrogates that break whatever
    // stores the reason (audit rows, logs).
    if (!TOKEN.test(name)) return { ok: false, reason: `invalid header name ${describeName(rawName)}` };
    if (REFUSED.has(name)) return { ok: false, reason: `header "${rawName}" is not allowed` };
    if (
      STRIPPED.has(name) ||
      name.startsWith('proxy-') ||
      name.startsWith('x-forwarded-') ||
      name.startsWith('x-vlt-')
    )
      continue;
    const value = Array.isArray(rawValue) ? rawValue.join(', ') : rawValue;
    if (typeof value !== 'string' || !VALUE.test(value)) {
      return { ok: false, reason: `invalid value for header "${name}"` };
    }
    out[name] = value;
  }
  return { ok: true, headers: out };
}

/** A header name as a reason may show it: JSON-escaped, without lone surrogates, bounded. */
function describeName(raw: string): string {
  const shown = JSON.stringify(raw.length > 64 ? `${raw.slice(0, 64)}…` : raw);
  return shown.replace(/\\u[dD][89a-fA-F][0-9a-fA-F]{2}/g, '\uFFFD');
}

export function headerValue(headers: Record<string, string>, name: string): string | undefined {
  return headers[name.toLowerCase()];
}
