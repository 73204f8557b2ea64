/**
 * The agent's private key on disk. The plugin's contract takes the key as a base64-encoded ES256
 * JWK, so that is the file's whole content; OpenClaw hands it to the plugin through a `file`
 * SecretRef in `singleValue` mode (the config holds only the reference, see
 * openclaw-config.ts). OpenClaw's file provider insists on a private regular file with one
 * link; this module writes exactly that (0600, in a 0700 directory, replaced atomically) and
 * refuses to read anything else, so a key that OpenClaw would reject is caught here first.
 *
 * Nothing here ever puts key material into an error message.
 */
import { createPrivateKey, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, chmod, lstat, mkdir, open, readFile, rename, rmdir, unlink } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { KeyFileError } from './errors.js';

/** The directory vlt-setup owns inside the OpenClaw state directory. */
export const KEY_DIR_NAME = 'vlt-vault';
export const KEY_FILE_NAME = 'agent-key';
/** A P-256 JWK in base64 is about 250 bytes; anything far larger is not ours. */
const MAX_KEY_FILE_BYTES = 8192;

export function defaultKeyPath(openclawDir: string): string {
  return join(openclawDir, KEY_DIR_NAME, KEY_FILE_NAME);
}

const b64url32 = z.string().regex(/^[A-Za-z0-9_-]{43}$/);
/** An EC P-256 private JWK: the members ES256 needs; others (alg, kid) are tolerated. */
const PrivateJwk = z.looseObject({
  kty: z.literal('EC'),
  crv: z.literal('P-256'),
  x: b64url32,
  y: b64url32,
  d: b64url32,
});

/** The plugin's encoding of a private key: base64 of the JWK's JSON. */
export function encodeAgentKey(privateKeyPem: string): string {
  const { kty, crv, x, y, d } = createPrivateKey(privateKeyPem).export({ format: 'jwk' });
  // Only the members of the key: nothing else is needed and nothing else should travel.
  return Buffer.from(JSON.stringify({ kty, crv, x, y, d }), 'utf8').toString('base64');
}

/** Decodes the plugin's encoding into the PKCS8 PEM `@vlt/sdk` takes. `where` names the source. */
export function decodeAgentKey(encoded: string, where: string): string {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(encoded.trim(), 'base64').toString('utf8'));
  } catch {
    throw new KeyFileError(`${where} does not hold a base64-encoded JWK`);
  }
  // Only the verdict, never zod's issues: they could quote the key's members.
  const parsed = PrivateJwk.safeParse(json);
  if (!parsed.success) throw new KeyFileError(`${where} is not an ES256 (EC P-256) private JWK`);
  try {
    const { kty, crv, x, y, d } = parsed.data;
    return createPrivateKey({ key: { kty, crv, x, y, d }, format: 'jwk' })
      .export({ type: 'pkcs8', format: 'pem' })
      .toString();
  } catch {
    throw new KeyFileError(`${where} is not a valid EC P-256 private key`);
  }
}

function currentUid(): number {
  // -1 where the platform has no uids (Windows): the ownership check is then skipped.
  try {
    return userInfo().uid;
  } catch {
    return -1;
  }
}

function errno(err: unknown): string | undefined {
  return err instanceof Error && 'code' in err ? String(err.code) : undefined;
}

const octal = (mode: number) => (mode & 0o777).toString(8).padStart(4, '0');

export async function pathExists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Whether files can be created in `dir` (or in the directories it would be created under),
 * without creating anything: checked before a bootstrap secret is spent on an enrolment whose
 * key or config could then not be saved.
 */
export async function writableDirProblem(dir: string): Promise<string | undefined> {
  let at = dir;
  for (;;) {
    try {
      const st = await lstat(at);
      if (!st.isDirectory()) return `${at} is not a directory`;
      await access(at, constants.W_OK | constants.X_OK);
      return undefined;
    } catch (err) {
      if (errno(err) !== 'ENOENT') return `${at} is not writable (${errno(err) ?? 'error'})`;
      const parent = dirname(at);
      if (parent === at) return `no existing directory above ${dir}`;
      at = parent;
    }
  }
}

