/**
 * The agent plugin's seven tools as MCP tools, over an injected @vlt/sdk agent client. Each is a
 * thin call of the vault's public API: the vault decides (policy, allowlist, rate limits,
 * approvals), this layer only shapes arguments and answers for a model.
 *
 * Outcomes: a result the vault returned (including a provider's 4xx/5xx, which is data) and a
 * 202 approval-required are normal results; a refusal by the vault (403, 429, a broken
 * enrolment, an approval denied or expired) is a tool error (`isError`) carrying the vault's
 * own message. Nothing here logs arguments, and no credential is ever part of a result.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ShapeOutput, ZodRawShapeCompat } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import {
  AGENT_TOOL_NAMES,
  VaultApprovalError,
  VaultAuthError,
  VaultError,
  VaultPolicyDeniedError,
  VaultRateLimitedError,
  type AgentClient,
  type AgentToolName,
  type ApprovalView,
  type ExecuteRequest,
  type ExecuteResult,
} from '@vlt/sdk';
import { z } from 'zod';
import {
  filenameFromDisposition,
  filenameFromUrl,
  prepareDownloadDir,
  saveDownload,
  type SavedFile,
} from './download.js';
import { DownloadError, scrubText } from './errors.js';
import type { Logger } from './log.js';
import type { PendingCall, PendingCalls } from './pending.js';

/** What the tools need of @vlt/sdk's agent client (a narrower type keeps fakes honest). */
export type VaultAgentClient = Pick<
  AgentClient,
  | 'execute'
  | 'waitForApproval'
  | 'listConnections'
  | 'revokeConnection'
  | 'requestCapability'
  | 'requestPermissionToAct'
>;

export interface VaultToolContext {
  client: VaultAgentClient;
  /** Requests paused for approval, shared by every session of the process. */
  pending: PendingCalls;
  /** Absolute directory `vault_download` writes into. */
  downloadDir: string;
  approvalPollMs: number;
  log: Logger;
}

// The contract's tool names, shared with the other agent-side clients.
export const TOOL_NAMES = AGENT_TOOL_NAMES;
export type ToolName = AgentToolName;

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const DEFAULT_AWAIT_TIMEOUT_MS = 300_000;
/** Longest single wait: a client wanting longer calls again. */
const MAX_AWAIT_TIMEOUT_MS = 3_600_000;

// ----------------------------------------------------------------------------------------------
// Input shapes (zod v4; the SDK turns them into the tools' JSON Schemas)

const HttpMethod = z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
const ConnectionId = z.uuid().describe('The connection to call through (from vault_connections_list).');
const Service = z
  .string()
  .min(1)
  .max(200)
  .describe('A singleton service by name, instead of connectionId (one of the two is required).');
const Url = z.string().min(1).max(8192);
const StringMap = z.record(z.string().max(1000), z.string().max(16_384));

const executeShape = {
  connectionId: ConnectionId.optional(),
  service: Service.optional(),
  method: HttpMethod.describe('HTTP method.'),
  url: Url.describe("The provider's full URL; the vault injects the stored credential."),
  query: StringMap.optional().describe('Query parameters, merged into the URL.'),
  headers: StringMap.optional().describe('Request headers (credential headers are set by the vault).'),
  body: z.unknown().optional().describe('Request body: JSON, or a string sent as it is.'),
  approvalId: z
    .uuid()
    .optional()
    .describe('An approved approvalRequestId, to run exactly the request it was granted for.'),
};

const requestPermissionShape = {
  connectionId: z.uuid(),
  actionDescription: z.string().trim().min(1).max(500),
  method: HttpMethod,
  url: Url,
  body: z.unknown().optional(),
};

const requestCapabilityShape = {
  actionTemplateId: z
    .string()
    .min(1)
    .max(200)
    .describe("An action template id (as listed in the vault's capabilities, e.g. issues.read)."),
  reason: z.string().trim().min(1).max(1000).describe('Why the agent needs it, for the person deciding.'),
};

