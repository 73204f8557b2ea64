/**
 * The seven agent tools of the client tooling contract, with exactly its parameters and results.
 * Parameters are zod schemas (their JSON Schema is what the host shows the model) and are
 * checked before anything is sent; every call goes to the vault through @vlt/sdk.
 */
import { AGENT_TOOL_NAMES, type AgentToolName } from '@vlt/sdk';
import { z } from 'zod';
import type { ApprovalBook } from './approvals.js';
import { VaultParamsError } from './errors.js';
import { download, execute, type VaultContext } from './execution.js';
import type { SessionRef } from './session.js';

// The contract's tool names, shared with the other agent-side clients.
export const TOOL_NAMES = AGENT_TOOL_NAMES;
export type ToolName = AgentToolName;

export interface VaultTool {
  name: ToolName;
  label: string;
  description: string;
  /** JSON Schema of the parameters. */
  parameters: Record<string, unknown>;
  /** True when the result carries content from a provider (untrusted, not instructions). */
  networkContent: boolean;
  execute(params: unknown, signal?: AbortSignal): Promise<unknown>;
}

const Method = z.enum(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']);
const StringMap = z.record(z.string(), z.string());
const ConnectionId = z.uuid().describe('The connection to use (from vault_connections_list)');
const Service = z
  .string()
  .min(1)
  .max(200)
  .describe('A singleton service addressed by name instead of connectionId, e.g. llm_a-messages');
const Url = z.string().min(1).max(8192);
const ApprovalId = z.uuid();

const needsTarget = {
  check: (p: { connectionId?: string | undefined; service?: string | undefined }) =>
    p.connectionId !== undefined || p.service !== undefined,
  message: { message: 'connectionId or service is required', path: ['connectionId'] },
};

export const VaultExecuteParams = z
  .object({
    connectionId: ConnectionId.optional(),
    service: Service.optional(),
    method: Method,
    url: Url.describe('The provider URL; it must match the policy allowlist'),
    query: StringMap.optional().describe('Query parameters'),
    headers: StringMap.optional().describe('Request headers (credentials are injected by the vault)'),
    body: z.unknown().optional().describe('JSON value or string'),
    approvalId: ApprovalId.optional().describe('The approval request id, to run an approved request'),
  })
  .strict()
  .refine(needsTarget.check, needsTarget.message);

export const RequestPermissionParams = z
  .object({
    connectionId: ConnectionId,
    actionDescription: z
      .string()
      .trim()
      .min(1)
      .max(1000)
      .describe('What the action does and why, in words a human reviewer understands'),
    method: Method,
    url: Url,
    body: z.unknown().optional(),
  })
  .strict();

export const RequestCapabilityParams = z
  .object({
    actionTemplateId: z
      .string()
      .min(1)
      .max(200)
      .describe('An action template id the agent does not have yet'),
    reason: z.string().trim().min(1).max(1000).describe('Why the agent needs it'),
  })
  .strict();

export const AwaitApprovalParams = z
  .object({
    approvalRequestId: ApprovalId,
    timeoutMs: z
      .number()
      .int()
      .min(1)
      .max(3_600_000)
      .optional()
      .describe('How long to wait (default 300000)'),
  })
  .strict();

export const ConnectionsListParams = z.object({}).strict();

export const ConnectionRevokeParams = z.object({ connectionId: ConnectionId }).strict();

export const VaultDownloadParams = z
  .object({
    connectionId: ConnectionId.optional(),
    service: Service.optional(),
    url: Url.describe('The provider URL of the file; it must match the policy allowlist'),
    headers: StringMap.optional(),
    filename: z.string().min(1).max(255).optional().describe('File name to save as (sanitised)'),
    approvalId: ApprovalId.optional(),
  })
  .strict()
  .refine(needsTarget.check, needsTarget.message);

function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { io: 'input', target: 'draft-7' });
  delete out.$schema;
  return out;
}

/** Validates tool parameters; the error lists fields and rules, never the values given. */
export function parseParams<S extends z.ZodType>(tool: ToolName, schema: S, raw: unknown): z.output<S> {
  const r = schema.safeParse(raw ?? {});
  if (r.success) return r.data;
  const problems = r.error.issues.map((i) => {
    const path = i.path.map(String).join('.') || '(parameters)';
    return i.code === 'unrecognized_keys'
      ? `${path}: unknown parameter(s) ${i.keys.join(', ')}`
      : `${path}: ${i.message}`;
  });
  throw new VaultParamsError(`invalid ${tool} parameters: ${problems.join('; ')}`);
}

export interface ToolDeps {
  vault: VaultContext;
  approvals: ApprovalBook;
}

