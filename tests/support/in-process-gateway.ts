/**
 * The all-in-one gateway inside the test process, listening on a real socket: the run's real
 * PostgreSQL database when there is one (else embedded PGlite), the in-process bus, a fresh
 * master key. Fast enough to start per test file.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { loadConfig, type AllInOneConfig } from '@vlt/config';
import { createLogger } from '@vlt/telemetry';
import { startAllInOne } from '@vlt/all-in-one';
import { seedEmbeddedDataDir } from './embedded-template.js';
import { reservePort } from './ports.js';
import { ownDatabase, realServices } from './services.js';

export interface InProcessGateway {
  baseUrl: string;
  /** The PostgreSQL database it uses, or undefined when it runs on embedded PGlite. */
  databaseUrl: string | undefined;
  /** Every log line the gateway wrote (for secret-leak assertions). */
  logs: string[];
  /** `http://127.0.0.1:<port>/metrics` when started with VLT_METRICS_PORT. */
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

export async function startInProcessGateway(
  env: Record<string, string> = {},
  seams: { upstreamCa?: string[] } = {},
  options: { embeddedDatabase?: boolean } = {},
): Promise<InProcessGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vlt-gw-'));
  const logs: string[] = [];
  // The production logger (its serializers and redaction), writing into `logs`: log
  // assertions check what operators would actually see.
  const logger = createLogger({
    service: 'all-in-one',
    level: env.LOG_LEVEL ?? 'info',
    destination: new Writable({
      write(chunk, _enc, cb) {
        logs.push(String(chunk));
        cb();
      },
    }),
  });
  const base: Record<string, string> = {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    VLT_DATA_DIR: dataDir,
    VLT_MASTER_KEY: randomBytes(32).toString('base64'),
    VLT_NATS_PREFIX: `${realServices.busPrefix()}${randomBytes(3).toString('hex')}`,
    ...env,
  };
  // Its own database: gateways with in-process buses must never share an outbox.
  let dropDatabase: (() => Promise<void>) | undefined;
  if (realServices.hasPostgres() && !env.DATABASE_URL && !options.embeddedDatabase) {
    const db = await ownDatabase('gw');
    base.DATABASE_URL = db.url;
    dropDatabase = db.drop;
  }
  // Only into the directory made above: a caller's own VLT_DATA_DIR may hold a database.
  const template = realServices.embeddedTemplate();
  if (template && !base.DATABASE_URL && !env.VLT_DATA_DIR) await seedEmbeddedDataDir(template, dataDir);
  // The audience and issuer must be the URL clients use, known before listen: reserve a port
  // first (outside the ephemeral range, see ports.ts), and hold it until the gateway is ready to
  // listen. A few milliseconds remain between release and listen, so a taken port means starting
  // again on another.
  const callerBaseUrl = base.PUBLIC_BASE_URL;
  let gw: Awaited<ReturnType<typeof startAllInOne>>;
  let config: Readonly<AllInOneConfig>;
  for (let attempt = 1; ; attempt++) {
    const { port, release } = await reservePort();
    base.PORT = String(port);
    base.PUBLIC_BASE_URL = callerBaseUrl ?? `http://127.0.0.1:${port}`;
    config = loadConfig('all-in-one', base);
    try {
      gw = await startAllInOne(config, logger, seams);
      // listen() runs ready() before it binds: plugins, routes and the OpenAPI document.
      await gw.app.ready();
    } finally {
      await release();
    }
    try {
      await gw.app.listen({ port, host: '127.0.0.1' });
      break;
    } catch (err) {
      await gw.close();
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt === 3) throw err;
    }
  }
  return {
    baseUrl: config.publicBaseUrl,
    databaseUrl: base.DATABASE_URL,
    logs,
    metricsUrl: gw.metricsPort === undefined ? undefined : `http://127.0.0.1:${gw.metricsPort}/metrics`,
    async close() {
      await gw.close();
      await dropDatabase?.();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
