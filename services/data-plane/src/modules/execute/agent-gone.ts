import type { FastifyReply } from 'fastify';

/** Aborted once the agent's connection closes before its answer was written. */
export function agentGoneSignal(reply: FastifyReply): AbortSignal {
  const gone = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) gone.abort();
  });
  return gone.signal;
}
