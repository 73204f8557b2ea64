/**
 * The workspace user's side, for scripts: decide approvals and manage agents with a personal
 * access token (or an API JWT).
 */
import type { AgentResponse, CreateAgentResponse } from './contracts.js';
import { type ApprovalView } from './contracts.js';
import { endpoints, pathOf, type Endpoint } from './endpoints.js';
import { failure, normaliseBaseUrl, parseBody, send, type FetchLike } from './transport.js';

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

  async function json<T>(e: Endpoint<T>, params: Record<string, string> = {}, body?: unknown): Promise<T> {
    const path = pathOf(e, params);
    const where = `${e.method} ${path}`;
    const res = await send(fetchFn, baseUrl, { method: e.method, path, json: body, headers: auth });
    if (res.status !== e.ok) throw await failure(res, where, [o.token]);
    return parseBody(res, e.response, where);
  }

  return {
    baseUrl,
    approve: (approvalId: string) => json(endpoints.approve, { id: approvalId }),
    deny: (approvalId: string) => json(endpoints.deny, { id: approvalId }),
    listApprovals: async (): Promise<ApprovalView[]> => (await json(endpoints.listApprovals)).approvals,
    getApproval: async (approvalId: string): Promise<ApprovalView> =>
      (await json(endpoints.getApproval, { id: approvalId })).approval,
    /** A new agent and its one-time bootstrap secret (hand it to the agent, nowhere else). */
    createAgent: (body: { name: string; description?: string; iconUrl?: string }) =>
      json(endpoints.createAgent, {}, body),
    getAgent: async (agentId: string): Promise<AgentView> =>
      (await json(endpoints.getAgent, { id: agentId })).agent,
    /** Revokes the agent's tokens; it needs a new bootstrap secret to come back. */
    disableAgent: (agentId: string) => json(endpoints.disableAgent, { id: agentId }),
    enableAgent: (agentId: string) => json(endpoints.enableAgent, { id: agentId }),
  };
}
