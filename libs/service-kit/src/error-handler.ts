import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { AppError } from './errors.js';
import { libraryAppError } from './error-mapping.js';

/**
 * Prisma's "could not start a transaction in time" (P2028) and "connection pool timeout"
 * (P2024). Recognised by their stable codes, never by message.
 */
function isDatabaseBusy(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'P2028' || code === 'P2024';
}

/** Headers describing a response body that an error answer replaces. */
const ENTITY_HEADERS = [
  'content-type',
  'content-length',
  'content-encoding',
  'content-disposition',
  'content-language',
  'etag',
  'last-modified',
  'cache-control',
  'x-accel-buffering',
];

function sendAppError(reply: FastifyReply, err: AppError) {
  if (err.extra.headers) void reply.headers(err.extra.headers);
  const body: Record<string, unknown> = { error: err.message, code: err.code };
  if (err.extra.auditId) body.auditId = err.extra.auditId;
  if (err.extra.retryAfter !== undefined) body.retryAfter = err.extra.retryAfter;
  return reply.status(err.statusCode).send(body);
}

/**
 * The one place errors become responses: `{error, code}` with the catalogue's status.
 * Unknown errors become a generic 500 — the detail goes to the log, never to the client.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | AppError | Error, request, reply) => {
    // A stream that fails before its first byte arrives here with the headers of the
    // response it was going to be (event stream, download): the error is JSON, and none of
    // them describe it.
    for (const name of ENTITY_HEADERS) reply.removeHeader(name);
    void reply.type('application/json; charset=utf-8');
    const mapped = err instanceof AppError ? err : libraryAppError(err);
    if (mapped) {
      if (mapped !== err)
        request.log.warn({ err: { name: err.name, message: err.message } }, 'library error');
      return sendAppError(reply, mapped);
    }
    if (hasZodFastifySchemaValidationErrors(err)) {
      const details = err.validation.map((v) => ({
        path: `${err.validationContext ?? 'body'}${v.instancePath ? v.instancePath.replace(/\//g, '.') : ''}`,
        message: v.message ?? 'invalid',
      }));
      const first = details[0];
      return reply.status(400).send({
        error: first ? `invalid request: ${first.path}: ${first.message}` : 'invalid request',
        code: 'BAD_REQUEST',
        details,
      });
    }
    if (isResponseSerializationError(err)) {
      request.log.error({ err: { message: err.message } }, 'response did not match its schema');
      return reply.status(500).send({ error: 'internal error', code: 'INTERNAL' });
    }
    const status = (err as FastifyError).statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      // Fastify's own client errors (bad JSON, unsupported media type, body too large).
      return reply
        .status(status)
        .send({ error: err.message, code: (err as FastifyError).code ?? 'BAD_REQUEST' });
    }
    if (isDatabaseBusy(err)) {
      // The database could not take the work in time: a transient condition, not a bug.
      request.log.warn({ code: (err as { code?: string }).code }, 'database busy');
      return reply
        .status(503)
        .header('retry-after', '1')
        .send({ error: 'the database is busy; retry shortly', code: 'SERVICE_UNAVAILABLE', retryAfter: 1 });
    }
    request.log.error({ err }, 'unhandled error');
    return reply.status(500).send({ error: 'internal error', code: 'INTERNAL' });
  });

  app.setNotFoundHandler((request, reply) => {
    void reply
      .status(404)
      .send({ error: `no route for ${request.method} ${request.url.split('?')[0]}`, code: 'NOT_FOUND' });
  });
}
