import { describe, expect, expectTypeOf, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig', () => {
  it('gives the all-in-one its embedded defaults', () => {
    const c = loadConfig('all-in-one', {});
    expect(c.port).toBe(8080);
    expect(c.host).toBe('0.0.0.0');
    expect(c.publicBaseUrl).toBe('http://localhost:8080');
    expect(c.agentTokenAudience).toBe('http://localhost:8080');
    expect(c.databaseUrl).toBeUndefined();
    expect(c.natsServers).toEqual([]);
    expect(c.agentTokenTtlSeconds).toBe(7200);
    expect(c.bootstrapSecretTtlSeconds).toBe(3600);
    expect(c.approvalTtlSeconds).toBe(300);
    expect(c.signup).toBe('open');
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('prepares statements unless VLT_DB_PREPARED_STATEMENTS=false, and refuses any other value', () => {
    const split = { NATS_URL: 'nats://x', DATABASE_URL: 'postgresql://db/x' };
    expect(loadConfig('all-in-one', {}).databasePreparedStatements).toBe(true);
    expect(loadConfig('audit', split).databasePreparedStatements).toBe(true);
    expect(
      loadConfig('audit', { ...split, VLT_DB_PREPARED_STATEMENTS: 'false' }).databasePreparedStatements,
    ).toBe(false);
    expect(() => loadConfig('audit', { ...split, VLT_DB_PREPARED_STATEMENTS: 'no' })).toThrow(
      /VLT_DB_PREPARED_STATEMENTS/,
    );
  });

  it('refuses to start a split service without NATS_URL and DATABASE_URL', () => {
    expect(() => loadConfig('control-plane', {})).toThrow(/NATS_URL, DATABASE_URL, VLT_MASTER_KEY/);
    expect(() => loadConfig('data-plane', {})).toThrow(/NATS_URL/);
    expect(() => loadConfig('audit', { NATS_URL: 'nats://x' })).toThrow(/DATABASE_URL/);
  });

  it('parses lists and numbers, and names the bad variable without echoing its value', () => {
    const c = loadConfig('data-plane', {
      NATS_URL: 'nats://127.0.0.1:4222',
      VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32, ::1/128',
      PORT: '9000',
    });
    expect(c.ssrfAllowCidrs).toEqual(['127.0.0.1/32', '::1/128']);
    expect(c.port).toBe(9000);
    try {
      loadConfig('data-plane', { NATS_URL: 'nats://x', PORT: 'secret-ish-value' });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as Error).message).toContain('PORT');
      expect((e as Error).message).not.toContain('secret-ish-value');
    }
  });

  it('refuses an LLM body budget smaller than the largest body it must hold', () => {
    expect(loadConfig('all-in-one', {}).llmBodyMaxBytes).toBe(32 * 1024 * 1024);
    expect(loadConfig('all-in-one', {}).llmLargeBodiesInFlightBytes).toBe(128 * 1024 * 1024);
    expect(() =>
      loadConfig('all-in-one', {
        VLT_LLM_BODY_MAX_BYTES: String(8 * 1024 * 1024),
        VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES: String(4 * 1024 * 1024),
      }),
    ).toThrow(/VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES must be at least VLT_LLM_BODY_MAX_BYTES/);
  });

  it('requires a master key for the all-in-one in production', () => {
    expect(() => loadConfig('all-in-one', { NODE_ENV: 'production' })).toThrow(/VLT_MASTER_KEY/);
  });

  it('strips a trailing slash from PUBLIC_BASE_URL and uses it as default audience', () => {
    const c = loadConfig('all-in-one', { PUBLIC_BASE_URL: 'https://vault.example.com/' });
    expect(c.publicBaseUrl).toBe('https://vault.example.com');
    expect(c.agentTokenAudience).toBe('https://vault.example.com');
  });

  it('gives each split service a config type that says what it requires, parsed once', () => {
    const c = loadConfig('control-plane', {
      NATS_URL: 'nats://a:4222, nats://b:4222',
      DATABASE_URL: 'postgresql://db/x',
      VLT_MASTER_KEY: 'k',
    });
    expect(c.natsServers).toEqual(['nats://a:4222', 'nats://b:4222']);
    expectTypeOf(c.databaseUrl).toEqualTypeOf<string>();
    expectTypeOf(c.masterKey).toEqualTypeOf<string>();
    const a = loadConfig('audit', { NATS_URL: 'nats://a:4222', DATABASE_URL: 'postgresql://db/x' });
    expectTypeOf(a.databaseUrl).toEqualTypeOf<string>();
    const all = loadConfig('all-in-one', {});
    expectTypeOf(all.databaseUrl).toEqualTypeOf<string | undefined>();
  });

  it('the notifier needs the database that holds its delivery records, never the master key', () => {
    expect(() => loadConfig('notifier', { NATS_URL: 'nats://a:4222' })).toThrow(/DATABASE_URL/);
    const n = loadConfig('notifier', { NATS_URL: 'nats://a:4222', DATABASE_URL: 'postgresql://db/x' });
    expect(n.natsServers).toEqual(['nats://a:4222']);
    expect(n.pushApiUrl).toBe('https://exp.host/--/api/v2/push/send');
    expect('masterKey' in n && n.masterKey).toBeFalsy();
    expect(() =>
      loadConfig('notifier', {
        NATS_URL: 'nats://a',
        DATABASE_URL: 'postgresql://db/x',
        VLT_PUSH_API_URL: 'http://x',
      }),
    ).toThrow(/VLT_PUSH_API_URL/);
  });
});
