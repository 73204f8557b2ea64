/**
 * One JSON request over fetch, with the response read once and either parsed by its contract
 * schema or turned into a typed error. Shared by the agent, admin and bootstrap calls.
 */
import { VaultError, errorFromResponse } from './errors.js';

export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** The parts of a zod schema the SDK uses, so callers get the schema's output type. */
export interface Schema<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: { issues: Issue[] } };
}
interface Issue {
  path: PropertyKey[];
}

export interface SendOptions {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  json?: unknown;
  signal?: AbortSignal | undefined;
}

export function normaliseBaseUrl(baseUrl: string): string {
  // The server strips trailing slashes from its public URL: the token audience must match it.
  return baseUrl.replace(/\/+$/, '');
}

export function send(fetchFn: FetchLike, baseUrl: string, o: SendOptions): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json', ...o.headers };
  let body: string | undefined;
  if (o.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(o.json);
  }
  return fetchFn(`${baseUrl}${o.path}`, { method: o.method, headers, body, signal: o.signal });
}

/** Reads the body and throws the typed error of a non-success response. */
export async function failure(
  res: Response,
  where: string,
  secrets: readonly (string | undefined)[],
): Promise<VaultError> {
  const text = await res.text().catch(() => '');
  return errorFromResponse(res, text, where, secrets);
}

/** Parses a success body with its contract schema; a mismatch is an error, not a cast. */
export async function parseBody<T>(res: Response, schema: Schema<T>, where: string): Promise<T> {
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new VaultError(`HTTP ${res.status} from ${where}: the body is not JSON`, {
      status: res.status,
      code: 'INVALID_RESPONSE',
    });
  }
  const parsed = schema.safeParse(json);
  if (parsed.success) return parsed.data;
  // Only the paths: values of a response may be sensitive.
  const paths = parsed.error.issues.map((i) => i.path.map(String).join('.') || '(root)');
  throw new VaultError(`HTTP ${res.status} from ${where}: unexpected response at ${paths.join(', ')}`, {
    status: res.status,
    code: 'INVALID_RESPONSE',
  });
}
