/**
 * The LLM proxy (ADR 0043): an official SDK, pointed at `/v1/vault/llm/<provider>`, sends its
 * request as it would to the provider. It becomes a Model B call on the provider's singleton
 * connection — the same pipeline, rules, approvals, rate limits and response filters — and the
 * answer goes back in the provider's own shape, with no envelope.
 */
import { SERVICES, type ConnectionDescriptor, type ExecuteModelB } from '@vlt/contracts';
import { createLlmStreamRedactionCore, type InspectedBody, type LlmStreamProtocol } from '@vlt/policy-engine';
import { Errors } from '@vlt/service-kit';
import type { DataPlaneDeps } from '../../deps.js';
import type { AgentPrincipal } from '../../plugins/agent-auth.js';
import {
  executeModelB,
  type ApprovalRequired,
  type ExecutionResult,
  type StreamedResult,
} from '../execute/service.js';
import { RawJsonBody } from '../execute/respond.js';
import { isMultipart, readForm, summarizeForm, writeForm, type FormPart } from './multipart-body.js';
import type { LlmProvider } from './provider-shapes.js';

/** How each provider streams text deltas (for redaction across events, ADR 0043). */
const STREAM_PROTOCOL: Record<LlmProvider, LlmStreamProtocol> = {
  llm_a: 'anthropic',
  llm_b: 'openai',
  llm_c: 'gemini',
  llm_d: 'openai',
};

/**
 * Request headers an SDK sends that the provider reads. Everything else (its key headers, which
 * carry the agent token here, telemetry, cookies) stays with the vault.
 */
const FORWARDED_HEADERS = new Set([
  'content-type',
  'accept',
  'anthropic-version',
  'anthropic-beta',
  'openai-organization',
  'openai-project',
  'openai-beta',
  'idempotency-key',
  'x-goog-api-client',
  'user-agent',
  // Gemini's resumable uploads (ADR 0095).
  'x-goog-upload-protocol',
  'x-goog-upload-command',
  'x-goog-upload-offset',
  'x-goog-upload-header-content-length',
  'x-goog-upload-header-content-type',
  'x-goog-upload-file-name',
]);

/** Query parameters never forwarded: a key in the query would be the agent's token. */
const DROPPED_QUERY = new Set(['key']);

export interface LlmCall {
  provider: LlmProvider;
  method: string;
  /** Path after `/v1/vault/llm/<provider>`, as sent (starts with `/`). */
  path: string;
  /** Raw query string without `?`, or ''. */
  query: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body as text (JSON or text), bytes for an upload (a form, a Gemini chunk), or undefined. */
  body: string | Buffer | undefined;
  /** A text body's bytes, where they are valid UTF-8 (ExecuteOptions.textBytes). */
  textBytes?: Buffer;
  /** Aborted when the agent hangs up (see ExecuteOptions). */
  agentGone?: AbortSignal;
  /** This provider's LLM route as the agent reached it: `<origin>/v1/vault/llm/<provider>`. */
  vaultBase?: string;
}

export type LlmOutcome =
  | { kind: 'approval'; approval: ApprovalRequired; presentedUrl: string }
  | { kind: 'streamed'; result: StreamedResult }
  | { kind: 'buffered'; result: ExecutionResult };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']);

function singletonService(provider: LlmProvider) {
  return SERVICES.find((s) => s.provider === provider && s.singleton)!;
}

function connectionOf(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  service: string,
): ConnectionDescriptor | null {
  const live = deps.caches
    .connectionsOf(agent.workspaceId)
    .filter((c) => c.service === service && c.singleton && c.status !== 'revoked');
  return live.length === 1 ? live[0]! : null;
}

/**
 * A chunk of a Gemini resumable upload: any command but the `start` that opens the upload. Its
 * body is the file's bytes, sent whatever content type the SDK names (it says JSON).
 */
