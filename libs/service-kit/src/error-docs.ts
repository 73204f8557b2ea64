/**
 * docs/errors.md, rendered from the catalogue: what a client can branch on, never written by
 * hand (the test beside this file fails when the two differ).
 */
import { errorCatalogue } from './errors.js';

export function renderErrorDocs(): string {
  const rows = [...errorCatalogue]
    .sort((a, b) => a.status - b.status || a.code.localeCompare(b.code))
    .map((e) => `| \`${e.code}\` | ${e.status} | ${e.meaning} |`);
  return [
    '# Error codes',
    '',
    '<!-- Generated from libs/service-kit/src/errors.ts by `UPDATE_ERROR_DOCS=1 pnpm vitest run libs/service-kit`. Do not edit. -->',
    '',
    'Every error response is a JSON object `{error, code}`: `error` is a sentence for people, `code`',
    'is stable and is what a client branches on. Execution errors may also carry `auditId` (the audit',
    'event that recorded the refusal) and rate limits `retryAfter` (seconds, also sent as',
    '`Retry-After`). Request validation failures carry `details` (`[{path, message}]`).',
    '',
    '| code | status | meaning |',
    '| ---- | ------ | ------- |',
    ...rows,
    '| `INTERNAL` | 500 | an unexpected error; the detail is logged, never returned |',
    '',
    "Fastify's own client errors (malformed JSON, an unsupported media type, a body over the size",
    "limit) keep Fastify's `FST_ERR_*` code with their 4xx status.",
    '',
  ].join('\n');
}
