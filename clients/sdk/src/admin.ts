/**
 * The workspace user's side, for scripts: decide approvals and manage agents with a personal
 * access token (or an API JWT).
 */
import {
  AgentResponse,
  ApprovalListResponse,
  ApprovalResponse,
  ApproveResponse,
  CreateAgentResponse,
  DenyResponse,
  DisableAgentResponse,
  EnableAgentResponse,
  type ApprovalView,
} from './contracts.js';
import {
  failure,
  normaliseBaseUrl,
  parseBody,
  send,
  type FetchLike,
  type Schema,
  type SendOptions,
} from './transport.js';

type Out<S extends { parse(v: unknown): unknown }> = ReturnType<S['parse']>;
export type CreatedAgent = Out<typeof CreateAgentResponse>;
export type AgentView = Out<typeof AgentResponse>['agent'];

export interface AdminClientOptions {
  baseUrl: string;
  /** A personal access token (`vltp_…`) or an API JWT. */
  token: string;
  fetch?: FetchLike;
}

export type AdminClient = ReturnType<typeof createAdminClient>;

export function createAdminClient(o: AdminClientOptions) {
  const baseUrl = normaliseBaseUrl(o.baseUrl);
  const fetchFn = o.fetch ?? globalThis.fetch;
  // The vault takes a PAT only as X-API-Key and refuses it as a bearer token (one header per
  // kind of credential, never reinterpreted); API JWTs go in Authorization.
  const auth: Record<string, string> = o.token.startsWith('vltp_')
    ? { 'x-api-key': o.token }
    : { authorization: `Bearer ${o.token}` };

  async function json<T>(r: SendOptions, ok: number, schema: Schema<T>): Promise<T> {
    const where = `${r.method} ${r.path}`;
    const res = await send(fetchFn, baseUrl, { ...r, headers: { ...r.headers, ...auth } });
    if (res.status !== ok) throw await failure(res, where, [o.token]);
    return parseBody(res, schema, where);
  }
  const id = (v: string) => encodeURIComponent(v);

  return {
    baseUrl,
    approve: (approvalId: string) =>
      json({ method: 'POST', path: `/v1/approvals/${id(approvalId)}/approve` }, 200, ApproveResponse),
    deny: (approvalId: string) =>
      json({ method: 'POST', path: `/v1/approvals/${id(approvalId)}/deny` }, 200, DenyResponse),
    listApprovals: async (): Promise<ApprovalView[]> =>
      (await json({ method: 'GET', path: '/v1/approvals' }, 200, ApprovalListResponse)).approvals,
    getApproval: async (approvalId: string): Promise<ApprovalView> =>
      (await json({ method: 'GET', path: `/v1/approvals/${id(approvalId)}` }, 200, ApprovalResponse))
        .approval,
    /** A new agent and its one-time bootstrap secret (hand it to the agent, nowhere else). */
    createAgent: (body: { name: string; description?: string; iconUrl?: string }) =>
      json({ method: 'POST', path: '/v1/agents', json: body }, 201, CreateAgentResponse),
    getAgent: async (agentId: string): Promise<AgentView> =>
      (await json({ method: 'GET', path: `/v1/agents/${id(agentId)}` }, 200, AgentResponse)).agent,
    /** Revokes the agent's tokens; it needs a new bootstrap secret to come back. */
    disableAgent: (agentId: string) =>
      json({ method: 'POST', path: `/v1/agents/${id(agentId)}/disable` }, 200, DisableAgentResponse),
    enableAgent: (agentId: string) =>
      json({ method: 'POST', path: `/v1/agents/${id(agentId)}/enable` }, 200, EnableAgentResponse),
  };
}
