import type { IncomingMessage } from 'node:http';

/** A mock server's request body as text, refused past `max` bytes (mocks must not buffer floods). */
export async function readBody(req: IncomingMessage, max: number): Promise<string> {
  return (await readBodyBytes(req, max)).toString('utf8');
}

/** The same, as the bytes received (a multipart upload is not text). */
export function readBodyBytes(req: IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
