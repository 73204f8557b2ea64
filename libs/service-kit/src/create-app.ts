import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyServerOptions,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { HealthResponse } from '@vlt/contracts';
import { jsonBoundsViolation, REQUEST_JSON_BOUNDS } from '@vlt/policy-engine';
import { fastifyOtelPlugin } from '@vlt/telemetry';
import { drainOnClose } from './graceful-close.js';
import { installErrorHandler } from './error-handler.js';
import { Errors } from './errors.js';
import type { ServiceMetrics } from './metrics.js';
import { readTextBody } from './read-text-body.js';

/** Bodies above this size are handled a turn of the event loop after they were parsed. */
const LARGE_BODY_BYTES = 256 * 1024;
/** Below the 15 s after which `runUntilSignal` gives up on the whole drain. */
const DEFAULT_DRAIN_MS = 10_000;

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

export interface CreateServiceAppOptions {
  /** Shown in the OpenAPI document title. */
  title: string;
  logger: FastifyServerOptions['loggerInstance'];
  /** Addresses/CIDRs of proxies whose X-Forwarded-For is believed (VLT_TRUST_PROXY). */
  trustProxy: string[];
  bodyLimit?: number;
  /** Serve /docs (interactive UI + OpenAPI 3.1 JSON at /docs/json). */
  docs?: boolean;
  /** Extra health detail: returns 'ok' or a reason the service is not ready. */
  health?: () => Promise<string> | string;
  /** Request rate, latency and errors per route go here (served on the metrics port). */
  metrics?: ServiceMetrics;
  /** How long `close()` lets requests in flight finish before their connections are cut. */
  drainMs?: number;
}

/**
 * A Fastify instance with the house conventions: zod validation and serialisation, the
 * OpenAPI 3.1 document generated from the same schemas, one error handler, /health.
 * Feature routes are registered by the caller (one file shows the whole service).
 */
export async function createServiceApp(opts: CreateServiceAppOptions): Promise<App> {
  const app = Fastify({
    loggerInstance: opts.logger,
    trustProxy: opts.trustProxy.length ? opts.trustProxy : false,
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    // Request ids arrive from the edge; otherwise generated. Trace ids come from OTel.
    requestIdHeader: 'x-request-id',
    // One access line per request (below) instead of Fastify's two: each line passes the
    // logger's secret redaction, and the pair cost a quarter of a brokered call's CPU.
    logController: new LogController({ disableRequestLogging: true }),
  }).withTypeProvider<ZodTypeProvider>();

  // The route template, not the URL: no query values (secrets) and no need to redact them.
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info(
      {
        method: request.method,
        route: request.routeOptions.url ?? '(no route)',
        statusCode: reply.statusCode,
        responseTime: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request completed',
    );
    done();
  });

  drainOnClose(app as unknown as App, opts.drainMs ?? DEFAULT_DRAIN_MS);
  opts.metrics?.observe(app);
  // Spans for every route when tracing is on (registered before any route).
  const otel = fastifyOtelPlugin();
  if (otel) await app.register(otel);

  // JSON bodies are bounded (depth, members) before they are parsed: everything downstream of
  // the parser recurses, and a deep body would otherwise end in a stack overflow (500).
  // Fastify's own parser still does the parsing, with its prototype-poisoning protection.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  const bodyLimit = opts.bodyLimit ?? 1024 * 1024;
  app.addContentTypeParser('application/json', (req, payload, done) =>
    readTextBody(req, payload, bodyLimit, (err, body) => {
      if (err || body === undefined) return done(err ?? null, undefined);
      const violation = jsonBoundsViolation(body, REQUEST_JSON_BOUNDS);
      if (violation) return done(Errors.badRequest(`invalid request body: ${violation}`), undefined);
      parseJson(req, body, done);
    }),
  );

  // A large body's parse and its handling run in separate turns of the event loop, so the
  // longest stall is the larger of the two, not their sum (bench/hostile-input.ts).
  app.addHook('preValidation', (req, _reply, done) => {
    if (Number(req.headers['content-length'] ?? 0) > LARGE_BODY_BYTES) setImmediate(done);
    else done();
  });

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandler(app);

  if (opts.docs !== false) {
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: { title: opts.title, version: '1.0.0' },
        components: {
          securitySchemes: {
            bearer: { type: 'http', scheme: 'bearer' },
            apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          },
        },
      },
      transform: jsonSchemaTransform,
    });
    await app.register(swaggerUi, { routePrefix: '/docs' });
  }

  const health = async () => {
    const state = opts.health ? await opts.health() : 'ok';
    return { status: state };
  };
  for (const url of ['/health', '/v1/health']) {
    app.get(
      url,
      { schema: { hide: true, response: { 200: HealthResponse, 503: HealthResponse } } },
      async (_req, reply) => {
        const body = await health();
        return reply.status(body.status === 'ok' ? 200 : 503).send(body);
      },
    );
  }
  return app as unknown as App;
}