const awaitShape = {
  approvalRequestId: z
    .uuid()
    .describe('The approvalRequestId that vault_execute or vault_download returned.'),
  timeoutMs: z
    .number()
    .int()
    .min(0)
    .max(MAX_AWAIT_TIMEOUT_MS)
    .default(DEFAULT_AWAIT_TIMEOUT_MS)
    .describe('How long to wait for the decision, in milliseconds (default 300000).'),
};

const revokeShape = { connectionId: z.uuid().describe('The connection to revoke.') };

const downloadShape = {
  connectionId: ConnectionId.optional(),
  service: Service.optional(),
  url: Url.describe("The provider's URL of the file (fetched with GET)."),
  headers: StringMap.optional(),
  filename: z
    .string()
    .min(1)
    .max(255)
    .optional()
    .describe('File name to save under (reduced to a plain name inside the download directory).'),
  approvalId: z.uuid().optional().describe('An approved approvalRequestId for this download.'),
};

/** What the vault kept of a paused request (`requestDetails`), to replay it after approval. */
const ApprovedRequest = z.object({
  method: HttpMethod,
  url: z.string().min(1),
  upstreamUrl: z.string().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  body: z.unknown().optional(),
  requestFullFields: z.boolean().optional(),
});

// ----------------------------------------------------------------------------------------------
// Results

/** A JSON value with every vault credential cut (the pattern never spans JSON syntax). */
function scrubbed<T>(value: T): T {
  return JSON.parse(scrubText(JSON.stringify(value))) as T;
}

function ok(value: Record<string, unknown>, lead?: string): CallToolResult {
  const safe = scrubbed(value);
  const json = JSON.stringify(safe, null, 2);
  return {
    content: [{ type: 'text', text: scrubText(lead ? `${lead}\n\n${json}` : json) }],
    structuredContent: safe,
  };
}

function fail(message: string, details: Record<string, unknown> = {}): CallToolResult {
  const text = scrubText(message);
  return {
    isError: true,
    content: [{ type: 'text', text }],
    structuredContent: { error: { message: text, ...scrubbed(details) } },
  };
}

function executionResult(r: Extract<ExecuteResult, { kind: 'result' }>): CallToolResult {
  return ok({ status: r.status, headers: r.headers, body: r.body, auditId: r.auditId });
}

function approvalRequired(
  r: Extract<ExecuteResult, { kind: 'approval_required' }>,
  what: 'request' | 'download',
): CallToolResult {
  return ok(
    {
      approvalRequired: true,
      approvalRequestId: r.approvalRequestId,
      auditId: r.auditId,
      expiresAt: r.expiresAt,
    },
    `Approval required: the vault's policy needs a person to approve this ${what} before it runs; ` +
      'nothing was sent to the provider yet. Call vault_await_approval with approvalRequestId ' +
      `"${r.approvalRequestId}" to wait for the decision: once approved it runs the ${what} and ` +
      `returns its result. The request expires unapproved at ${r.expiresAt}.`,
  );
}

