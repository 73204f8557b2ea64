/**
 * A request body driven chunk by chunk into a sink, with Fastify's own limits and errors: 413
 * past the limit (declared, or as the bytes arrive, decoded ones included when a preParsing
 * stream decompresses), 400 for a body that ends short of its declared length or breaks off.
 * The readers built on it (read-text-body.ts, read-body-bytes.ts) differ only in what they keep.
 */
import type { Readable } from 'node:stream';
import { errorCodes, type FastifyRequest } from 'fastify';

export interface BodySink<T> {
  /** Takes `bytes`, which start at `offset` of the body; an error stops the reading. */
  write(bytes: Buffer, offset: number): Error | undefined;
  /** The body, once every byte has arrived. */
  end(received: number): T;
}

export type BodyPayload = Readable & { receivedEncodedLength?: number };

export function consumeBody<T>(
  request: FastifyRequest,
  payload: BodyPayload,
  limit: number,
  sink: BodySink<T>,
  done: (err: Error | null, body?: T) => void,
): void {
  const declared = Number(request.headers['content-length']);
  if (declared > limit) return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
  let received = 0;

  const detach = () => {
    payload.removeListener('data', onData);
    payload.removeListener('end', onEnd);
    payload.removeListener('error', onEnd);
  };
  function onData(chunk: Buffer | string) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const next = received + bytes.length;
    if (next > limit || (payload.receivedEncodedLength ?? 0) > limit) {
      detach();
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    const refused = sink.write(bytes, received);
    if (refused) {
      detach();
      done(refused);
      return;
    }
    received = next;
  }
  function onEnd(err?: Error & { statusCode?: number }) {
    detach();
    if (err) {
      if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
      return done(err);
    }
    if (!Number.isNaN(declared) && (payload.receivedEncodedLength || received) !== declared) {
      return done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
    }
    done(null, sink.end(received));
  }
  payload.on('data', onData);
  payload.on('end', onEnd);
  payload.on('error', onEnd);
  payload.resume();
}
