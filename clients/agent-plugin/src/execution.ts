/**
 * The brokered calls the tools make (Model B through `POST /v1/vault/execute`, always via
 * @vlt/sdk), their replays once approved, and the replay of an approved language-model call
 * through the vault's LLM proxy.
 */
import type { AgentClient, ApprovalView, ExecuteRequest } from '@vlt/sdk';
import type { ResolvedConfig } from './config.js';
import { prepareDownloadDir, saveDownload } from './download.js';
import {
  VaultApprovalError,
  VaultDownloadError,
  VaultPluginError,
  VaultReenrolmentError,
  bodyPreview,
} from './errors.js';
import type { Log } from './log.js';
import { sessionKeyHeader, type SessionRef } from './session.js';
import { APPROVAL_ID_HEADER, SESSION_KEY_HEADER, type CallScope, type Transport } from './transport.js';

/** What the plugin needs to talk to the vault on behalf of one session. */
export interface VaultContext {
  client: AgentClient;
  transport: Transport;
  config: ResolvedConfig;
  log: Log;
  /** Runs one vault call with the session's headers, mapping failures to the plugin's errors. */
  call<T>(
    session: SessionRef | undefined,
    fn: () => Promise<T>,
    scope?: Omit<CallScope, 'sessionKey'>,
  ): Promise<T>;
  downloadDir(session: SessionRef): string;
  maxDownloadBytes: number;
}

export interface ExecutionResult {
  /** The provider's status: a provider 404 is a result, not an error. */
  status: number;
  headers: Record<string, string>;
  body: unknown;
  auditId: string;
}

export interface ApprovalRequired {
  approvalRequired: true;
  approvalRequestId: string;
  auditId: string;
}

export interface DownloadResult {
  success: true;
  path: string;
  filename: string;
  /** The vault does not report the audit id of a streamed download (see the ADR): null then. */
  auditId: string | null;
}

export type ExecuteOutcome = ExecutionResult | ApprovalRequired;
export type DownloadOutcome = DownloadResult | ApprovalRequired;

/** One Model B call; a 202 comes back as `approvalRequired`. */
export async function execute(
  v: VaultContext,
  session: SessionRef,
  req: ExecuteRequest,
  signal?: AbortSignal,
): Promise<ExecuteOutcome> {
  const { stream: _stream, download: _download, ...buffered } = req;
  const r = await v.call(session, () => v.client.execute(buffered, { signal }), {
    approvalId: req.approvalId,
  });
  if (r.kind === 'approval_required') {
    return { approvalRequired: true, approvalRequestId: r.approvalRequestId, auditId: r.auditId };
  }
  return { status: r.status, headers: r.headers, body: r.body, auditId: r.auditId };
}

/** A Model B download (`download: true`): the raw bytes are written to a file. */
export async function download(
  v: VaultContext,
  session: SessionRef,
  req: ExecuteRequest,
  filename: string | undefined,
  signal?: AbortSignal,
): Promise<DownloadOutcome> {
  const dir = await prepareDownloadDir(v.downloadDir(session));
  const { stream: _stream, ...rest } = req;
  const r = await v.call(session, () => v.client.execute({ ...rest, download: true }, { signal }), {
    approvalId: req.approvalId,
    binary: true,
  });
  if (r.kind === 'approval_required') {
    return { approvalRequired: true, approvalRequestId: r.approvalRequestId, auditId: r.auditId };
  }
  if (r.kind === 'result') {
    // The vault buffers a provider's error answer into the usual envelope: nothing to save.
    throw new VaultDownloadError('download', `the provider answered HTTP ${r.status}; nothing was saved`, {
      status: r.status,
      auditId: r.auditId,
    });
  }
  const saved = await saveDownload({
    dir,
    body: r.body,
    requestedName: filename,
    contentDisposition: r.headers['content-disposition'],
    url: req.url,
    maxBytes: v.maxDownloadBytes,
  });
  v.log.info(`downloaded ${saved.bytes} bytes to ${saved.filename}`);
  return { success: true, path: saved.path, filename: saved.filename, auditId: r.auditId };
}

/**
 * A body over 256 KiB is kept by the vault as a preview only (`bodyPreview`): the request cannot
 * be rebuilt from it, and sending the preview would not match the approval anyway.
 */
function refuseBodyPreview(approval: ApprovalView, again: string): void {
  if (approval.requestDetails.bodyPreview === undefined) return;
  throw new VaultApprovalError(
    `approval ${approval.id} is approved, but the vault kept only a preview of the request's large body: ${again}`,
    { code: 'APPROVAL_NOT_REPLAYABLE' },
  );
}

