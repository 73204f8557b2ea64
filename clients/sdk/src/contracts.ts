/**
 * The request and response shapes of the public HTTP API, taken from the one package that
 * defines them so the SDK and the server cannot drift apart. @vlt/contracts holds only zod
 * schemas of the wire format, no server code.
 */
export * from '@vlt/contracts';