export function isUploadChunk(headers: LlmCall['headers']): boolean {
  const command = headers['x-goog-upload-command'];
  return typeof command === 'string' && command.trim().toLowerCase() !== 'start';
}

/**
 * The upload URL Gemini answers a resumable upload's start with, made to address the vault. The
 * SDK sends every chunk to that URL's path on the host it was configured with: the provider's
 * path alone would miss the LLM route, and a client that follows the URL as given would take
 * the agent's token to the provider. An upload URL outside the provider's API is not relayed.
 */
function uploadUrlThroughVault(headers: Record<string, string>, base: string, vaultBase: string): void {
  const url = headers['x-goog-upload-url'];
  if (url === undefined) return;
  delete headers['x-goog-upload-url'];
  if (url.startsWith(`${base}/`)) headers['x-goog-upload-url'] = `${vaultBase}${url.slice(base.length)}`;
}

/** `llm_a`'s message batch endpoints, whose answers name a batch's `results_url`. */
const MESSAGE_BATCHES = /^\/v1\/messages\/batches(?:\/|$)/;

/**
 * A message batch's `results_url` (of one batch, or of each in a list), made to address the
 * vault. It is an absolute URL at the provider, which the SDK's `results()` fetches as given,
 * with its key: here the agent's vault token, taken to the provider, and the results read
 * around the vault. A URL outside the provider's API is not relayed (null).
 */
export function resultsUrlsThroughVault(result: ExecutionResult, base: string, vaultBase: string): void {
  const raw = result.body instanceof RawJsonBody;
  const value: unknown = raw ? JSON.parse((result.body as RawJsonBody).json) : result.body;
  if (typeof value !== 'object' || value === null) return;
  const batches = Array.isArray((value as { data?: unknown }).data)
    ? (value as { data: unknown[] }).data
    : [value];
  let changed = false;
  for (const batch of batches) {
    if (typeof batch !== 'object' || batch === null) continue;
    const b = batch as { results_url?: unknown };
    if (typeof b.results_url !== 'string') continue;
    b.results_url = b.results_url.startsWith(`${base}/`)
      ? `${vaultBase}${b.results_url.slice(base.length)}`
      : null;
    changed = true;
  }
  if (raw && changed) result.body = new RawJsonBody(JSON.stringify(value));
}

/**
 * A provider's own streaming endpoint (`:streamGenerateContent`, `alt=sse`), or a `stream` field
 * of `true` in a form (a streamed transcription). A JSON body's `"stream": true` is read by
 * `jsonAsksToStream` from the pipeline's parse.
 */
function streamingEndpointOrForm(call: Pick<LlmCall, 'path' | 'query'>, form?: FormPart[]): boolean {
  if (/:streamGenerateContent$/.test(call.path)) return true;
  if (new URLSearchParams(call.query).get('alt') === 'sse') return true;
  return form?.some((p) => p.kind === 'field' && p.name === 'stream' && p.value === 'true') ?? false;
}

/**
 * `"stream": true` at the top of a JSON body, at any size within the route's limit
 * (VLT_LLM_BODY_MAX_BYTES). The pipeline has parsed the body already: parsing it here too cost
 * a 30 MiB call with images one more parse, with the event loop held.
 */
function jsonAsksToStream(contentType: string | undefined, body: InspectedBody): boolean {
  if (body.kind !== 'json' || !(contentType ?? '').toLowerCase().includes('json')) return false;
  const value = body.value;
  return typeof value === 'object' && value !== null && (value as { stream?: unknown }).stream === true;
}