/** The vault's refusal, or any other failure, as a tool error; never a credential or a stack. */
export function toolError(err: unknown): CallToolResult {
  if (err instanceof VaultError) {
    const details = {
      status: err.status,
      code: err.code,
      auditId: err.auditId,
      ...(err.retryAfter !== undefined && { retryAfter: err.retryAfter }),
    };
    const ref = [err.code && `code ${err.code}`, err.auditId && `audit ${err.auditId}`]
      .filter(Boolean)
      .join(', ');
    const tail = ref ? ` (${ref})` : '';
    if (err instanceof VaultAuthError) {
      return fail(
        `The agent's enrolment is broken: a new bootstrap secret is needed from a workspace admin, ` +
          `and this server's key must be replaced by the newly enrolled one. The vault said: ${err.message}`,
        details,
      );
    }
    if (err instanceof VaultRateLimitedError) {
      const wait = err.retryAfter !== undefined ? ` Retry after ${err.retryAfter} s.` : '';
      return fail(`Blocked by the vault: ${err.message}${tail}.${wait}`, details);
    }
    if (err instanceof VaultPolicyDeniedError) {
      return fail(
        `Denied by the vault's policy: ${err.message}${tail}. Do not retry the same request.`,
        details,
      );
    }
    if (err instanceof VaultApprovalError) return fail(`${err.message}${tail}`, details);
    return fail(`The vault refused the call (HTTP ${err.status}): ${err.message}${tail}`, details);
  }
  if (err instanceof DownloadError) return fail(`The download was not saved: ${err.message}`);
  if (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError')) {
    return fail('The call was cancelled before the vault answered.');
  }
  const cause = err instanceof Error ? (err.cause as { code?: unknown } | undefined) : undefined;
  if (err instanceof TypeError && typeof cause?.code === 'string') {
    return fail(`Cannot reach the vault (${cause.code}); try again later.`);
  }
  return fail('vlt-mcp failed unexpectedly; the details are in its log.');
}

// ----------------------------------------------------------------------------------------------
// Tools

type Handler<S extends ZodRawShapeCompat> = (args: ShapeOutput<S>, extra: Extra) => Promise<CallToolResult>;

/** Logs each call's tool, outcome, status, code, audit id and duration; turns throws into tool errors. */
function guarded<S extends ZodRawShapeCompat>(
  ctx: VaultToolContext,
  tool: ToolName,
  fn: Handler<S>,
): Handler<S> {
  return async (args, extra) => {
    const started = Date.now();
    let result: CallToolResult;
    let thrown: unknown;
    try {
      result = await fn(args, extra);
    } catch (err) {
      thrown = err;
      result = toolError(err);
    }
    const fields = {
      tool,
      outcome: result.isError ? 'error' : 'ok',
      ms: Date.now() - started,
      ...(thrown instanceof VaultError && {
        status: thrown.status,
        code: thrown.code,
        auditId: thrown.auditId,
      }),
    };
    if (thrown !== undefined && !(thrown instanceof VaultError) && !(thrown instanceof DownloadError)) {
      // Unexpected: the name and message for the operator (scrubbed by the logger), not the stack.
      ctx.log.error('tool call failed', {
        ...fields,
        error: thrown instanceof Error ? `${thrown.name}: ${thrown.message}` : 'non-error thrown',
      });
    } else {
      ctx.log.info('tool call', fields);
    }
    return result;
  };
}

const needsTarget = (a: { connectionId?: string | undefined; service?: string | undefined }) =>
  a.connectionId || a.service
    ? undefined
    : fail('Either connectionId or service is required (see vault_connections_list).');

async function runExecute(
  ctx: VaultToolContext,
  request: ExecuteRequest,
  extra: Extra,
): Promise<CallToolResult> {
  // Always buffered: a model gets the whole answer in one result.
  const { stream: _stream, download: _download, ...buffered } = request;
  const r = await ctx.client.execute(buffered, { signal: extra.signal });
  if (r.kind === 'approval_required') {
    const { approvalId: _presented, ...paused } = request;
    ctx.pending.remember(r.approvalRequestId, { kind: 'execute', request: paused });
    return approvalRequired(r, 'request');
  }
  if (request.approvalId) ctx.pending.forget(request.approvalId);
  return executionResult(r);
}

