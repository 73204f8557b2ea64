/**
 * Writing `vault_download` results into the configured download directory. The file name comes
 * from the agent or the provider, so it is reduced to one plain path segment; files are created
 * exclusively (O_EXCL: an existing file or a planted symlink is never written through) with
 * mode 0600 in a 0700 directory, and a clash gets a numbered name instead of an overwrite.
 */
import { mkdir, open, realpath, unlink } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { DownloadError } from './errors.js';

/** Below the usual 255-byte name limit, with room for a " (999)" suffix. */
const MAX_NAME_BYTES = 200;
const MAX_SUFFIX = 999;

/** The file name of a Content-Disposition header (RFC 6266: `filename*` wins over `filename`). */
export function filenameFromDisposition(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const star = /filename\*\s*=\s*(?:UTF-8|utf-8)''([^;]+)/.exec(header);
  if (star?.[1]) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch {
      // Malformed percent-encoding: fall back to the plain parameter.
    }
  }
  const plain = /filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]+))/.exec(header);
  const v = plain?.[1]?.replace(/\\(.)/g, '$1') ?? plain?.[2]?.trim();
  return v || undefined;
}

/** The last path segment of a URL, if it looks like a file name. */
export function filenameFromUrl(url: string): string | undefined {
  try {
    const last = new URL(url).pathname.split('/').filter(Boolean).pop();
    return last ? decodeURIComponent(last) : undefined;
  } catch {
    return undefined;
  }
}

/** The longest prefix of `s` within `maxBytes` of UTF-8, never splitting a character. */
function truncateUtf8(s: string, maxBytes: number): string {
  let out = '';
  for (const ch of s) {
    if (Buffer.byteLength(out + ch) > maxBytes) break;
    out += ch;
  }
  return out;
}

const RESERVED = new Set(['<', '>', ':', '"', '|', '?', '*']);

/** Control characters, bidi overrides (a name that reads differently than it is) and reserved ones. */
function safeChar(ch: string): string {
  const c = ch.codePointAt(0) ?? 0;
  const control = c < 0x20 || (c >= 0x7f && c <= 0x9f);
  const bidi = (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
  return control || bidi || RESERVED.has(ch) ? '_' : ch;
}

/**
 * One safe path segment: no directories, no control or reserved characters, no leading dots
 * (no hidden files, no `..`), bounded length; `download` when nothing is left.
 */
export function safeFilename(name: string | undefined): string {
  let n = basename((name ?? '').replace(/\\/g, '/'));
  n = n
    .normalize('NFC')
    .replace(/./gsu, safeChar)
    .replace(/^[.\s]+/, '')
    .replace(/[.\s]+$/, '')
    .trim();
  if (Buffer.byteLength(n) > MAX_NAME_BYTES) {
    const ext = truncateUtf8(extname(n), 20);
    n = truncateUtf8(n.slice(0, n.length - extname(n).length), MAX_NAME_BYTES - Buffer.byteLength(ext)) + ext;
  }
  return n || 'download';
}

export interface SavedFile {
  path: string;
  filename: string;
  bytes: number;
}

export type DownloadBody = WebReadableStream<Uint8Array> | ReadableStream<Uint8Array> | Uint8Array;

/**
 * Creates the download directory (0700) if needed and returns its real path. Called before the
 * vault is asked for the file, so an unusable directory costs no provider call and no approval.
 */
export async function prepareDownloadDir(dir: string): Promise<string> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return await realpath(dir);
  } catch (err) {
    throw new DownloadError(`the download directory cannot be used (${errorCode(err)})`);
  }
}

/** Saves `body` as a new file named after `wanted` inside `root` (from `prepareDownloadDir`). */
export async function saveDownload(root: string, wanted: string, body: DownloadBody): Promise<SavedFile> {
  const name = safeFilename(wanted);
  const ext = extname(name);
  const stem = ext ? name.slice(0, -ext.length) : name;
  for (let i = 0; i <= MAX_SUFFIX; i++) {
    const filename = i === 0 ? name : `${stem} (${i})${ext}`;
    const path = join(root, filename);
    let handle;
    try {
      handle = await open(path, 'wx', 0o600);
    } catch (err) {
      if (errorCode(err) === 'EEXIST') continue;
      throw new DownloadError(`cannot create the file (${errorCode(err)})`);
    }
    const out = handle.createWriteStream();
    try {
      const source =
        body instanceof Uint8Array
          ? Readable.from([body])
          : Readable.fromWeb(body as WebReadableStream<Uint8Array>);
      await pipeline(source, out);
    } catch (err) {
      await handle.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
      throw new DownloadError(`the download failed after ${out.bytesWritten} bytes (${errorCode(err)})`);
    }
    const bytes = out.bytesWritten;
    return { path, filename, bytes };
  }
  throw new DownloadError(`too many files named like ${name} in the download directory`);
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  return err instanceof Error ? err.name : 'unknown error';
}
