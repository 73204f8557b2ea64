/**
 * The OpenAPI document at /docs/json describes the routes added for connections, discovery,
 * agent self-service and the LLM proxy, each with the shape of its success answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../support/api-client.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';

type Operation = { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> };
type OpenApi = { openapi: string; paths: Record<string, Record<string, Operation>> };

/** Routes whose success answer must carry a JSON schema: [method, OpenAPI path, status]. */
const DOCUMENTED: [string, string, string][] = [
  ['post', '/v1/connections/start', '200'],
  ['post', '/v1/connections/{id}/reauth', '200'],
  ['post', '/v1/connections/bot-token', '201'],
  ['post', '/v1/connections/api-key', '201'],
  ['post', '/v1/workspace-oauth-apps', '201'],
  ['get', '/v1/workspace-oauth-apps', '200'],
  ['delete', '/v1/workspace-oauth-apps/{id}', '200'],
  ['get', '/v1/capabilities/services', '200'],
  ['get', '/v1/capabilities/me', '200'],
  ['post', '/v1/agent-permission-requests', '201'],
  ['get', '/v1/agent-permission-requests', '200'],
  ['post', '/v1/agent-permission-requests/{id}/approve', '200'],
  ['post', '/v1/agent-permission-requests/{id}/deny', '200'],
  ['post', '/v1/credentials/resolve', '200'],
  ['post', '/v1/vault/execute', '200'],
  ['post', '/v1/vault/permission-requests', '201'],
];

describe('OpenAPI document', () => {
  let gw: InProcessGateway;
  let doc: OpenApi;

  beforeAll(async () => {
    gw = await startInProcessGateway({}, {}, { embeddedDatabase: true });
    const r = await http<OpenApi>('GET', `${gw.baseUrl}/docs/json`);
    expect(r.status).toBe(200);
    doc = r.body;
  }, 60_000);
  afterAll(async () => {
    await gw?.close();
  });

  it('is OpenAPI 3.1', () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
  });

  it.each(DOCUMENTED)('%s %s documents its %s answer with a schema', (method, path, status) => {
    const op = doc.paths[path]?.[method];
    expect(op, `${method} ${path} is not in the document`).toBeDefined();
    const schema = op!.responses?.[status]?.content?.['application/json']?.schema;
    expect(schema, `${method} ${path} ${status} has no JSON schema`).toBeDefined();
  });

  it('lists the LLM proxy and the OAuth callback', () => {
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/connections/callback', '/v1/vault/llm/{provider}/{*}']),
    );
  });
});
