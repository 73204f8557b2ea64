/**
 * The response-filter pool gives what the request's thread gives: the same filtered JSON, the
 * same refusals, for the policy version it is handed (ADR 0056).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { PolicyDocument } from '@vlt/contracts';
import { compilePolicy, hydratePolicy } from '@vlt/policy-engine';
import { decodeAndFilter, filterFailureOf } from './response-decoding.js';
import { createResponseFilterPool } from './response-pool.js';

const ids = {
  id: '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b',
  workspaceId: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
  agentId: '1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e',
  connectionId: '2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
};

function compiled(response: unknown[], version: number) {
  const doc = {
    ...ids,
    allowedModels: ['B'],
    defaultMode: 'read_write',
    stepUpApproval: 'never',
    allowlists: [{ baseUrl: 'https://api.example.com', methods: ['GET'], pathPatterns: ['/*'] }],
    rateLimits: null,
    timeWindows: [],
    providerConstraints: null,
    version,
    rules: { request: [], response },
  } as unknown as PolicyDocument;
  return compilePolicy(doc, { provider: 'code_host', service: 'code_host' });
}

const FIELDS = [{ label: 'fields', match: {}, filter: { denyFields: ['ssn'], redact: [{ type: 'email' }] } }];
const route = { method: 'GET', path: '/records', fullFields: false };
const record = { id: 'c-1', ssn: '078-05-1120', email: 'alice@example.com', note: 'visible' };

describe('response-filter pool', () => {
  const pool = createResponseFilterPool({ threads: 1 });
  afterAll(() => pool.close());
  const v1 = compiled(FIELDS, 1);

  /** In the pool, and on this thread: both answers. */
  async function both(body: Buffer, contentType: string, source = v1, key = 'p:1') {
    const inThread = (() => {
      try {
        return {
          ok: true as const,
          json: JSON.stringify(decodeAndFilter(body, contentType, hydratePolicy(source), route)),
        };
      } catch (err) {
        return { ok: false as const, ...filterFailureOf(err) };
      }
    })();
    const pooled = await pool.filter({
      body: Buffer.from(body),
      contentType,
      policyKey: key,
      compiled: source,
      route,
    });
    return { inThread, pooled };
  }

  it('filters JSON exactly as the request thread does', async () => {
    const body = Buffer.from(JSON.stringify({ ...record, list: Array.from({ length: 500 }, () => record) }));
    const { inThread, pooled } = await both(body, 'application/json');
    expect(pooled).toEqual(inThread);
    expect(pooled.ok && JSON.parse(pooled.json).ssn).toBeUndefined();
    expect(JSON.stringify(pooled)).not.toContain('alice@example.com');
  });

  it('redacts text, base64-encodes binary, keeps an empty body null', async () => {
    for (const [body, type] of [
      [Buffer.from('id,email\nc-1,alice@example.com\n'), 'text/csv'],
      [Buffer.from([0, 1, 2, 250]), 'application/octet-stream'],
      [Buffer.alloc(0), 'application/json'],
    ] as const) {
      const { inThread, pooled } = await both(body, type);
      expect(pooled).toEqual(inThread);
    }
  });

  it('refuses what the request thread refuses, as data', async () => {
    const deep = Buffer.from('['.repeat(100_000) + ']'.repeat(100_000));
    const { inThread, pooled } = await both(deep, 'application/json');
    expect(pooled.ok).toBe(false);
    expect(pooled).toEqual(inThread);
  });

  it('a new policy version takes effect: the key names the version', async () => {
    const body = Buffer.from(JSON.stringify(record));
    expect((await both(body, 'application/json', v1, 'p:1')).pooled).toMatchObject({ ok: true });
    const v2 = compiled([], 2);
    const { pooled } = await both(body, 'application/json', v2, 'p:2');
    expect(pooled).toEqual({ ok: true, json: JSON.stringify(record) });
  });

  it('a body that shares its buffer is copied, not taken from the caller', async () => {
    const shared = Buffer.from(`xx${JSON.stringify(record)}`).subarray(2);
    await pool.filter({
      body: shared,
      contentType: 'application/json',
      policyKey: 'p:1',
      compiled: v1,
      route,
    });
    expect(JSON.parse(shared.toString('utf8'))).toEqual(record);
  });
});