async function runDownload(
  ctx: VaultToolContext,
  request: ExecuteRequest,
  filename: string | undefined,
  extra: Extra,
): Promise<CallToolResult> {
  // Before the vault is asked: a directory problem must not waste a call or an approval.
  const root = await prepareDownloadDir(ctx.downloadDir);
  const r = await ctx.client.execute({ ...request, download: true }, { signal: extra.signal });
  if (r.kind === 'approval_required') {
    const { approvalId: _presented, ...paused } = request;
    ctx.pending.remember(r.approvalRequestId, { kind: 'download', request: paused, filename });
    return approvalRequired(r, 'download');
  }
  if (request.approvalId) ctx.pending.forget(request.approvalId);
  const name = (headers: Record<string, string>) =>
    filename ??
    filenameFromDisposition(headers['content-disposition']) ??
    filenameFromUrl(request.url) ??
    'download';
  let saved: SavedFile;
  let auditId: string | null;
  if (r.kind === 'stream') {
    try {
      saved = await saveDownload(root, name(r.headers), r.body);
    } catch (err) {
      await r.body.cancel().catch(() => undefined);
      throw err;
    }
    // The call's execution_requested event, named in the stream's head (x-vlt-audit-id).
    auditId = r.auditId;
  } else if (r.status < 200 || r.status >= 300) {
    return fail(`The provider answered HTTP ${r.status}; nothing was saved.`, {
      status: r.status,
      body: r.body,
      auditId: r.auditId,
    });
  } else {
    // A 2xx the vault answered buffered: the body as it came (text, JSON, or the vault's base64).
    const bytes = Buffer.from(typeof r.body === 'string' ? r.body : JSON.stringify(r.body));
    saved = await saveDownload(root, name(r.headers), bytes);
    auditId = r.auditId;
  }
  return ok(
    {
      success: true,
      path: saved.path,
      filename: saved.filename,
      bytes: saved.bytes,
      contentType: r.headers['content-type'] ?? null,
      auditId,
    },
    `Saved ${saved.bytes} bytes to ${saved.path}.`,
  );
}

/** The request to run once approved: ours if this process filed it, else the vault's record. */
function approvedCall(ctx: VaultToolContext, approval: ApprovalView): PendingCall | 'llm' | undefined {
  const mine = ctx.pending.get(approval.id);
  if (mine) return mine;
  const parsed = ApprovedRequest.safeParse(approval.requestDetails);
  if (!parsed.success) return undefined;
  const d = parsed.data;
  // LLM proxy calls are replayed by the SDK that made them (header x-vlt-approval-id), not here.
  if (d.upstreamUrl !== undefined || d.url.startsWith('llm://')) return 'llm';
  // A body over 256 KiB is kept as a preview only: the agent sends the request again itself.
  if (approval.requestDetails.bodyPreview !== undefined) return undefined;
  return {
    kind: 'execute',
    request: {
      connectionId: approval.connectionId,
      method: d.method,
      url: d.url,
      ...(d.headers && Object.keys(d.headers).length > 0 && { headers: d.headers }),
      // The vault records "no body" as null.
      ...(d.body !== undefined && d.body !== null && { body: d.body }),
      ...(d.requestFullFields && { requestFullFields: true }),
    },
  };
}

/** Progress notifications while waiting, so clients that reset their timeout on progress keep waiting. */
function keepAlive(extra: Extra, everyMs: number): () => void {
  const progressToken = extra._meta?.progressToken;
  if (progressToken === undefined) return () => undefined;
  let progress = 0;
  const timer = setInterval(() => {
    progress += 1;
    extra
      .sendNotification({
        method: 'notifications/progress',
        params: { progressToken, progress, message: 'waiting for a person to decide on the approval' },
      })
      .catch(() => undefined);
  }, everyMs);
  return () => clearInterval(timer);
}

