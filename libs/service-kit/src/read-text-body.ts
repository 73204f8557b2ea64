/**
 * Reads a request body as text, decoding each chunk as it arrives. Fastify's own reader
 * (`parseAs: 'string'`) keeps the raw chunks and decodes them in one call at the end, which
 * for a 9 MiB body of non-ASCII text held the event loop for about 60 ms — every tenant of the
 * process waited (bench/hostile-input.ts). Decoding per chunk spreads that work over the
 * chunks' arrival. Limits and errors are Fastify's own: the same 413 and 400 answers.
 */
import { StringDecoder } from 'node:string_decoder';
import type { FastifyRequest } from 'fastify';
import { consumeBody, type BodyPayload } from './consume-body.js';

export function readTextBody(
  request: FastifyRequest,
  payload: BodyPayload,
  fallbackLimit: number,
  done: (err: Error | null, text?: string) => void,
): void {
  const decoder = new StringDecoder('utf8');
  let text = '';
  consumeBody(
    request,
    payload,
    request.routeOptions.bodyLimit ?? fallbackLimit,
    {
      write(bytes) {
        text += decoder.write(bytes);
        return undefined;
      },
      end: () => text + decoder.end(),
    },
    done,
  );
}
