import { isUtf8 } from 'node:buffer';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, Errors, libraryAppError, readBodyBytes } from '@vlt/service-kit';
import type { DataPlaneDeps } from '../../deps.js';
import { requireAgent } from '../../plugins/agent-auth.js';
import { agentGoneSignal } from '../execute/agent-gone.js';
import { RawJsonBody } from '../execute/respond.js';
import { carriedAsBase64 } from '../execute/response-decoding.js';
import { isLlmProvider, providerErrorBody, type LlmProvider } from './provider-shapes.js';
import { isUploadChunk, proxyLlmCall } from './service.js';
import { BodyBudget } from './body-budget.js';

const PREFIX = '/v1/vault/llm/';
const LEGACY_PREFIX = '/v1/llm/proxy/';

/** Response headers that describe one hop or the provider's session, never relayed. */
const NOT_RELAYED = new Set([
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'content-encoding',
]);

function providerOf(req: FastifyRequest): LlmProvider {
  const p = (req.params as { provider?: string }).provider ?? '';
  if (!isLlmProvider(p)) throw Errors.notFound(`unknown LLM provider ${p.slice(0, 40)}`);
  return p;
}

/** The path after `/v1/vault/llm/<provider>`, exactly as the SDK sent it, and the raw query. */
function splitTarget(rawUrl: string, provider: string): { path: string; query: string } {
  const q = rawUrl.indexOf('?');
  const pathPart = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const query = q === -1 ? '' : rawUrl.slice(q + 1);
  const path = pathPart.slice(PREFIX.length + provider.length);
  return { path: path === '' ? '/' : path, query };
}

/** JSON and text are what the SDKs send (ADR 0043); uploads are forms, read apart (ADR 0095). */
function isTextual(contentType: string | undefined): boolean {
  if (!contentType) return true;
  const ct = contentType.toLowerCase();
  return ct.includes('json') || ct.startsWith('text/');
}

/**
 * Bodies larger than this hold a share of the process's budget (ADR 0096). A chat call is a
 * few kilobytes; one that carries images, or an upload, is larger.
 */
const LARGE_BODY_BYTES = 64 * 1024;

/** The largest body a request may carry here: the LLM routes' own limit, or the route's. */
function bodyLimitOf(req: FastifyRequest, bodyMaxBytes: number): number {
  return req.routeOptions.url?.startsWith(PREFIX) ? bodyMaxBytes : req.routeOptions.bodyLimit;
}

/**
 * Fastify's own refusals of a request, such as a body over the limit, as the vault's: an SDK
 * reads those too, so they go out in the provider's shape like any other refusal.
 */
function requestRefusal(err: Error, req: FastifyRequest, bodyMaxBytes: number): AppError | null {
  const status = (err as FastifyError).statusCode;
  if (typeof status !== 'number' || status < 400 || status >= 500) return null;
  if (status === 413) {
    return Errors.payloadTooLarge(`request body is larger than ${bodyLimitOf(req, bodyMaxBytes)} bytes`);
  }
  return new AppError((err as FastifyError).code ?? 'BAD_REQUEST', status, err.message);
}

