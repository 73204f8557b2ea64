/**
 * Uploads through the LLM proxy (`files.create`, `audio.transcriptions.create`): a
 * `multipart/form-data` body is read part by part and written again in one canonical form
 * (ADR 0095). What the provider receives is what the vault read, whatever the SDK's framing
 * (preamble, epilogue, header spelling, boundary), so no parser of the provider's can find a
 * part the vault did not see. The boundary is derived from the parts, so an SDK's retry of the
 * same upload, which draws a new random boundary, is the same request: its approval matches.
 */
import { createHash } from 'node:crypto';
import { Busboy } from '@fastify/busboy';
import { Errors } from '@vlt/service-kit';

/** What a form may hold. An SDK's upload has one to a few dozen parts. */
export const MULTIPART_LIMITS = {
  parts: 100,
  files: 20,
  fieldNameBytes: 200,
  fieldValueBytes: 1024 * 1024,
  headerPairsPerPart: 20,
} as const;

export type FormPart =
  | { kind: 'field'; name: string; value: string }
  | {
      kind: 'file';
      name: string;
      filename: string;
      contentType: string;
      bytes: Buffer;
      /** SHA-256 of `bytes`, hex: taken as they are read, for the boundary and the reviewer. */
      sha256: string;
    };

export interface CanonicalForm {
  parts: FormPart[];
  /** The canonical body, and the content type that names its boundary. */
  body: Buffer;
  contentType: string;
}

/** How a reviewer sees an upload: every field, and each file by name, type, size and digest. */
export interface FormSummary {
  multipart: Array<
    | { name: string; value: string }
    | { name: string; filename: string; contentType: string; bytes: number; sha256: string }
  >;
}

/** Field values longer than this are cut in the reviewer's summary (the digest covers them all). */
const SUMMARY_VALUE_CHARS = 2000;

export function isMultipart(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase() === 'multipart/form-data';
}

function refuse(reason: string): never {
  throw Errors.badRequest(`multipart body: ${reason}`);
}

/** Reads every part of `raw`, within MULTIPART_LIMITS; a limit reached or a malformed body is a 400. */
export async function readForm(raw: Buffer, contentType: string): Promise<FormPart[]> {
  const parts: FormPart[] = [];
  await new Promise<void>((resolve, reject) => {
    let failed = false;
    // The parser may finish before the last file's stream has ended here: wait for both.
    let filesOpen = 0;
    let finished = false;
    const settle = () => {
      if (!failed && finished && filesOpen === 0) resolve();
    };
    const fail = (reason: string) => {
      if (failed) return;
      failed = true;
      reject(Errors.badRequest(`multipart body: ${reason}`));
    };
    let parser: InstanceType<typeof Busboy>;
    try {
      parser = new Busboy({
        headers: { 'content-type': contentType },
        // Names as the SDK wrote them: a provider stores the filename it is given.
        preservePath: true,
        limits: {
          parts: MULTIPART_LIMITS.parts,
          files: MULTIPART_LIMITS.files,
          fields: MULTIPART_LIMITS.parts,
          fieldNameSize: MULTIPART_LIMITS.fieldNameBytes,
          fieldSize: MULTIPART_LIMITS.fieldValueBytes,
          headerPairs: MULTIPART_LIMITS.headerPairsPerPart,
        },
      });
    } catch (err) {
      fail(err instanceof Error ? err.message.toLowerCase() : 'unreadable content type');
      return;
    }
    // A part in another transfer encoding would be sent decoded by one reader, not by another.
    const plainEncoding = (enc: string) => ['7bit', '8bit', 'binary'].includes(enc.toLowerCase());
    parser.on('field', (name, value, nameTruncated, valueTruncated, encoding) => {
      if (nameTruncated || valueTruncated) return fail(`field ${name.slice(0, 40)} is too long`);
      if (!plainEncoding(encoding)) return fail('a part has a content-transfer-encoding');
      parts.push({ kind: 'field', name, value });
    });
    parser.on('file', (name, stream, filename, encoding, mimeType) => {
      if (!plainEncoding(encoding)) {
        stream.resume();
        return fail('a part has a content-transfer-encoding');
      }
      const chunks: Buffer[] = [];
      const digest = createHash('sha256');
      const part: FormPart = {
        kind: 'file',
        name,
        filename,
        contentType: mimeType,
        bytes: Buffer.alloc(0),
        sha256: '',
      };
      parts.push(part);
      filesOpen++;
      stream.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        digest.update(chunk);
      });
      stream.on('error', (err: Error) => fail(err.message.toLowerCase()));
      stream.on('end', () => {
        // The parser hands out views of `raw`; a file read in one piece is kept as that view,
        // so an upload is held once here, not twice (ADR 0096).
        part.bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        part.sha256 = digest.digest('hex');
        filesOpen--;
        settle();
      });
    });
    parser.on('partsLimit', () => fail(`more than ${MULTIPART_LIMITS.parts} parts`));
    parser.on('fieldsLimit', () => fail(`more than ${MULTIPART_LIMITS.parts} fields`));
    parser.on('filesLimit', () => fail(`more than ${MULTIPART_LIMITS.files} files`));
    parser.on('error', (err: Error) => fail(err.message.toLowerCase()));
    parser.on('finish', () => {
      finished = true;
      settle();
    });
    parser.end(raw);
  });
  if (parts.length === 0) refuse('no parts');
  return parts;
}