export function createTools(d: ToolDeps, session: SessionRef): VaultTool[] {
  const { vault: v, approvals } = d;
  const providers = v.config.connectedProviders;
  const connected = providers.length > 0 ? ` Connected providers: ${providers.join(', ')}.` : '';

  const tool = <S extends z.ZodType>(
    name: ToolName,
    label: string,
    description: string,
    schema: S,
    networkContent: boolean,
    run: (p: z.output<S>, signal?: AbortSignal) => Promise<unknown>,
  ): VaultTool => ({
    name,
    label,
    description,
    parameters: jsonSchema(schema),
    networkContent,
    // Async, so a refusal is a rejected promise like every other failure.
    execute: async (raw, signal) => run(parseParams(name, schema, raw), signal),
  });

  return [
    tool(
      'vault_execute',
      'Vault: call a provider',
      'Call a connected provider API through the credential vault; the vault injects the credential and ' +
        'enforces its policy. Returns {status, headers, body, auditId}, or {approvalRequired, ' +
        'approvalRequestId, auditId} when a human must approve first: you are notified of the decision, ' +
        'then call again with the same parameters plus approvalId (or use vault_await_approval).' +
        connected,
      VaultExecuteParams,
      true,
      async (p, signal) => {
        const request = { ...p, context: { tool: 'vault_execute' } };
        const out = await execute(v, session, request, signal);
        if ('approvalRequired' in out) {
          const { approvalId: _approvalId, ...paused } = request;
          approvals.filed(out.approvalRequestId, { tool: 'vault_execute', request: paused, session });
        } else if (p.approvalId) approvals.redeemed(p.approvalId);
        return out;
      },
    ),
    tool(
      'request_permission',
      'Vault: ask a human to approve a request',
      'Ask a human to approve a request before running it, with a description for the reviewer. The ' +
        'vault checks it against the policy and files it for approval even where the policy would allow ' +
        'it; nothing is sent yet. Returns {approvalRequestId, auditId}; then use vault_await_approval ' +
        '(which runs it once approved).',
      RequestPermissionParams,
      true,
      async (p, signal) => {
        const request = {
          connectionId: p.connectionId,
          method: p.method,
          url: p.url,
          ...(p.body !== undefined && { body: p.body }),
        };
        const out = await v.call(session, () =>
          v.client.requestPermissionToAct({ ...request, actionDescription: p.actionDescription }, { signal }),
        );
        approvals.filed(out.approvalRequestId, { tool: 'vault_execute', request, session });
        return { approvalRequestId: out.approvalRequestId, auditId: out.auditId };
      },
    ),
    tool(
      'request_capability',
      'Vault: ask for a new capability',
      'Ask a workspace admin to give this agent an action it does not have yet (an action template id ' +
        'from the vault catalog), with the reason. Returns {success, requestId, actionTemplateId, message}. ' +
        'An admin must still connect the service; nothing is granted automatically.',
      RequestCapabilityParams,
      false,
      async (p, signal) => {
        const r = await v.call(session, () =>
          v.client.requestCapability({ actionTemplateId: p.actionTemplateId, reason: p.reason }, { signal }),
        );
        return {
          success: r.success,
          requestId: r.requestId,
          actionTemplateId: r.actionTemplateId,
          message: r.message,
        };
      },
    ),
    tool(
      'vault_await_approval',
      'Vault: wait for an approval',
      'Wait for a human decision on an approval request. When approved, the request runs (once) and its ' +
        'result is returned; fails when it is denied, expired, or still undecided after timeoutMs.',
      AwaitApprovalParams,
      true,
      (p, signal) =>
        approvals.await(p.approvalRequestId, p.timeoutMs ?? v.config.pollTimeoutMs, session, signal),
    ),
    tool(
      'vault_connections_list',
      'Vault: list connections',
      'List the provider connections this agent may use: {connections: [{id, provider, label, status, ' +
        'grantedScopes, createdAt}]}.',
      ConnectionsListParams,
      false,
      async (_p, signal) => {
        const list = await v.call(session, () => v.client.listConnections({ signal }));
        return {
          connections: list.map((c) => ({
            id: c.id,
            provider: c.provider,
            label: c.label,
            status: c.status,
            grantedScopes: c.grantedScopes,
            createdAt: c.createdAt,
          })),
        };
      },
    ),
    tool(
      'vault_connection_revoke',
      'Vault: revoke a connection',
      'Revoke a provider connection for good: its stored credentials are destroyed and no agent can use ' +
        'it again. This cannot be undone; only do it when the user explicitly asks. Returns {revoked: true, ' +
        'connectionId, auditId}.',
      ConnectionRevokeParams,
      false,
      async (p, signal) => {
        const r = await v.call(session, () => v.client.revokeConnection(p.connectionId, { signal }));
        return { revoked: true, connectionId: r.connection.id, auditId: r.auditId };
      },
    ),
    tool(
      'vault_download',
      'Vault: download a file',
      "Download a file from a connected provider through the vault into the agent's download directory. " +
        'Returns {success, path, filename, auditId}, or {approvalRequired, approvalRequestId, auditId} when ' +
        'a human must approve first (then call again with approvalId).',
      VaultDownloadParams,
      false,
      async (p, signal) => {
        const { filename, ...target } = p;
        const request = { ...target, method: 'GET' as const, context: { tool: 'vault_download' } };
        const out = await download(v, session, request, filename, signal);
        if ('approvalRequired' in out) {
          const { approvalId: _approvalId, ...paused } = request;
          approvals.filed(out.approvalRequestId, {
            tool: 'vault_download',
            request: paused,
            filename,
            session,
          });
        } else if (p.approvalId) approvals.redeemed(p.approvalId);
        return out;
      },
    ),
  ];
}