/** Creates the key's directory as 0700, or tightens ours to 0700; refuses a symlink. */
async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await lstat(dir);
  if (st.isSymbolicLink() || !st.isDirectory()) {
    throw new KeyFileError(`${dir} must be a directory, not a symbolic link or a file`);
  }
  const uid = currentUid();
  if (uid >= 0 && st.uid !== uid) throw new KeyFileError(`${dir} belongs to another user`);
  if ((st.mode & 0o777) !== 0o700) await chmod(dir, 0o700);
}

/**
 * Writes the key as a new 0600 file and renames it over `path`: a reader sees the old key or
 * the new one, never a partial file, and the file is never readable by others, even briefly.
 */
export async function writeKeyFile(path: string, encoded: string): Promise<void> {
  const dir = dirname(path);
  await ensurePrivateDir(dir);
  const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  // 'wx': never follow or reuse an existing file. The mode is set at creation; the chmod undoes
  // nothing but makes the result independent of the umask.
  const fh = await open(tmp, 'wx', 0o600);
  try {
    try {
      await fh.chmod(0o600);
      await fh.writeFile(encoded, 'utf8');
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/**
 * Reads the key back, with the checks OpenClaw's file SecretRef provider applies (a private,
 * regular, single-link file owned by the user), and returns it as a PKCS8 PEM.
 */
export async function readKeyFile(path: string): Promise<string> {
  let st;
  try {
    st = await lstat(path);
  } catch (err) {
    if (errno(err) === 'ENOENT') throw new KeyFileError(`the agent's key file ${path} does not exist`);
    throw new KeyFileError(`cannot read the agent's key file ${path} (${errno(err) ?? 'error'})`);
  }
  if (st.isSymbolicLink()) throw new KeyFileError(`the agent's key file ${path} is a symbolic link`);
  if (!st.isFile()) throw new KeyFileError(`the agent's key file ${path} is not a regular file`);
  if (st.nlink !== 1) throw new KeyFileError(`the agent's key file ${path} has more than one hard link`);
  const uid = currentUid();
  if (uid >= 0 && st.uid !== uid)
    throw new KeyFileError(`the agent's key file ${path} belongs to another user`);
  if ((st.mode & 0o077) !== 0) {
    throw new KeyFileError(
      `the agent's key file ${path} is accessible to other users (mode ${octal(st.mode)})`,
      {
        hint: `run: chmod 600 '${path}'`,
      },
    );
  }
  if (st.size > MAX_KEY_FILE_BYTES)
    throw new KeyFileError(`the agent's key file ${path} is too large to be a key`);
  const text = await readFile(path, 'utf8');
  return decodeAgentKey(text, `the agent's key file ${path}`);
}

/** A problem with the key's directory that would expose it, or undefined. */
export async function keyDirProblem(path: string): Promise<string | undefined> {
  const dir = dirname(path);
  try {
    const st = await lstat(dir);
    if (st.isSymbolicLink() || !st.isDirectory()) return `${dir} is not a plain directory`;
    if ((st.mode & 0o077) !== 0)
      return `${dir} is accessible to other users (mode ${octal(st.mode)}); run: chmod 700 '${dir}'`;
    return undefined;
  } catch (err) {
    return `cannot inspect ${dir} (${errno(err) ?? 'error'})`;
  }
}

/** Deletes the key file, and its directory when it is vlt-setup's own and now empty. */
export async function removeKeyFile(path: string): Promise<boolean> {
  let removed = false;
  try {
    await unlink(path);
    removed = true;
  } catch (err) {
    if (errno(err) !== 'ENOENT')
      throw new KeyFileError(`cannot delete the key file ${path} (${errno(err) ?? 'error'})`);
  }
  const dir = dirname(path);
  if (basename(dir) === KEY_DIR_NAME) {
    // Not empty (something else lives there) or already gone: leave it be.
    await rmdir(dir).catch(() => undefined);
  }
  return removed;
}
