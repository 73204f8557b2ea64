/**
 * Uploads through the LLM proxy (ADR 0095), driven by the official `openai` SDK: `files.create`
 * and `audio.transcriptions.create` send `multipart/form-data`. The vault reads the form and
 * sends it again in one canonical form; the mock reads what arrived with a second parser
 * (undici's `Request.formData`), so a test fails if the two readings of a form differ. Large
 * bodies, uploads or chat calls with images, have the LLM routes' own limit and a budget per
 * process (ADR 0096).
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import Anthropic, { toFile as toAnthropicFile } from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI, { toFile } from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectStatus, http, putAllowlists } from '../support/api-client.js';
import { sightings, startLlmGateway, type LlmGateway, type LlmRecord } from '../support/mock-llm.js';

const SHAPES = ['embedded', 'services'] as const;

/** Bytes that look like framing: CR LF, dashes and a boundary-like line, between random bytes. */
function trickyBytes(size: number): Buffer {
  const marker = Buffer.from('\r\n--boundary\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nx');
  return Buffer.concat([randomBytes(size >> 1), marker, randomBytes(size - (size >> 1))]);
}

/** The form the provider received, read by undici's parser. */
async function formAtProvider(rec: LlmRecord): Promise<FormData> {
  const ct = String(rec.headers['content-type']);
  return new Request('http://provider.invalid/', {
    method: 'POST',
    headers: { 'content-type': ct },
    body: rec.bytes,
  }).formData();
}