/** A file part built by hand, its digest taken from its bytes. */
export function filePart(file: Omit<Extract<FormPart, { kind: 'file' }>, 'kind' | 'sha256'>): FormPart {
  return { kind: 'file', ...file, sha256: createHash('sha256').update(file.bytes).digest('hex') };
}

/** A quoted-string in a Content-Disposition, as browsers write one (WHATWG HTML, form-data). */
function quoted(value: string): string {
  return `"${value.replace(/\r/g, '%0D').replace(/\n/g, '%0A').replace(/"/g, '%22')}"`;
}

/** A media type as a header value: one line, or the default. */
function mediaTypeOf(value: string): string {
  return /^[\x21-\x7e][\x20-\x7e]*$/.test(value) ? value : 'application/octet-stream';
}

function partHead(part: FormPart): string {
  if (part.kind === 'field') return `Content-Disposition: form-data; name=${quoted(part.name)}\r\n\r\n`;
  return (
    `Content-Disposition: form-data; name=${quoted(part.name)}; filename=${quoted(part.filename)}\r\n` +
    `Content-Type: ${mediaTypeOf(part.contentType)}\r\n\r\n`
  );
}

/**
 * The parts written in one canonical form. The boundary is a digest of them: the same parts
 * give the same bytes, and no part can hold a digest of itself. A file enters it by the digest
 * taken while it was read, so a large upload is hashed once.
 */
export function writeForm(parts: FormPart[]): CanonicalForm {
  const heads = parts.map((p) => Buffer.from(partHead(p), 'utf8'));
  const contents = parts.map((p) => (p.kind === 'file' ? p.bytes : Buffer.from(p.value, 'utf8')));
  const digest = createHash('sha256');
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const content =
      part.kind === 'file' ? part.sha256 : createHash('sha256').update(contents[i]!).digest('hex');
    // Lengths first: no two different forms hash the same stream of bytes.
    digest.update(`${heads[i]!.length}:${contents[i]!.length}:${content}:`).update(heads[i]!);
  }
  const boundary = `vlt-form-${digest.digest('hex').slice(0, 48)}`;
  const delimiter = Buffer.from(`\r\n--${boundary}`, 'latin1');
  const pieces: Buffer[] = [];
  for (let i = 0; i < parts.length; i++) {
    if (contents[i]!.includes(delimiter.subarray(2))) refuse('a part contains the boundary');
    pieces.push(Buffer.from(`--${boundary}\r\n`, 'latin1'), heads[i]!, contents[i]!, Buffer.from('\r\n'));
  }
  pieces.push(Buffer.from(`--${boundary}--\r\n`, 'latin1'));
  return { parts, body: Buffer.concat(pieces), contentType: `multipart/form-data; boundary=${boundary}` };
}

export function summarizeForm(parts: FormPart[]): FormSummary {
  return {
    multipart: parts.map((p) =>
      p.kind === 'field'
        ? {
            name: p.name,
            value:
              p.value.length > SUMMARY_VALUE_CHARS ? `${p.value.slice(0, SUMMARY_VALUE_CHARS)}…` : p.value,
          }
        : {
            name: p.name,
            filename: p.filename,
            contentType: mediaTypeOf(p.contentType),
            bytes: p.bytes.length,
            sha256: p.sha256,
          },
    ),
  };
}
