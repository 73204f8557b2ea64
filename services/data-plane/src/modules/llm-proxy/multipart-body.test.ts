import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AppError } from '@vlt/service-kit';
import { filePart, readForm, summarizeForm, writeForm, type FormPart } from './multipart-body.js';

/** A form as an SDK frames it: its own boundary, its own header spelling. */
function framed(boundary: string, parts: Array<{ head: string; content: Buffer | string }>): Buffer {
  const pieces: Buffer[] = [];
  for (const p of parts) {
    pieces.push(
      Buffer.from(`--${boundary}\r\n${p.head}\r\n\r\n`),
      Buffer.from(p.content),
      Buffer.from('\r\n'),
    );
  }
  pieces.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(pieces);
}

/** What a second parser (undici's) reads in a canonical form. */
async function reread(form: { body: Buffer; contentType: string }) {
  return new Request('http://x.invalid/', {
    method: 'POST',
    headers: { 'content-type': form.contentType },
    body: form.body,
  }).formData();
}

describe('canonical multipart forms', () => {
  const audio = randomBytes(3_000);

  it('the same parts framed by two SDKs give the same bytes: an approval survives a retry', async () => {
    const sdkA = framed('----sdk-a-123', [
      { head: 'Content-Disposition: form-data; name="model"', content: 'whisper-1' },
      {
        head: 'Content-Disposition: form-data; name="file"; filename="a.mp3"\r\nContent-Type: audio/mpeg',
        content: audio,
      },
    ]);
    const sdkB = Buffer.concat([
      Buffer.from('a preamble\r\n'),
      framed('XyZ', [
        { head: 'content-disposition: form-data; name=model', content: 'whisper-1' },
        {
          head: 'Content-Type: audio/mpeg\r\nContent-Disposition: form-data; filename="a.mp3"; name="file"',
          content: audio,
        },
      ]),
    ]);
    const a = writeForm(await readForm(sdkA, 'multipart/form-data; boundary=----sdk-a-123'));
    const b = writeForm(await readForm(sdkB, 'multipart/form-data; boundary=XyZ'));
    expect(a.body.equals(b.body)).toBe(true);
    expect(a.contentType).toBe(b.contentType);
    expect(a.body.toString('latin1')).not.toContain('preamble');
  });

  it('a file read in one piece is held as a view of the body, not a copy, with its digest', async () => {
    const raw = Buffer.concat([
      Buffer.from('--b\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\n\r\n'),
      audio,
      Buffer.from('\r\n--b--\r\n'),
    ]);
    const [part] = await readForm(raw, 'multipart/form-data; boundary=b');
    if (part?.kind !== 'file') throw new Error('expected a file part');
    expect(part.bytes.equals(audio)).toBe(true);
    expect(part.bytes.buffer).toBe(raw.buffer);
    expect(part.sha256).toBe(createHash('sha256').update(audio).digest('hex'));
  });

  it('another file, or the same file renamed, gives other bytes', async () => {
    const base: FormPart[] = [
      filePart({ name: 'file', filename: 'a.mp3', contentType: 'audio/mpeg', bytes: audio }),
    ];
    const changed = Buffer.from(audio);
    changed[1_500] = changed[1_500]! ^ 1;
    const one = writeForm(base).body;
    expect(
      writeForm([
        filePart({ name: 'file', filename: 'a.mp3', contentType: 'audio/mpeg', bytes: changed }),
      ]).body.equals(one),
    ).toBe(false);
    expect(
      writeForm([
        filePart({ name: 'file', filename: 'b.mp3', contentType: 'audio/mpeg', bytes: audio }),
      ]).body.equals(one),
    ).toBe(false);
  });

  it('a second parser reads exactly the parts that were read: names, values, files, types', async () => {
    const parts: FormPart[] = [
      { kind: 'field', name: 'timestamp_granularities[]', value: 'word' },
      { kind: 'field', name: 'timestamp_granularities[]', value: 'segment' },
      { kind: 'field', name: 'prompt', value: 'Ünïcödé — 🎙️' },
      filePart({ name: 'file', filename: 'dir/spéech.mp3', contentType: 'audio/mpeg', bytes: audio }),
    ];
    const form = await reread(writeForm(parts));
    expect(form.getAll('timestamp_granularities[]')).toEqual(['word', 'segment']);
    expect(form.get('prompt')).toBe('Ünïcödé — 🎙️');
    const file = form.get('file') as File;
    expect(file.name).toBe('dir/spéech.mp3');
    expect(file.type).toBe('audio/mpeg');
    expect(Buffer.from(await file.arrayBuffer()).equals(audio)).toBe(true);
  });

  // Regression guard: a name holding CR LF or a quote must not end its header line.
  it('a name or filename with CR, LF or a quote stays inside its header line', async () => {
    const parts: FormPart[] = [
      { kind: 'field', name: 'a"\r\nContent-Type: text/html', value: 'v' },
      filePart({
        name: 'file',
        filename: 'x.txt"\r\n\r\ninjected',
        contentType: 'text/plain\r\nX-Evil: 1',
        bytes: Buffer.from('ok'),
      }),
    ];
    const written = writeForm(parts);
    const text = written.body.toString('latin1');
    expect(text).not.toContain('\r\nContent-Type: text/html');
    expect(text).not.toContain('X-Evil');
    expect(text).toContain('Content-Type: application/octet-stream');
    const form = await reread(written);
    expect([...form.keys()]).toHaveLength(2);
    expect((form.get('file') as File).name).toBe('x.txt"\r\n\r\ninjected');
  });

  it('refuses framings whose reading could differ, and forms past their limits', async () => {
    const ct = 'multipart/form-data; boundary=b';
    const cases: Array<[Buffer, RegExp]> = [
      [
        framed('b', [
          {
            head: 'Content-Disposition: form-data; name="f"; filename="a"\r\nContent-Transfer-Encoding: base64',
            content: 'YQ==',
          },
        ]),
        /transfer-encoding/,
      ],
      [
        framed('b', [
          {
            head: 'Content-Disposition: form-data; name="f"\r\nContent-Transfer-Encoding: quoted-printable',
            content: 'a=3D',
          },
        ]),
        /transfer-encoding/,
      ],
      [
        framed(
          'b',
          Array.from({ length: 21 }, (_, i) => ({
            head: `Content-Disposition: form-data; name="f${i}"; filename="${i}"`,
            content: 'x',
          })),
        ),
        /more than 20 files/,
      ],
      [
        framed('b', [
          { head: 'Content-Disposition: form-data; name="f"', content: 'x'.repeat(1024 * 1024 + 1) },
        ]),
        /too long/,
      ],
      [Buffer.from('--b\r\nContent-Disposition: form-data; name="f"\r\n\r\nunterminated'), /multipart body/],
      [Buffer.from('--b--\r\n'), /no parts/],
    ];
    for (const [body, message] of cases) {
      const err = await readForm(body, ct).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err, message.source).toBeInstanceOf(AppError);
      expect((err as AppError).statusCode).toBe(400);
      expect((err as AppError).message).toMatch(message);
    }
    await expect(readForm(Buffer.from('x'), 'multipart/form-data')).rejects.toThrow(/boundary/i);
  });

  it('summarises files by size and digest, and cuts long values for reviewers', () => {
    const summary = summarizeForm([
      { kind: 'field', name: 'prompt', value: 'p'.repeat(5_000) },
      filePart({ name: 'file', filename: 'a.mp3', contentType: 'audio/mpeg', bytes: audio }),
    ]);
    expect(summary.multipart[0]).toEqual({ name: 'prompt', value: `${'p'.repeat(2_000)}…` });
    expect(summary.multipart[1]).toEqual({
      name: 'file',
      filename: 'a.mp3',
      contentType: 'audio/mpeg',
      bytes: 3_000,
      sha256: createHash('sha256').update(audio).digest('hex'),
    });
  });
});
