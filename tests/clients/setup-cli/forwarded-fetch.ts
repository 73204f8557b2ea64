import { randomInt } from 'node:crypto';

/** `fetchFn` with an `x-forwarded-for` of its own (TEST-NET-2/benchmark range, 198.18.0.0/15). */
export function forwardedFetch(fetchFn: typeof fetch): typeof fetch {
  const address = `198.18.${randomInt(256)}.${randomInt(1, 255)}`;
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('x-forwarded-for', address);
    return fetchFn(input, { ...init, headers });
  };
}