async function awaitApproval(
  ctx: VaultToolContext,
  args: ShapeOutput<typeof awaitShape>,
  extra: Extra,
): Promise<CallToolResult> {
  const id = args.approvalRequestId;
  const stop = keepAlive(extra, Math.min(Math.max(ctx.approvalPollMs, 1000), 15_000));
  let approval: ApprovalView;
  try {
    approval = await ctx.client.waitForApproval(id, {
      pollMs: ctx.approvalPollMs,
      timeoutMs: args.timeoutMs,
      signal: extra.signal,
    });
  } catch (err) {
    if (err instanceof VaultApprovalError && err.code === 'APPROVAL_WAIT_TIMEOUT') {
      return fail(
        `Approval ${id} is still pending after ${args.timeoutMs} ms: nobody has decided yet. ` +
          'Call vault_await_approval again to keep waiting.',
        { code: err.code, approvalRequestId: id },
      );
    }
    throw err;
  } finally {
    stop();
  }

  const decided = { code: `APPROVAL_${approval.status.toUpperCase()}`, approvalRequestId: id };
  switch (approval.status) {
    case 'denied':
      ctx.pending.forget(id);
      return fail(
        `Approval ${id} was denied by a reviewer: the request did not run. Do not retry it.`,
        decided,
      );
    case 'expired':
      ctx.pending.forget(id);
      return fail(
        `Approval ${id} expired before anyone decided: the request did not run. ` +
          'Call vault_execute again to file a new approval request if it is still needed.',
        decided,
      );
    case 'consumed':
      ctx.pending.forget(id);
      return fail(
        `Approval ${id} was already used: the approved request has run once and cannot run again with it.`,
        decided,
      );
    case 'pending':
    case 'approved':
      break;
  }

  const call = approvedCall(ctx, approval);
  if (call === 'llm') {
    return ok(
      { approved: true, approvalRequestId: id },
      'Approved. This was a language-model call: repeat it through the vault with the header ' +
        `x-vlt-approval-id: ${id} to run it.`,
    );
  }
  if (call === undefined) {
    return fail(
      `Approval ${id} is approved, but the vault's record of the request cannot be replayed here: ` +
        'call vault_execute again with exactly the same request and approvalId set to this id.',
      { code: 'APPROVAL_APPROVED', approvalRequestId: id },
    );
  }
  const request = { ...call.request, approvalId: id };
  return call.kind === 'download'
    ? runDownload(ctx, request, call.filename, extra)
    : runExecute(ctx, request, extra);
}

