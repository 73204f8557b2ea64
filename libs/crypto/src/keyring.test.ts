import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync, writeFileSync, chmodSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MasterKeyError, loadOrCreateDevMasterKey, masterKeyId, parseMasterKeys } from './index.js';

const key = randomBytes(32);
const b64 = key.toString('base64');

describe('parseMasterKeys', () => {
  it('derives a stable, non-secret key id: first 16 hex of SHA-256', () => {
    const ring = parseMasterKeys(b64);
    expect(ring.current.id).toBe(createHash('sha256').update(key).digest('hex').slice(0, 16));
    expect(ring.current.id).toBe(masterKeyId(key));
    expect(ring.current.key.equals(key)).toBe(true);
    expect(ring.old).toEqual([]);
  });

  it('accepts surrounding whitespace and unpadded base64', () => {
    expect(parseMasterKeys(`  ${b64}\n`).current.id).toBe(masterKeyId(key));
    expect(parseMasterKeys(b64.replace(/=+$/, '')).current.id).toBe(masterKeyId(key));
  });

  it('parses old keys (comma or space separated) and drops duplicates and the current key', () => {
    const o1 = randomBytes(32).toString('base64');
    const o2 = randomBytes(32).toString('base64');
    const ring = parseMasterKeys(b64, `${o1}, ${o2} ${o1},${b64}`);
    expect(ring.old.map((k) => k.key.toString('base64'))).toEqual([o1, o2]);
  });

  it.each([
    ['empty', ''],
    ['too short', randomBytes(16).toString('base64')],
    ['too long', randomBytes(33).toString('base64')],
    ['not base64', `${b64.slice(0, 40)}!!!=`],
    ['hex instead of base64', key.toString('hex')],
  ])('rejects %s keys with a readable error that does not echo them', (_label, bad) => {
    let caught: unknown;
    try {
      parseMasterKeys(bad);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(MasterKeyError);
    const err = caught as MasterKeyError;
    expect(err.code).toBe('VLT_MASTER_KEY_INVALID');
    expect(err.message).toMatch(/base64 of exactly 32 bytes/);
    if (bad.length > 8) expect(err.message).not.toContain(bad.slice(0, 8));
  });

  it('names the bad old key by position only', () => {
    expect(() => parseMasterKeys(b64, `${randomBytes(32).toString('base64')},short`)).toThrow(
      /old master key 2 of 2/,
    );
  });
});

describe('loadOrCreateDevMasterKey', () => {
  it('creates master.key with mode 0600, then reads the same key back', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'vlt-crypto-')), 'nested', 'data');
    const first = loadOrCreateDevMasterKey(dir);
    expect(first.created).toBe(true);
    expect(() => parseMasterKeys(first.key)).not.toThrow();
    const file = join(dir, 'master.key');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').trim()).toBe(first.key);
    const second = loadOrCreateDevMasterKey(dir);
    expect(second).toEqual({ key: first.key, created: false });
    expect(readdirSync(dir)).toEqual(['master.key']);
  });

  it('tightens a widened mode and refuses (never overwrites) an invalid file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vlt-crypto-'));
    const file = join(dir, 'master.key');
    writeFileSync(file, `${b64}\n`);
    chmodSync(file, 0o644);
    expect(loadOrCreateDevMasterKey(dir)).toEqual({ key: b64, created: false });
    expect(statSync(file).mode & 0o777).toBe(0o600);

    writeFileSync(file, 'garbage-key-material');
    expect(() => loadOrCreateDevMasterKey(dir)).toThrow(MasterKeyError);
    expect(() => loadOrCreateDevMasterKey(dir)).not.toThrow(/garbage/);
    expect(readFileSync(file, 'utf8')).toBe('garbage-key-material');
  });
});
