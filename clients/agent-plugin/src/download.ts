/**
 * Writing a downloaded body to disk. The name comes from the agent, the provider's
 * Content-Disposition or the URL — all untrusted — so it is reduced to a plain file name inside
 * the download directory; an existing file is never overwritten; files are private to the
 * user (0600, directory 0700); a download over the size cap or cut short leaves no partial file.
 */
import { lstat, mkdir, open, unlink, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { VaultDownloadError } from './errors.js';

export const DEFAULT_MAX_DOWNLOAD_BYTES = 100 * 1024 * 1024;
const MAX_NAME_CHARS = 200;
const MAX_ATTEMPTS = 100;

/** A safe file name from untrusted input: no directories, no control or reserved characters. */
export function safeFileName(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  const base = raw.split(/[/\\]/).pop() ?? '';
  const cleaned = base
    .replace(/[\p{Cc}\p{Cf}<>:"|?*]/gu, '')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^\.+/, '')
    .slice(0, MAX_NAME_CHARS)
    .trim();
  return cleaned === '' ? undefined : cleaned;
}

/** The `filename*` (RFC 5987) or `filename` of a Content-Disposition header. */
export function dispositionFileName(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const star = /filename\*\s*=\s*(?:UTF-8|ISO-8859-1)?'[^']*'([^;]+)/i.exec(header)?.[1];
  if (star) {
    try {
      return decodeURIComponent(star.trim());
    } catch {
      // fall through to the plain form
    }
  }
  const plain = /filename\s*=\s*("((?:[^"\\]|\\.)*)"|[^;]+)/i.exec(header);
  return plain ? (plain[2] ?? plain[1])!.replace(/\\(.)/g, '$1').trim() : undefined;
}

function urlFileName(url: string): string | undefined {
  try {
    const last = new URL(url).pathname.split('/').filter(Boolean).pop();
    return last ? decodeURIComponent(last) : undefined;
  } catch {
    return undefined;
  }
}

/** `name`, then `name (1).ext`, `name (2).ext`, … */
function candidate(name: string, n: number): string {
  if (n === 0) return name;
  const ext = path.extname(name);
  return `${name.slice(0, name.length - ext.length)} (${n})${ext}`;
}

async function createExclusive(dir: string, name: string): Promise<{ file: FileHandle; name: string }> {
  for (let n = 0; n < MAX_ATTEMPTS; n++) {
    const attempt = candidate(name, n);
    try {
      return { file: await open(path.join(dir, attempt), 'wx', 0o600), name: attempt };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  throw new VaultDownloadError('download', `too many files named like ${name} in the download directory`);
}

/**
 * Creates the download directory (0700) if needed and checks it is a real directory of this
 * user that others cannot write to — not a symlink or a directory someone else planted.
 * Called before the vault is asked for the file, so a bad directory costs no approval.
 */
export async function prepareDownloadDir(dir: string): Promise<string> {
  const resolved = path.resolve(dir);
  try {
    await mkdir(resolved, { recursive: true, mode: 0o700 });
    const st = await lstat(resolved);
    const uid = process.getuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o002) !== 0) {
      throw new VaultDownloadError(
        'download',
        'the download directory is not a private directory of this user (a symlink, owned by someone else, or ' +
          'writable by everyone); nothing was downloaded',
      );
    }
  } catch (err) {
    if (err instanceof VaultDownloadError) throw err;
    throw new VaultDownloadError(
      'download',
      `cannot create the download directory (${(err as NodeJS.ErrnoException).code ?? 'error'}); nothing was downloaded`,
    );
  }
  return resolved;
}

export interface SaveOptions {
  /** A directory checked by prepareDownloadDir. */
  dir: string;
  body: ReadableStream<Uint8Array>;
  /** Name candidates in order of preference (agent's, provider's, URL's). */
  requestedName?: string | undefined;
  contentDisposition?: string | undefined;
  url: string;
  maxBytes?: number;
}

export async function saveDownload(
  o: SaveOptions,
): Promise<{ path: string; filename: string; bytes: number }> {
  const wanted =
    safeFileName(o.requestedName) ??
    safeFileName(dispositionFileName(o.contentDisposition)) ??
    safeFileName(urlFileName(o.url)) ??
    'download';
  const dir = path.resolve(o.dir);
  const max = o.maxBytes ?? DEFAULT_MAX_DOWNLOAD_BYTES;
  let created: { file: FileHandle; name: string };
  try {
    created = await createExclusive(dir, wanted);
  } catch (err) {
    await o.body.cancel().catch(() => undefined);
    if (err instanceof VaultDownloadError) throw err;
    throw new VaultDownloadError(
      'download',
      `cannot create the file in the download directory (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  const target = path.join(dir, created.name);
  let bytes = 0;
  try {
    for await (const chunk of o.body) {
      bytes += chunk.length;
      if (bytes > max) throw new VaultDownloadError('download', `the download exceeds ${max} bytes`);
      await created.file.write(chunk);
    }
    await created.file.close();
  } catch (err) {
    await created.file.close().catch(() => undefined);
    await unlink(target).catch(() => undefined);
    await o.body.cancel().catch(() => undefined);
    if (err instanceof VaultDownloadError) throw err;
    throw new VaultDownloadError('download', 'the download was interrupted; no file was kept');
  }
  return { path: target, filename: created.name, bytes };
}
