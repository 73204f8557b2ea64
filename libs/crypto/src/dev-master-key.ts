import { chmodSync, linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { MASTER_KEY_BYTES, parseMasterKeys } from './keyring.js';
import { MasterKeyError } from './errors.js';

export const DEV_MASTER_KEY_FILE = 'master.key';

/**
 * The embedded default's master key, outside production only: reads `<dataDir>/master.key` or
 * creates it (mode 0600, directory 0700). The caller decides whether this is allowed and logs the
 * warning; this function never logs. A present but invalid file is an error, never overwritten,
 * because overwriting would make every stored credential unreadable.
 */
export function loadOrCreateDevMasterKey(dataDir: string): { key: string; created: boolean } {
  const path = join(dataDir, DEV_MASTER_KEY_FILE);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const fresh = randomBytes(MASTER_KEY_BYTES).toString('base64');
  // Written whole to a private temp file, then hard-linked into place: link() fails when the
  // target exists, so two processes starting together agree on one key and neither can read a
  // half-written file.
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  writeFileSync(tmp, `${fresh}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(tmp, path);
    return { key: fresh, created: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  const key = readFileSync(path, 'utf8').trim();
  try {
    parseMasterKeys(key);
  } catch {
    throw new MasterKeyError(
      `${path} does not hold a valid master key (base64 of ${MASTER_KEY_BYTES} bytes); fix or move it`,
    );
  }
  // A copy or an unpack may have widened the mode; a key file readable by others is not acceptable.
  if (process.platform !== 'win32' && (statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  return { key, created: false };
}