async function fileBytes(value: ReturnType<FormData['get']>): Promise<Buffer> {
  if (!(value instanceof Blob)) throw new Error('expected a file part');
  return Buffer.from(await value.arrayBuffer());
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe.each(SHAPES)('uploads through the LLM proxy (%s)', (shape) => {
  let fx: LlmGateway;
  const unroute: Array<() => void> = [];

  beforeAll(async () => {
    fx = await startLlmGateway({ shape });
  });
  afterAll(async () => {
    await fx?.close();
  });
  afterEach(() => {
    for (const off of unroute.splice(0)) off();
  });

  const client = (apiKey: string, opts: ConstructorParameters<typeof OpenAI>[0] = {}) =>
    new OpenAI({ apiKey, baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`, maxRetries: 0, ...opts });

  /** The provider's answers to uploads: what OpenAI answers, from what the mock parsed. */
  function answerUploads() {
    unroute.push(
      fx.mock.route('POST /v1/files', async (_req, res, rec) => {
        const form = await formAtProvider(rec);
        const file = form.get('file') as File;
        rec.status = 200;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'file-mock1',
            object: 'file',
            bytes: file.size,
            created_at: 1,
            filename: file.name,
            purpose: form.get('purpose'),
            status: 'processed',
          }),
        );
      }),
      fx.mock.route('POST /v1/audio/transcriptions', async (_req, res, rec) => {
        const form = await formAtProvider(rec);
        rec.status = 200;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            text: `heard ${(form.get('file') as File).size} bytes in ${form.get('language')}`,
          }),
        );
      }),
    );
  }

  async function bindUploads(rules?: { request?: unknown[] }) {
    const b = await fx.bind('llm_b', rules ? { rules } : undefined);
    expectStatus(
      await putAllowlists(fx.admin, b.policyId, [
        { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/v1/files', '/v1/audio/transcriptions'] },
      ]),
      200,
    );
    answerUploads();
    return b;
  }

  it('files.create: the provider gets the file byte for byte, its name and purpose, with the stored key', async () => {
    const b = await bindUploads();
    const bytes = trickyBytes(70_000);
    const before = fx.mock.requests.length;
    const file = await client(b.token).files.create({
      file: await toFile(bytes, 'batch "input".jsonl', { type: 'application/jsonl' }),
      purpose: 'batch',
    });
    expect(file).toMatchObject({ id: 'file-mock1', bytes: bytes.length, purpose: 'batch' });
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ keyHeader: 'authorization', key: fx.keys.llm_b, path: '/v1/files' });
    expect(String(seen[0]!.headers['content-type'])).toMatch(
      /^multipart\/form-data; boundary=vlt-form-[0-9a-f]{48}$/,
    );
    const form = await formAtProvider(seen[0]!);
    expect([...form.keys()].sort()).toEqual(['file', 'purpose']);
    expect(form.get('purpose')).toBe('batch');
    expect((await fileBytes(form.get('file'))).equals(bytes)).toBe(true);
    // A quote in a filename is written as %22, the way a browser sends it (WHATWG), and read back.
    expect(seen[0]!.bytes.toString('latin1')).toContain('filename="batch %22input%22.jsonl"');
    expect((form.get('file') as File).name).toBe('batch "input".jsonl');
    expect((form.get('file') as File).type).toBe('application/jsonl');
    expect(sightings(seen, b.token)).toEqual([]);
  });

  it('audio.transcriptions.create: fields and the audio arrive as the SDK sent them', async () => {
    const b = await bindUploads();
    const audio = randomBytes(40_000);
    const before = fx.mock.requests.length;
    const out = await client(b.token).audio.transcriptions.create({
      file: await toFile(audio, 'speech.mp3', { type: 'audio/mpeg' }),
      model: 'whisper-mock',
      language: 'en',
      timestamp_granularities: ['word', 'segment'],
      response_format: 'verbose_json',
    });
    expect(out.text).toBe('heard 40000 bytes in en');
    const [rec] = fx.mock.since(before);
    const form = await formAtProvider(rec!);
    expect(form.get('model')).toBe('whisper-mock');
    expect(form.getAll('timestamp_granularities[]')).toEqual(['word', 'segment']);
    expect((await fileBytes(form.get('file'))).equals(audio)).toBe(true);
    expect((form.get('file') as File).type).toBe('audio/mpeg');
  });

  it('Anthropic beta.files.upload: the file arrives byte for byte under the stored x-api-key', async () => {
    const b = await fx.bind('llm_a');
    expectStatus(
      await putAllowlists(fx.admin, b.policyId, [
        { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/v1/files'] },
      ]),
      200,
    );
    answerUploads();
    const bytes = trickyBytes(20_000);
    const before = fx.mock.requests.length;
    const anthropic = new Anthropic({
      apiKey: b.token,
      baseURL: `${fx.base}/v1/vault/llm/llm_a`,
      maxRetries: 0,
    });
    const meta = await anthropic.beta.files.upload({
      file: await toAnthropicFile(bytes, 'report.pdf', { type: 'application/pdf' }),
      betas: ['files-api-2025-04-14'],
    });
    expect(meta).toMatchObject({ id: 'file-mock1', filename: 'report.pdf' });
    const [rec] = fx.mock.since(before);
    expect(rec).toMatchObject({ keyHeader: 'x-api-key', key: fx.keys.llm_a });
    // The beta header the Files API needs is one the provider reads: forwarded.
    expect(rec!.headers['anthropic-beta']).toBe('files-api-2025-04-14');
    expect((await fileBytes((await formAtProvider(rec!)).get('file'))).equals(bytes)).toBe(true);
    expect(sightings([rec!], b.token)).toEqual([]);
  });

  describe('Gemini resumable uploads (ai.files.upload)', () => {
    /** Gemini's two steps: `start` answers an upload URL, the chunks then go to that URL. */
    function answerResumable(uploadUrl: (id: string) => string) {
      const chunks: Buffer[] = [];
      unroute.push(
        fx.mock.route('POST /upload/v1beta/files', (req, res, rec) => {
          rec.status = 200;
          const command = String(req.headers['x-goog-upload-command']);
          if (command === 'start') {
            res.writeHead(200, { 'x-goog-upload-url': uploadUrl('u-1'), 'x-goog-upload-status': 'active' });
            res.end();
            return;
          }
          chunks.push(rec.bytes);
          const size = Buffer.concat(chunks).length;
          const final = command.includes('finalize');
          res.writeHead(200, {
            'content-type': 'application/json',
            'x-goog-upload-status': final ? 'final' : 'active',
          });
          res.end(
            final
              ? JSON.stringify({ file: { name: 'files/u-1', sizeBytes: String(size), state: 'ACTIVE' } })
              : '',
          );
        }),
      );
      return chunks;
    }

    async function bindGemini() {
      const b = await fx.bind('llm_c');
      expectStatus(
        await putAllowlists(fx.admin, b.policyId, [
          { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/upload/v1beta/files'] },
        ]),
        200,
      );
      return b;
    }

    const gemini = (token: string) =>
      new GoogleGenAI({
        apiKey: token,
        httpOptions: {
          baseUrl: `${fx.base}/v1/vault/llm/llm_c`,
          apiVersion: 'v1beta',
          retryOptions: { attempts: 1 },
        },
      });

    it('every chunk goes through the vault, byte for byte, with the stored key; the upload URL names the vault', async () => {
      const b = await bindGemini();
      const chunks = answerResumable(
        (id) => `${fx.mock.url}/upload/v1beta/files?upload_id=${id}&upload_protocol=resumable`,
      );
      // Over the SDK's 8 MiB chunk: two chunks, the second one finalising.
      const bytes = trickyBytes(8 * 1024 * 1024 + 3_000);
      const before = fx.mock.requests.length;
      const file = await gemini(b.token).files.upload({
        file: new Blob([bytes], { type: 'video/mp4' }),
        config: { displayName: 'clip' },
      });
      expect(file).toMatchObject({ name: 'files/u-1', sizeBytes: String(bytes.length) });
      const seen = fx.mock.since(before);
      expect(seen.map((r) => r.headers['x-goog-upload-command'])).toEqual([
        'start',
        'upload',
        'upload, finalize',
      ]);
      for (const r of seen) expect(r).toMatchObject({ keyHeader: 'x-goog-api-key', key: fx.keys.llm_c });
      expect(seen[0]!.headers['x-goog-upload-header-content-length']).toBe(String(bytes.length));
      expect(seen[1]!.query).toMatchObject({ upload_id: 'u-1' });
      expect(seen[2]!.headers['x-goog-upload-offset']).toBe(String(8 * 1024 * 1024));
      expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
      expect(sightings(seen, b.token)).toEqual([]);
    });

    it('an upload URL outside the provider is not relayed: the SDK stops, nothing goes anywhere else', async () => {
      const b = await bindGemini();
      answerResumable((id) => `https://uploads.elsewhere.invalid/upload/v1beta/files?upload_id=${id}`);
      const before = fx.mock.requests.length;
      await expect(
        gemini(b.token).files.upload({ file: new Blob([randomBytes(100)], { type: 'video/mp4' }) }),
      ).rejects.toThrow(/upload url/i);
      expect(fx.mock.since(before).map((r) => r.headers['x-goog-upload-command'])).toEqual(['start']);
    });

    it('a chunk is bytes on the Gemini route only: sent to another provider it is refused with 415', async () => {
      const b = await bindUploads();
      const res = await fetch(`${fx.base}/v1/vault/llm/llm_b/v1/files`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${b.token}`,
          'content-type': 'application/json',
          'x-goog-upload-command': 'upload, finalize',
        },
        body: randomBytes(64),
      });
      expect(res.status).toBe(415);
    });
  });

  it('a JSON body reaches the provider as the bytes the agent sent; bytes that are no UTF-8, as the text the vault judged', async () => {
    const b = await fx.bind('llm_b');
    const send = (body: Buffer) =>
      fetch(`${fx.base}/v1/vault/llm/llm_b/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
        body,
      });
    const chat = (content: Buffer) =>
      Buffer.concat([
        Buffer.from('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"'),
        content,
        Buffer.from('"}]}'),
      ]);

    const valid = chat(Buffer.from('héllo 😀 \u2028 \\"quoted\\"', 'utf8'));
    let before = fx.mock.requests.length;
    expect((await send(valid)).status).toBe(200);
    expect(fx.mock.since(before)[0]!.bytes.equals(valid)).toBe(true);

    // A 4-byte sequence cut after 3: one U+FFFD where it stood, 3 bytes for 3, so the text the
    // vault judged is as long as the bytes sent, and only their content tells them apart.
    const invalid = chat(Buffer.from([0x61, 0xf0, 0x9f, 0x98, 0x62]));
    before = fx.mock.requests.length;
    expect((await send(invalid)).status).toBe(200);
    const got = fx.mock.since(before)[0]!.bytes;
    expect(got.equals(invalid)).toBe(false);
    expect(got.equals(Buffer.from(invalid.toString('utf8'), 'utf8'))).toBe(true);
    expect(
      (fx.mock.since(before)[0]!.json as { messages: Array<{ content: string }> }).messages[0]!.content,
    ).toBe('a\ufffdb');
  });

  it('a streamed transcription (form field stream=true) is relayed as it arrives, not buffered', async () => {
    const b = await bindUploads();
    let firstSeen!: () => void;
    const seenFirst = new Promise<void>((resolve) => (firstSeen = resolve));
    unroute.push(
      fx.mock.route('POST /v1/audio/transcriptions', async (_req, res, rec) => {
        rec.status = 200;
        rec.streamed = true;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const event = (e: object) => res.write(`data: ${JSON.stringify(e)}\n\n`);
        event({ type: 'transcript.text.delta', delta: 'Hello' });
        // The rest is sent only once the SDK has read the first delta: a buffering vault hangs here.
        await seenFirst;
        event({ type: 'transcript.text.delta', delta: ' there' });
        event({ type: 'transcript.text.done', text: 'Hello there' });
        res.end();
      }),
    );
    const stream = await client(b.token).audio.transcriptions.create({
      file: await toFile(randomBytes(1_000), 'speech.mp3', { type: 'audio/mpeg' }),
      model: 'gpt-4o-mini-transcribe-mock',
      stream: true,
    });
    const deltas: string[] = [];
    let text = '';
    for await (const event of stream) {
      if (event.type === 'transcript.text.delta') {
        deltas.push(event.delta);
        firstSeen();
      } else if (event.type === 'transcript.text.done') text = event.text;
    }
    expect(deltas).toEqual(['Hello', ' there']);
    expect(text).toBe('Hello there');
  });

  it('approval: the reviewer sees the fields and the file by size and digest; the SDK replay runs the same upload once', async () => {
    const b = await bindUploads({
      request: [
        { label: 'uploads need a human', match: { urlPattern: '/v1/files$' }, action: 'require_approval' },
      ],
    });
    const bytes = trickyBytes(5_000);
    const upload = async () => ({
      file: await toFile(bytes, 'notes.jsonl', { type: 'application/jsonl' }),
      purpose: 'batch' as const,
    });
    const before = fx.mock.requests.length;
    const { data, response } = await client(b.token)
      .files.create(await upload())
      .withResponse();
    expect(response.status).toBe(202);
    const paused = data as unknown as { approvalRequestId: string; approvalUrl: string };
    expect(paused.approvalUrl).toBe('llm://llm_b/v1/files');
    expect(fx.mock.since(before)).toEqual([]);

    const shown = expectStatus(
      await http<{ approval: { requestDetails: { body: unknown } } }>(
        'GET',
        `${fx.gw.baseUrl}/v1/approvals/${paused.approvalRequestId}`,
        { headers: fx.admin.headers },
      ),
      200,
    ).body.approval;
    expect(shown.requestDetails.body).toEqual({
      multipart: [
        {
          name: 'file',
          filename: 'notes.jsonl',
          contentType: 'application/jsonl',
          bytes: bytes.length,
          sha256: sha256(bytes),
        },
        { name: 'purpose', value: 'batch' },
      ],
    });
    await fx.approve(paused.approvalRequestId);

    const replaying = client(b.token, { defaultHeaders: { 'x-vlt-approval-id': paused.approvalRequestId } });
    // Another file under the same approval: refused, nothing sent.
    const other = await replaying.files
      .create({ file: await toFile(trickyBytes(5_000), 'notes.jsonl'), purpose: 'batch' })
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(other).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((other as Error).message).toContain('different request');
    expect(fx.mock.since(before)).toEqual([]);

    // The SDK writes the form again with a new random boundary: still the approved upload.
    const done = await replaying.files.create(await upload());
    expect(done).toMatchObject({ id: 'file-mock1', bytes: bytes.length });
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect((await fileBytes((await formAtProvider(seen[0]!)).get('file'))).equals(bytes)).toBe(true);
  });

  // Regression: uploads shared the server's 10 MiB limit, so an SDK's transcription of a
  // 25 MB recording (OpenAI's own limit) was refused by the vault.
  it('a 25 MB recording, the most OpenAI transcribes, goes through the vault byte for byte', async () => {
    const b = await bindUploads();
    const audio = randomBytes(25_000_000);
    const before = fx.mock.requests.length;
    const out = await client(b.token).audio.transcriptions.create({
      file: await toFile(audio, 'meeting.mp3', { type: 'audio/mpeg' }),
      model: 'whisper-mock',
      language: 'en',
    });
    expect(out.text).toBe('heard 25000000 bytes in en');
    const [rec] = fx.mock.since(before);
    expect(sha256(await fileBytes((await formAtProvider(rec!)).get('file')))).toBe(sha256(audio));
  });

  // Regression: chat calls shared the server's 10 MiB limit too, so a call with a few large
  // images (Anthropic takes 32 MB) was refused; past 10 MiB, `stream: true` went unread.
  it('a streamed chat call carrying 12 MiB of images goes through and streams', async () => {
    const b = await fx.bind('llm_b');
    const image = `data:image/png;base64,${randomBytes(9 * 1024 * 1024).toString('base64')}`;
    let firstSeen!: () => void;
    const seenFirst = new Promise<void>((resolve) => (firstSeen = resolve));
    unroute.push(
      fx.mock.route('POST /v1/chat/completions', async (_req, res, rec) => {
        rec.status = 200;
        rec.streamed = true;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const delta = (content: string) =>
          res.write(
            `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-mock', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`,
          );
        delta('A picture');
        // The rest only once the SDK has read the first delta: a buffering vault hangs here.
        await seenFirst;
        delta(' of noise.');
        res.end('data: [DONE]\n\n');
      }),
    );
    const before = fx.mock.requests.length;
    const stream = await client(b.token).chat.completions.create({
      model: 'gpt-mock',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image_url', image_url: { url: image } },
          ],
        },
      ],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      firstSeen();
    }
    expect(text).toBe('A picture of noise.');
    const [rec] = fx.mock.since(before);
    expect(rec).toMatchObject({ streamed: true, key: fx.keys.llm_b });
    expect(rec!.bytes.length).toBeGreaterThan(12 * 1024 * 1024);
    expect(rec!.bytes.toString('utf8')).toContain(image);
  });

  // Regression: the approval carried the whole body to the control plane in one bus message,
  // which NATS refuses over 1 MiB: a step-up on a chat call with an image answered 503 in the
  // split shape. The approval keeps a bounded preview now (ADR 0099); the fingerprint still
  // binds the whole body.
  it('regression: a step-up on a chat call carrying a 3 MB image is filed (202, not 503); the reviewer sees its text and size; the replay runs once', async () => {
    const b = await fx.bind('llm_b', {
      rules: {
        request: [
          {
            label: 'images need a human',
            match: { urlPattern: '/v1/chat/completions$' },
            action: 'require_approval',
          },
        ],
      },
    });
    const image = `data:image/png;base64,${randomBytes(3_000_000).toString('base64')}`;
    const params = {
      model: 'gpt-4o',
      messages: [
        {
          role: 'user' as const,
          content: [
            { type: 'text' as const, text: 'What is in this picture?' },
            { type: 'image_url' as const, image_url: { url: image } },
          ],
        },
      ],
    };
    const before = fx.mock.requests.length;
    const { data, response } = await client(b.token).chat.completions.create(params).withResponse();
    expect(response.status).toBe(202);
    const paused = data as unknown as { approvalRequestId: string };
    expect(fx.mock.since(before)).toEqual([]);

    const { requestDetails } = expectStatus(
      await http<{ approval: { requestDetails: Record<string, unknown> } }>(
        'GET',
        `${fx.gw.baseUrl}/v1/approvals/${paused.approvalRequestId}`,
        { headers: fx.admin.headers },
      ),
      200,
    ).body.approval;
    expect(requestDetails).not.toHaveProperty('body');
    const preview = requestDetails.bodyPreview as { bytes: number; shown: typeof params };
    expect(preview.bytes).toBe(Buffer.byteLength(JSON.stringify(params)));
    expect(preview.shown.model).toBe('gpt-4o');
    const [text, picture] = preview.shown.messages[0]!.content as [unknown, { image_url: { url: string } }];
    expect(text).toEqual({ type: 'text', text: 'What is in this picture?' });
    expect(picture.image_url.url).toMatch(
      /^data:image\/png;base64,[A-Za-z0-9+/]{1000,1024}… \[\d+ more characters\]$/,
    );

    await fx.approve(paused.approvalRequestId);
    const replaying = client(b.token, { defaultHeaders: { 'x-vlt-approval-id': paused.approvalRequestId } });
    // The preview is not the request: sent instead of the body, it does not match the approval.
    const wrong = await replaying.chat.completions
      .create({ ...params, messages: [{ role: 'user', content: [preview.shown.messages[0]!.content[1]!] }] })
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(wrong).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((wrong as Error).message).toContain('different request');
    const done = await replaying.chat.completions.create(params);
    expect(done.choices[0]!.message.content).toBe('Hello from the mock model.');
    const seen = fx.mock.since(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.bytes.toString('utf8')).toContain(image);
  });

  // Regression: Fastify's own 413 went out as the vault's `{error}` body, which the SDKs show
  // without the vault's message; JSON bodies over the limit (large base64 images) had it too.
  it('a body over the 32 MiB limit, upload or JSON, surfaces in the SDK as a 413 with the vault message, nothing sent', async () => {
    const b = await bindUploads();
    const before = fx.mock.requests.length;
    const refused = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
      return (err as Error).message;
    };
    expect(
      await refused(
        client(b.token).audio.transcriptions.create({
          file: await toFile(Buffer.alloc(32 * 1024 * 1024 + 1), 'long.mp3', { type: 'audio/mpeg' }),
          model: 'whisper-mock',
        }),
      ),
    ).toContain('vault: request body is larger than 33554432 bytes');
    const json = await refused(
      client(b.token).chat.completions.create({
        model: 'gpt-mock',
        messages: [{ role: 'user', content: 'x'.repeat(32 * 1024 * 1024) }],
      }),
    );
    expect(json).toContain('vault: request body is larger than 33554432 bytes');
    expect(fx.mock.since(before)).toEqual([]);
  });

  // Regression guard: the legacy path answers without authentication, so a larger upload limit
  // there would let anyone make the vault read 32 MiB before its 308.
  it('the legacy path keeps the 10 MiB limit for an upload: unauthenticated, it is refused with 413', async () => {
    const res = await fetch(`${fx.base}/v1/llm/proxy/llm_b/v1/files`, {
      method: 'POST',
      headers: { 'content-type': 'multipart/form-data; boundary=b0undary' },
      body: Buffer.alloc(10 * 1024 * 1024 + 1, 0x61),
      redirect: 'manual',
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(
      'larger than 10485760 bytes',
    );
  });

  /** A hand-written upload, for framings no SDK writes. */
  async function rawUpload(token: string, body: Buffer | string, boundary = 'b0undary') {
    return fetch(`${fx.base}/v1/vault/llm/llm_b/v1/files`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
      },
      body,
    });
  }

  it('a preamble and an epilogue never reach the provider: it gets the parts the vault read, nothing else', async () => {
    const b = await bindUploads();
    const before = fx.mock.requests.length;
    const body =
      'preamble\r\n--b0undary\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n' +
      '--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n{}\r\n' +
      '--b0undary--\r\n--b0undary\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nfine-tune\r\n--b0undary--\r\n';
    const res = await rawUpload(b.token, body);
    expect(res.status).toBe(200);
    const [rec] = fx.mock.since(before);
    expect(rec!.bytes.toString('latin1')).not.toContain('preamble');
    expect(rec!.bytes.toString('latin1')).not.toContain('fine-tune');
    const form = await formAtProvider(rec!);
    expect(form.getAll('purpose')).toEqual(['batch']);
  });

  it('a part whose filename* holds CR LF is not read, so not sent: alone, the upload is refused', async () => {
    const b = await bindUploads();
    const before = fx.mock.requests.length;
    const body =
      '--b0undary\r\nContent-Disposition: form-data; name="file"; ' +
      "filename*=UTF-8''a.jsonl%0D%0AContent-Type%3A%20text%2Fhtml\r\n\r\n{}\r\n--b0undary--\r\n";
    const res = await rawUpload(b.token, body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('no parts');
    expect(fx.mock.since(before)).toEqual([]);
  });

  it.each([
    [
      'a part in a transfer encoding',
      '--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n' +
        'Content-Transfer-Encoding: base64\r\n\r\nYWJj\r\n--b0undary--\r\n',
      /transfer-encoding/,
    ],
    [
      'more parts than a form may hold',
      `${Array.from({ length: 101 }, (_, i) => `--b0undary\r\nContent-Disposition: form-data; name="f${i}"\r\n\r\nv\r\n`).join('')}--b0undary--\r\n`,
      /more than 100/,
    ],
    ['no parts at all', '--b0undary--\r\n', /no parts/],
    [
      'a body cut before its closing boundary',
      '--b0undary\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch',
      /multipart body/,
    ],
  ])('refused with 400 in the provider shape, nothing sent: %s', async (_name, body, message) => {
    const b = await bindUploads();
    const before = fx.mock.requests.length;
    const res = await rawUpload(b.token, body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: { message: string; code: string } };
    expect(json.error.message).toMatch(message);
    expect(json.error.message).toMatch(/^vault: /);
    expect(fx.mock.since(before)).toEqual([]);
  });

  it('a multipart content type without a boundary is refused with 400, nothing sent', async () => {
    const b = await bindUploads();
    const before = fx.mock.requests.length;
    const res = await fetch(`${fx.base}/v1/vault/llm/llm_b/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${b.token}`, 'content-type': 'multipart/form-data' },
      body: 'x',
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/boundary/);
    expect(fx.mock.since(before)).toEqual([]);
  });

  it('other binary bodies are still refused with 415 in the provider shape', async () => {
    const b = await bindUploads();
    const res = await fetch(`${fx.base}/v1/vault/llm/llm_b/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/octet-stream' },
      body: randomBytes(100),
    });
    expect(res.status).toBe(415);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBeTruthy();
  });
});

/**
 * The bytes of large bodies a data plane holds at once are bounded (ADR 0096): with a 1 MiB
 * budget, a second 600 kB upload, or a 600 kB chat call, waits its turn with 503 while the
 * first upload is at the provider.
 */
describe('large bodies held at once by one data plane', () => {
  let fx: LlmGateway;
  let release!: () => void;
  let held: Promise<void>;
  let arrived!: () => void;
  let atProvider: Promise<void>;

  beforeAll(async () => {
    fx = await startLlmGateway({
      env: {
        VLT_LLM_BODY_MAX_BYTES: String(1024 * 1024),
        VLT_LLM_LARGE_BODIES_IN_FLIGHT_BYTES: String(1024 * 1024),
      },
    });
    fx.mock.route('POST /v1/files', async (_req, res, rec) => {
      arrived();
      await held;
      rec.status = 200;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'file-held', object: 'file', bytes: rec.bytes.length }));
    });
  });
  afterAll(async () => {
    await fx?.close();
  });

  /** The next upload the provider gets is held there until `release()`. */
  function holdNextUpload() {
    held = new Promise<void>((resolve) => (release = resolve));
    atProvider = new Promise<void>((resolve) => (arrived = resolve));
  }

  async function bind() {
    const b = await fx.bind('llm_b');
    expectStatus(
      await putAllowlists(fx.admin, b.policyId, [
        { baseUrl: fx.mock.url, methods: ['POST'], pathPatterns: ['/v1/files'] },
      ]),
      200,
    );
    return new OpenAI({ apiKey: b.token, baseURL: `${fx.base}/v1/vault/llm/llm_b/v1`, maxRetries: 0 });
  }

  const upload = async (openai: OpenAI) =>
    openai.files.create({ file: await toFile(randomBytes(600_000), 'a.jsonl'), purpose: 'batch' });

  it('a second large body over the budget gets 503 with retry-after, nothing sent; once the first is answered the next goes through', async () => {
    const openai = await bind();
    holdNextUpload();
    const first = upload(openai);
    await atProvider;
    const before = fx.mock.requests.length;

    const busy = await upload(openai).then(
      () => null,
      (e: unknown) => e,
    );
    expect(busy).toBeInstanceOf(OpenAI.InternalServerError);
    expect((busy as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((busy as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after')).toBe('1');
    expect((busy as Error).message).toContain(
      'vault: this gateway holds as many large requests as it may at once',
    );
    expect(fx.mock.since(before)).toEqual([]);
    // A large chat call (images, say) waits its turn too.
    const chat = await openai.chat.completions
      .create({ model: 'gpt-mock', messages: [{ role: 'user', content: 'x'.repeat(600_000) }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect((chat as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect(fx.mock.since(before)).toEqual([]);
    // A small call is not held back: the allowlist answers it, not the budget.
    const other = await openai.models.list().then(
      () => null,
      (e: unknown) => e,
    );
    expect((other as InstanceType<typeof OpenAI.APIError>).status).toBe(403);

    release();
    await expect(first).resolves.toMatchObject({ id: 'file-held' });
    holdNextUpload();
    release();
    await expect(upload(openai)).resolves.toMatchObject({ id: 'file-held' });
  });

  // Regression guard: a reservation must be given back when the agent hangs up mid-upload,
  // or every aborted upload would shrink the budget for good.
  it('an upload abandoned halfway gives its bytes back: the next full-size upload goes through', async () => {
    const openai = await bind();
    const token = openai.apiKey;
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve) => {
        const url = new URL(`${fx.base}/v1/vault/llm/llm_b/v1/files`);
        const req = httpRequest(url, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'multipart/form-data; boundary=b0undary',
            'content-length': String(900_000),
          },
        });
        req.on('error', () => resolve());
        req.on('close', () => resolve());
        req.write(Buffer.alloc(400_000, 0x61), () => setTimeout(() => req.destroy(), 50));
      });
    }
    // The server sees each hang-up a moment after the client: retry briefly while it does.
    holdNextUpload();
    release();
    let outcome: unknown;
    for (let attempt = 0; attempt < 40; attempt++) {
      outcome = await upload(openai).catch((e: unknown) => e);
      if (!(outcome instanceof OpenAI.InternalServerError)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(outcome).toMatchObject({ id: 'file-held' });
  });
});