export function llmProxyRoutes(deps: DataPlaneDeps) {
  const bodyMaxBytes = deps.config.llmBodyMaxBytes;
  const largeBodies = new BodyBudget(deps.config.llmLargeBodiesInFlightBytes);
  const textBytes = new WeakMap<FastifyRequest, Buffer>();
  return async function (app: FastifyInstance) {
    // The body is forwarded as the SDK wrote it (numbers, key order): read as text, judged by
    // the pipeline where the policy reads it.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (req, payload, done) => {
      readBodyBytes(req, payload, bodyLimitOf(req, bodyMaxBytes), (err, body) => {
        if (err || !body) return done(err, undefined);
        // A chunk of a resumable upload is bytes whatever its content type says (ADR 0095).
        if (isUploadChunk(req.headers)) return done(null, body);
        if (!isTextual(req.headers['content-type'])) {
          done(Errors.unsupportedMediaType('the LLM proxy forwards JSON, text and forms only'), undefined);
          return;
        }
        // Valid UTF-8 is exactly the encoding of the text read from it: those bytes are sent,
        // not the text encoded again (ADR 0097). Invalid bytes are sent as the text judged.
        if (isUtf8(body)) textBytes.set(req, body);
        done(null, body.toString('utf8'));
      });
    });
    // An upload holds files: its bytes are read as they are, then part by part in the service.
    app.addContentTypeParser('multipart/form-data', (req, payload, done) => {
      readBodyBytes(req, payload, bodyLimitOf(req, bodyMaxBytes), done);
    });

    // A large body is held in memory while it is judged (and an upload while it is rewritten):
    // its bytes are reserved before the first is read, and given back when its answer has gone
    // (ADR 0096).
    app.addHook('onRequest', async (req, reply) => {
      if (!req.routeOptions.url?.startsWith(PREFIX)) return;
      const declared =
        req.headers['content-length'] === undefined ? NaN : Number(req.headers['content-length']);
      const known = Number.isSafeInteger(declared) && declared >= 0;
      // A small body is not counted; one over the limit is refused unread by the parser.
      if (known && (declared <= LARGE_BODY_BYTES || declared > bodyMaxBytes)) return;
      // No length and no chunked transfer: no body at all.
      if (!known && req.headers['transfer-encoding'] === undefined) return;
      const release = largeBodies.tryReserve(known ? declared : bodyMaxBytes);
      if (!release) {
        // Refused before the pipeline, like a body over the limit: logged for the pod's
        // operators, who size VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES, not audited.
        req.log.warn(
          { code: 'LARGE_BODIES_BUSY', inUse: largeBodies.inUse, capacity: largeBodies.capacity },
          'large request refused',
        );
        throw Errors.largeBodiesBusy(undefined, { retryAfter: 1, headers: { 'retry-after': '1' } });
      }
      reply.raw.once('close', release);
    });

    // Refusals in the provider's own error shape, so the SDK raises its API error with our message.
    app.setErrorHandler((err: Error, req, reply) => {
      const mapped =
        err instanceof AppError ? err : (libraryAppError(err) ?? requestRefusal(err, req, bodyMaxBytes));
      const provider = (req.params as { provider?: string }).provider ?? '';
      if (!mapped || !isLlmProvider(provider)) throw err;
      for (const name of ['content-type', 'content-length', 'cache-control', 'x-accel-buffering'])
        reply.removeHeader(name);
      if (mapped.extra.headers) void reply.headers(mapped.extra.headers);
      return reply
        .status(mapped.statusCode)
        .type('application/json; charset=utf-8')
        .send(
          providerErrorBody(provider, {
            status: mapped.statusCode,
            code: mapped.code,
            message: mapped.message,
            auditId: mapped.extra.auditId,
            retryAfter: mapped.extra.retryAfter,
          }),
        );
    });

    app.route({
      method: ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'],
      url: `${PREFIX}:provider/*`,
      config: { agentToken: 'sdk' },
      schema: { tags: ['execution'], security: [{ bearer: [] }], hide: false },
      handler: async (req: FastifyRequest, reply: FastifyReply) => {
        const agent = requireAgent(req);
        const provider = providerOf(req);
        const { path, query } = splitTarget(req.url, provider);
        const out = await proxyLlmCall(deps, agent, {
          provider,
          method: req.method,
          path,
          query,
          headers: req.headers,
          body: typeof req.body === 'string' || Buffer.isBuffer(req.body) ? req.body : undefined,
          textBytes: textBytes.get(req),
          agentGone: agentGoneSignal(reply),
          vaultBase: `${req.protocol}://${req.host}${PREFIX}${provider}`,
        });
        if (out.kind === 'approval') {
          const a = out.approval;
          return reply.status(202).send({
            ...a,
            approvalUrl: out.presentedUrl,
            // What an SDK that reads an `error` field shows; replay with x-vlt-approval-id once approved.
            ...providerErrorBody(provider, {
              status: 403,
              code: 'APPROVAL_REQUIRED',
              message: `approval required (request ${a.approvalRequestId}); once approved, retry with header x-vlt-approval-id: ${a.approvalRequestId}`,
              auditId: a.auditId,
            }),
          });
        }
        if (out.kind === 'streamed') {
          const r = out.result;
          // The provider's own headers, as on a buffered answer (SDKs read request ids and
          // rate-limit state from them), then the stream's own over them.
          for (const [name, value] of Object.entries(r.providerHeaders)) {
            if (!NOT_RELAYED.has(name)) void reply.header(name, value);
          }
          return reply.status(r.status).headers(r.headers).send(r.body);
        }
        const r = out.result;
        for (const [name, value] of Object.entries(r.headers)) {
          if (!NOT_RELAYED.has(name)) void reply.header(name, value);
        }
        void reply.header('x-vlt-audit-id', r.auditId);
        const body = r.body;
        // A string is the text the provider sent, or its bytes in base64 (the envelope's form):
        // the SDK gets the bytes, as the provider sent them (an audio file, say).
        const asSent = (value: string) =>
          carriedAsBase64(r.headers['content-type']) ? Buffer.from(value, 'base64') : value;
        if (body === null || body === undefined) return reply.status(r.status).send();
        if (typeof body === 'string') return reply.status(r.status).send(asSent(body));
        // Serialised in the response-filter pool: a JSON string is the text the provider sent.
        if (body instanceof RawJsonBody) {
          if (body.json === 'null') return reply.status(r.status).send();
          const value = body.json.startsWith('"') ? (JSON.parse(body.json) as string) : null;
          if (value !== null) return reply.status(r.status).send(asSent(value));
          return reply
            .status(r.status)
            .type(r.headers['content-type'] ?? 'application/json')
            .send(body.json);
        }
        return reply
          .status(r.status)
          .type(r.headers['content-type'] ?? 'application/json')
          .send(JSON.stringify(body));
      },
    });

    // The former path: a permanent redirect that keeps method and body (308), query kept.
    app.route({
      method: ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'],
      url: `${LEGACY_PREFIX}:provider/*`,
      config: { agentToken: 'none' },
      // Unauthenticated, and the body is sent again to the new path: the upload limit is not for
      // it (ADR 0096).
      bodyLimit: app.initialConfig.bodyLimit,
      schema: { tags: ['execution'] },
      handler: async (req: FastifyRequest, reply: FastifyReply) =>
        reply.redirect(`${PREFIX}${req.url.slice(LEGACY_PREFIX.length)}`, 308),
    });
  };
}