function forwardedHeaders(h: LlmCall['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(h)) {
    if (!FORWARDED_HEADERS.has(name) || value === undefined) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function forwardedQuery(raw: string): string {
  if (raw === '') return '';
  const kept = raw.split('&').filter((pair) => {
    const name = decodeURIComponentSafe(pair.split('=', 1)[0] ?? '');
    return name !== '' && !DROPPED_QUERY.has(name);
  });
  return kept.length ? `?${kept.join('&')}` : '';
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

export async function proxyLlmCall(
  deps: DataPlaneDeps,
  agent: AgentPrincipal,
  call: LlmCall,
): Promise<LlmOutcome> {
  if (!METHODS.has(call.method)) throw Errors.badRequest(`method ${call.method} is not supported`);
  const service = singletonService(call.provider);
  const connection = connectionOf(deps, agent, service.id);
  if (!connection) throw Errors.notFound(`no ${service.id} connection in this workspace`);
  const base = (connection.baseUrl ?? deps.config.providers[call.provider].apiUrl ?? '').replace(/\/+$/, '');
  if (base === '') throw Errors.notFound(`no API URL is known for ${call.provider}`);
  const approvalId = call.headers['x-vlt-approval-id'];
  if (approvalId !== undefined && (typeof approvalId !== 'string' || !UUID.test(approvalId))) {
    throw Errors.badRequest('x-vlt-approval-id must be an approval request id');
  }
  const headers = forwardedHeaders(call.headers);
  // An upload is sent in the canonical form it was read into; a resumable upload's chunk as
  // the bytes it is (ADR 0095).
  const form =
    Buffer.isBuffer(call.body) && isMultipart(headers['content-type'])
      ? writeForm(await readForm(call.body, headers['content-type']!))
      : undefined;
  const chunk =
    Buffer.isBuffer(call.body) && !form && call.provider === 'llm_c' && isUploadChunk(call.headers)
      ? call.body
      : undefined;
  if (form) headers['content-type'] = form.contentType;
  else if (chunk) headers['content-type'] = 'application/octet-stream';
  else if (Buffer.isBuffer(call.body)) {
    throw Errors.unsupportedMediaType('the LLM proxy forwards JSON, text and forms only');
  }
  const text = typeof call.body === 'string' && call.body !== '' ? call.body : undefined;
  const req: ExecuteModelB = {
    model: 'B',
    service: service.id,
    method: call.method as ExecuteModelB['method'],
    url: `${base}${call.path}${forwardedQuery(call.query)}`,
    headers,
    ...(form ? { body: form.body } : chunk ? { body: chunk } : text !== undefined && { body: text }),
    stream: streamingEndpointOrForm(call, form?.parts),
    ...(typeof approvalId === 'string' && { approvalId }),
    context: { via: 'llm_proxy', provider: call.provider },
  };
  const presentedUrl = `llm://${call.provider}${call.path}`;
  const out = await executeModelB(deps, agent, req, {
    presentedUrl,
    ...(form && { presentedBody: summarizeForm(form.parts) }),
    ...(text !== undefined && {
      streamWhen: (body: InspectedBody) => jsonAsksToStream(headers['content-type'], body),
      ...(call.textBytes && { textBytes: call.textBytes }),
    }),
    ...(call.agentGone && { agentGone: call.agentGone, cancelWhenAgentGone: true }),
    upstreamTimeouts: {
      headersMs: deps.config.llmTimeoutMs,
      idleMs: deps.config.llmTimeoutMs,
      deadlineMs: deps.config.llmTimeoutMs,
    },
    streamStage: (plan, contentType) =>
      plan && plan.detectors.length > 0 && (contentType ?? '').toLowerCase().includes('text/event-stream')
        ? createLlmStreamRedactionCore(STREAM_PROTOCOL[call.provider], plan.detectors)
        : null,
  });
  if ('approvalRequired' in out) return { kind: 'approval', approval: out, presentedUrl };
  if ('streamed' in out) return { kind: 'streamed', result: out };
  if (call.provider === 'llm_c' && call.vaultBase) uploadUrlThroughVault(out.headers, base, call.vaultBase);
  if (call.provider === 'llm_a' && call.vaultBase && MESSAGE_BATCHES.test(call.path)) {
    resultsUrlsThroughVault(out, base, call.vaultBase);
  }
  return { kind: 'buffered', result: out };
}