export function registerVaultTools(server: McpServer, ctx: VaultToolContext): void {
  server.registerTool(
    'vault_execute',
    {
      title: 'Call a provider API through the vault',
      description:
        "Sends an HTTP request to a connected service's API through the vault, which adds the stored " +
        "credential and enforces the agent's policy. Returns {status, headers, body, auditId}: the " +
        "provider's answer, also when it is an HTTP error. If the policy needs a person's approval, " +
        'returns {approvalRequired: true, approvalRequestId}: then call vault_await_approval. ' +
        'Give connectionId (see vault_connections_list) or, for a singleton service, service.',
      inputSchema: executeShape,
      annotations: { destructiveHint: true, openWorldHint: true },
    },
    guarded(ctx, 'vault_execute', async (a, extra) => {
      const missing = needsTarget(a);
      if (missing) return missing;
      return runExecute(
        ctx,
        {
          connectionId: a.connectionId,
          service: a.service,
          method: a.method,
          url: a.url,
          query: a.query,
          headers: a.headers,
          body: a.body,
          approvalId: a.approvalId,
        },
        extra,
      );
    }),
  );

  server.registerTool(
    'request_permission',
    {
      title: 'Ask a person to approve a request before it runs',
      description:
        'Files the request with the vault for a human decision, with a description for the reviewer. ' +
        'The vault checks it against the policy (a request it forbids is refused) and files it for ' +
        'approval even where the policy would allow it; nothing is sent yet. Returns ' +
        '{approvalRequestId, auditId}; call vault_await_approval with it, which runs the request once ' +
        'approved.',
      inputSchema: requestPermissionShape,
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    guarded(ctx, 'request_permission', async (a, extra) => {
      const request = {
        connectionId: a.connectionId,
        method: a.method,
        url: a.url,
        ...(a.body !== undefined && { body: a.body }),
      };
      const r = await ctx.client.requestPermissionToAct(
        { ...request, actionDescription: a.actionDescription },
        { signal: extra.signal },
      );
      ctx.pending.remember(r.approvalRequestId, { kind: 'execute', request });
      return ok({ approvalRequestId: r.approvalRequestId, auditId: r.auditId });
    }),
  );

  server.registerTool(
    'request_capability',
    {
      title: 'Ask a person for a new capability',
      description:
        'Files a request for an action the agent cannot do yet (an action template id such as ' +
        'issues.write), with the reason, for a workspace admin to decide. Returns ' +
        '{success, requestId, actionTemplateId, message}. An approval records the decision; an admin ' +
        'still sets up the connection and policy.',
      inputSchema: requestCapabilityShape,
      annotations: {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false,
      },
    },
    guarded(ctx, 'request_capability', async (a, extra) => {
      const r = await ctx.client.requestCapability(
        { actionTemplateId: a.actionTemplateId, reason: a.reason },
        { signal: extra.signal },
      );
      return ok({
        success: r.success,
        requestId: r.requestId,
        actionTemplateId: r.actionTemplateId,
        message: r.message,
        auditId: r.auditId,
      });
    }),
  );

  server.registerTool(
    'vault_await_approval',
    {
      title: 'Wait for an approval and run the approved request',
      description:
        'Waits until a person approves or denies an approval request, then, when approved, runs the ' +
        'request exactly once and returns its result (as vault_execute or vault_download would). ' +
        'Fails when the approval is denied, expires, was already used, or is still pending at timeoutMs.',
      inputSchema: awaitShape,
      annotations: { destructiveHint: true, openWorldHint: true },
    },
    guarded(ctx, 'vault_await_approval', (a, extra) => awaitApproval(ctx, a, extra)),
  );

  server.registerTool(
    'vault_connections_list',
    {
      title: "List the agent's connections",
      description:
        'Lists the connections a policy lets this agent use: {connections: [{id, provider, service, ' +
        'label, status, grantedScopes, createdAt}]}. Use an id as connectionId.',
      inputSchema: {},
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    guarded(ctx, 'vault_connections_list', async (_a, extra) => {
      const list = await ctx.client.listConnections({ signal: extra.signal });
      return ok({
        connections: list.map((c) => ({
          id: c.id,
          provider: c.provider,
          service: c.service,
          label: c.label,
          status: c.status,
          grantedScopes: c.grantedScopes,
          createdAt: c.createdAt,
        })),
      });
    }),
  );

  server.registerTool(
    'vault_connection_revoke',
    {
      title: 'Revoke a connection (irreversible)',
      description:
        'Revokes a connection this agent is bound to, for every agent of the workspace: the stored ' +
        'credential stops working and only a person can connect the service again. Irreversible. ' +
        'Returns {revoked: true, connectionId, auditId}.',
      inputSchema: revokeShape,
      annotations: { destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    guarded(ctx, 'vault_connection_revoke', async (a, extra) => {
      const r = await ctx.client.revokeConnection(a.connectionId, { signal: extra.signal });
      return ok({
        revoked: true,
        connectionId: r.connection.id,
        status: r.connection.status,
        auditId: r.auditId,
      });
    }),
  );

  server.registerTool(
    'vault_download',
    {
      title: 'Download a file through the vault',
      description:
        "GETs a file from a connected service through the vault and saves it in this server's download " +
        'directory. Returns {success, path, filename, bytes, contentType, auditId}. If the policy needs ' +
        'approval, returns {approvalRequired: true, approvalRequestId}: then call vault_await_approval.',
      inputSchema: downloadShape,
      annotations: { destructiveHint: false, openWorldHint: true },
    },
    guarded(ctx, 'vault_download', async (a, extra) => {
      const missing = needsTarget(a);
      if (missing) return missing;
      return runDownload(
        ctx,
        {
          connectionId: a.connectionId,
          service: a.service,
          method: 'GET',
          url: a.url,
          headers: a.headers,
          approvalId: a.approvalId,
        },
        a.filename,
        extra,
      );
    }),
  );
}