/** The request an approval was filed for, rebuilt from what the vault recorded. */
export function requestFromApproval(approval: ApprovalView): ExecuteRequest {
  refuseBodyPreview(approval, 'call again with exactly the same request and approvalId set to this id');
  const d = approval.requestDetails;
  const headers =
    d.headers && typeof d.headers === 'object' ? (d.headers as Record<string, string>) : undefined;
  return {
    connectionId: approval.connectionId,
    method: d.method as ExecuteRequest['method'],
    url: String(d.url),
    ...(headers && Object.keys(headers).length > 0 && { headers }),
    ...(d.body !== null && d.body !== undefined && { body: d.body }),
    ...(d.requestFullFields === true && { requestFullFields: true }),
  };
}

const LLM_URL = /^llm:\/\/([a-z][a-z0-9_]{0,39})(\/[^?#]*)?$/;
/** A model's answer as it reaches the next turn's context. */
const LLM_ANSWER_LIMIT = 256 * 1024;

export interface LlmReplayResult {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * Sends an approved model call again, byte for byte as the vault recorded it, through
 * `/v1/vault/llm/<provider>` with `x-vlt-approval-id`: the fingerprint then matches and the
 * vault runs it once. The SDK has no call for this path, so the request is built here with the
 * SDK's access token; a 401 is answered by letting the SDK refresh (one approval read) and
 * retrying exactly once.
 */
export async function replayLlm(
  v: VaultContext,
  session: SessionRef,
  approval: ApprovalView,
  signal?: AbortSignal,
): Promise<LlmReplayResult> {
  refuseBodyPreview(approval, `repeat the model call with the header ${APPROVAL_ID_HEADER}: ${approval.id}`);
  const d = approval.requestDetails;
  const m = LLM_URL.exec(String(d.url));
  if (!m) throw new VaultPluginError('vault', `approval ${approval.id} is not a model call`);
  const [, provider, path = '/'] = m;
  let search = '';
  if (typeof d.upstreamUrl === 'string') {
    try {
      search = new URL(d.upstreamUrl).search;
    } catch {
      search = '';
    }
  }
  const target = `${v.config.baseUrl}/v1/vault/llm/${provider}${path}${search}`;
  const recorded = d.headers && typeof d.headers === 'object' ? (d.headers as Record<string, unknown>) : {};
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(recorded)) {
    if (typeof value === 'string' && !/^(authorization|x-api-key|x-goog-api-key|cookie)$/i.test(name)) {
      headers[name.toLowerCase()] = value;
    }
  }
  headers[APPROVAL_ID_HEADER] = approval.id;
  const sessionKey = sessionKeyHeader(session);
  if (sessionKey) headers[SESSION_KEY_HEADER] = sessionKey;
  const body = typeof d.body === 'string' ? d.body : d.body == null ? undefined : JSON.stringify(d.body);
  const method = String(d.method);

  const send = async (): Promise<Response> => {
    const token = await v.call(session, () => v.client.accessToken());
    return v.transport.fetch(target, {
      method,
      headers: { ...headers, authorization: `Bearer ${token}` },
      body,
      signal,
    });
  };
  let res = await send();
  if (res.status === 401) {
    await res.body?.cancel().catch(() => undefined);
    // Any SDK call with a refused token drops it and fetches a fresh one (or reports the broken enrolment).
    await v.call(session, () => v.client.getApproval(approval.id));
    res = await send();
    if (res.status === 401) {
      await res.body?.cancel().catch(() => undefined);
      throw new VaultReenrolmentError(
        'reenrolment_required',
        'the vault refused the agent twice while replaying an approved model call: this enrolment needs a ' +
          'new bootstrap secret from a workspace admin',
        { status: 401, code: 'REENROLMENT_REQUIRED' },
      );
    }
  }
  const text = await readCapped(res, LLM_ANSWER_LIMIT);
  if (res.status >= 400) {
    const preview = bodyPreview(text);
    if (res.status === 409 || res.status === 403) {
      throw new VaultApprovalError(`the vault refused the replay of approval ${approval.id}: ${preview}`, {
        status: res.status,
      });
    }
    throw new VaultPluginError(
      'vault',
      `replaying approval ${approval.id} failed with HTTP ${res.status}: ${preview}`,
      {
        status: res.status,
      },
    );
  }
  let parsed: unknown = text;
  if (/json/i.test(res.headers.get('content-type') ?? '')) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  const kept: Record<string, string> = {};
  for (const name of ['content-type', 'x-vlt-audit-id']) {
    const value = res.headers.get(name);
    if (value) kept[name] = value;
  }
  return { status: res.status, headers: kept, body: parsed };
}

async function readCapped(res: Response, max: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel().catch(() => undefined);
      break;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
