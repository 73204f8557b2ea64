/**
 * The deploy files say what the production shape needs, checked without a container engine:
 * docker-compose.yml parses (merge keys resolved) into the structure the compose file format
 * allows for what it uses, the data planes get neither the database nor the master key, tags
 * are pinned; deploy/Dockerfile builds JavaScript, ships production dependencies only, runs
 * unprivileged and has a health check; the edge never buffers a stream.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { repoRoot } from '../support/processes.js';

const read = (file: string) => readFileSync(path.join(repoRoot, file), 'utf8');

/** The compose file format, for the keys this file uses; anything else is a mistake here. */
const Env = z.record(z.string(), z.string());
const ComposeService = z.strictObject({
  image: z.string(),
  build: z.strictObject({ context: z.string(), dockerfile: z.string() }).optional(),
  restart: z.enum(['no', 'always', 'on-failure', 'unless-stopped']).optional(),
  read_only: z.boolean().optional(),
  tmpfs: z.array(z.string()).optional(),
  security_opt: z.array(z.string()).optional(),
  cap_drop: z.array(z.string()).optional(),
  command: z.array(z.string()).optional(),
  environment: Env.optional(),
  volumes: z.array(z.string()).optional(),
  ports: z.array(z.string()).optional(),
  healthcheck: z
    .strictObject({ test: z.array(z.string()), interval: z.string(), retries: z.number().int() })
    .optional(),
  depends_on: z
    .union([
      z.array(z.string()),
      z.record(z.string(), z.strictObject({ condition: z.enum(['service_started', 'service_healthy']) })),
    ])
    .optional(),
});
const Compose = z.strictObject({
  services: z.record(z.string(), ComposeService),
  volumes: z.record(z.string(), z.object({})).optional(),
});

const compose = Compose.parse(
  Object.fromEntries(
    Object.entries(parse(read('docker-compose.yml'), { merge: true }) as Record<string, unknown>).filter(
      ([key]) => !key.startsWith('x-'),
    ),
  ),
);
const ours = Object.entries(compose.services).filter(([, s]) => s.environment?.SERVICE);

describe('docker-compose.yml', () => {
  it('runs every service of the split shape from the one pinned image', () => {
    expect(ours.map(([, s]) => s.environment!.SERVICE).sort()).toEqual([
      'audit',
      'control-plane',
      'data-plane',
      'data-plane',
      'notifier',
    ]);
    for (const [name, s] of ours) {
      expect(s.build?.dockerfile, name).toBe('deploy/Dockerfile');
      expect(s.read_only, name).toBe(true);
      expect(s.cap_drop, name).toEqual(['ALL']);
    }
    for (const [name, s] of Object.entries(compose.services)) {
      expect(s.image, name).toMatch(/:[0-9][\w.-]*$/);
    }
  });

  it('gives the data planes neither the database nor the master key, and the key to the control plane alone', () => {
    for (const [name, s] of ours) {
      const env = s.environment!;
      const service = env.SERVICE;
      expect('VLT_MASTER_KEY' in env, name).toBe(service === 'control-plane');
      expect('DATABASE_URL' in env, name).toBe(service !== 'data-plane');
      expect(env.NATS_URL, name).toBeDefined();
    }
  });

  it('never buffers a stream at the edge', () => {
    const edge = read('deploy/edge.conf');
    for (const location of [
      'location /v1/vault/',
      'location /v1/llm/',
      'location = /v1/notifications/stream',
    ]) {
      const block = edge.slice(edge.indexOf(location), edge.indexOf('}', edge.indexOf(location)));
      expect(block, location).toContain('proxy_buffering off;');
      expect(block, location).toMatch(/proxy_read_timeout \d+s;/);
    }
  });
});

describe('deploy/Dockerfile', () => {
  const text = read('deploy/Dockerfile');
  // Continuation lines joined: one instruction per line.
  const stages = text
    .replace(/\\\n\s*/g, ' ')
    .split(/^FROM /m)
    .slice(1);
  const runtime = stages.at(-1)!;

  it('builds JavaScript and installs production dependencies only', () => {
    expect(text).toContain('node scripts/build-services.mjs');
    expect(text).toMatch(/pnpm install --prod --frozen-lockfile/);
    expect(runtime).toMatch(/COPY --from=prod-deps .*node_modules/);
    expect(runtime).not.toMatch(/pnpm install|tsx/);
    expect(runtime).toMatch(/CMD .*node .*dist\/services\/\$\{SERVICE\}\/main\.js/);
  });

  it('runs unprivileged, with a health check, on a pinned base image', () => {
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^HEALTHCHECK .*\/health/m);
    expect(text).toMatch(/^ARG NODE_IMAGE=node:\d+\.\d+/m);
    expect(text).not.toMatch(/:latest\b/);
  });
});
