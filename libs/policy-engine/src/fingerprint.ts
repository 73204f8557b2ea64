/**
 * The approval fingerprint: a SHA-256 over method, canonical URL (with `query` merged in),
 * body as canonical JSON (sorted keys; a string that is JSON counts as its value) and
 * `requestFullFields`. An approval executes only the request it was granted for; headers are
 * not part of it (the spec binds approvals to method, URL, query, body and full-fields flag).
 */
import { createHash } from 'node:crypto';
import { canonicalJson } from './json-util.js';
import { canonicalizeTarget } from './url-canonicalizer.js';

export interface FingerprintInput {
  method: string;
  url: string;
  query?: Record<string, string>;
  body?: unknown;
  requestFullFields?: boolean;
}

function canonicalBody(body: unknown): string {
  if (body === undefined || body === null || body === '') return 'none';
  if (typeof body === 'string') {
    try {
      return `json:${canonicalJson(JSON.parse(body))}`;
    } catch {
      return `text:${body}`;
    }
  }
  return `json:${canonicalJson(body)}`;
}

export function requestFingerprint(req: FingerprintInput): string {
  const target = canonicalizeTarget(req.url, req.query);
  const url = target.ok ? target.href : `raw:${req.url}?${canonicalJson(req.query ?? {})}`;
  const material = JSON.stringify([
    'vlt-approval-fingerprint-v1',
    String(req.method).toUpperCase(),
    url,
    canonicalBody(req.body),
    req.requestFullFields === true,
  ]);
  return createHash('sha256').update(material).digest('hex');
}
