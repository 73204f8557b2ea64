/**
 * The SDK against the server's OpenAPI document (/docs/json): every route in the SDK's endpoint
 * table exists with its method and success status; every answer the server documents is one
 * the SDK's schema accepts (each field it requires is always sent, with a compatible type,
 * nullability and enum); every body the SDK sends is one the server documents as accepted.
 * The checker is itself tested on a drifted copy of the document, so this test can fail.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { endpoints, type Endpoint } from '@vlt/sdk';
import { http } from '../support/api-client.js';
import { startInProcessGateway, type InProcessGateway } from '../support/in-process-gateway.js';

type Json = Record<string, unknown>;
type Operation = {
  requestBody?: { content?: Record<string, { schema?: Json }> };
  responses?: Record<string, { content?: Record<string, { schema?: Json }> }>;
};
type OpenApi = {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Json> };
};

/**
 * Whether every value `narrow` admits is admitted by `wide`, as far as the SDK cares: types,
 * nullability, required properties, enums and constants, formats, recursively. Bounds and
 * patterns are left to the runtime checks on both sides. Returns the paths where it is not.
 */
function incompatibilities(wide: Json, narrow: Json, defs: (s: Json) => Json, at = '$', depth = 0): string[] {
  wide = defs(wide);
  narrow = defs(narrow);
  if (depth > 32) return [];
  if (Object.keys(wide).length === 0) return [];
  // The server's unions are answers to different kinds of request (the execute route documents
  // Model A and Model B answers as one union, and the SDK asks for one model at a time): one
  // branch that fits is the SDK's. A union on the SDK's side: some branch must take the value.
  const narrowUnion = (narrow.anyOf ?? narrow.oneOf) as Json[] | undefined;
  if (narrowUnion) {
    const branches = narrowUnion.map((b) => incompatibilities(wide, b, defs, at, depth + 1));
    return branches.some((b) => b.length === 0) ? [] : branches.flat();
  }
  const wideUnion = (wide.anyOf ?? wide.oneOf) as Json[] | undefined;
  if (wideUnion) {
    const branches = wideUnion.map((b) => incompatibilities(b, narrow, defs, at, depth + 1));
    return branches.some((b) => b.length === 0) ? [] : [`${at}: fits no branch of the union`];
  }
  const out: string[] = [];
  const types = (s: Json): string[] | undefined =>
    s.type === undefined ? undefined : Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
  const wt = types(wide);
  const nt = types(narrow);
  if (wt) {
    if (!nt) out.push(`${at}: may be any type, expected ${wt.join('|')}`);
    else
      for (const t of nt) {
        if (!wt.includes(t) && !(t === 'integer' && wt.includes('number'))) {
          out.push(`${at}: may be ${t}, expected ${wt.join('|')}`);
        }
      }
  }
  for (const key of ['enum', 'const'] as const) {
    if (wide[key] === undefined) continue;
    const allowed = key === 'enum' ? (wide.enum as unknown[]) : [wide.const];
    const sent = narrow.enum ?? (narrow.const !== undefined ? [narrow.const] : undefined);
    if (!Array.isArray(sent)) out.push(`${at}: any value, expected one of ${JSON.stringify(allowed)}`);
    else for (const v of sent) if (!allowed.includes(v)) out.push(`${at}: may be ${JSON.stringify(v)}`);
  }
  if (typeof wide.format === 'string' && narrow.format !== wide.format) {
    out.push(`${at}: format ${String(narrow.format)}, expected ${wide.format}`);
  }
  const wp = (wide.properties ?? {}) as Record<string, Json>;
  const np = (narrow.properties ?? {}) as Record<string, Json>;
  const narrowRequired = new Set((narrow.required ?? []) as string[]);
  for (const name of (wide.required ?? []) as string[]) {
    if (!narrowRequired.has(name)) out.push(`${at}.${name}: required, but not always present`);
  }
  for (const [name, w] of Object.entries(wp)) {
    const n = np[name];
    if (n) out.push(...incompatibilities(w, n, defs, `${at}.${name}`, depth + 1));
  }
  if (wide.items && narrow.items) {
    out.push(...incompatibilities(wide.items as Json, narrow.items as Json, defs, `${at}[]`, depth + 1));
  }
  const wa = wide.additionalProperties;
  const na = narrow.additionalProperties;
  if (wa && typeof wa === 'object' && na && typeof na === 'object') {
    out.push(...incompatibilities(wa as Json, na as Json, defs, `${at}{}`, depth + 1));
  }
  return out;
}

/** Resolves `$ref`s within one document (the server's components or zod's `$defs`). */
function resolver(root: Json): (s: Json) => Json {
  return (s) => {
    let cur = s;
    for (let hops = 0; typeof cur.$ref === 'string' && hops < 16; hops++) {
      const parts = (cur.$ref as string).replace(/^#\//, '').split('/');
      cur = parts.reduce<Json>((o, p) => (o?.[p] ?? {}) as Json, root);
    }
    return cur;
  };
}

function jsonSchemaOf(schema: unknown, io: 'input' | 'output'): Json {
  return z.toJSONSchema(schema as z.ZodType, { io, unrepresentable: 'any' }) as Json;
}

/** Every way `e` has drifted from `doc`. */
function drift(doc: OpenApi, e: Endpoint): string[] {
  const op = doc.paths[e.path]?.[e.method.toLowerCase()];
  if (!op) return [`${e.method} ${e.path} is not in the OpenAPI document`];
  const out: string[] = [];
  const serverDefs = resolver(doc as unknown as Json);
  const answer = op.responses?.[String(e.ok)]?.content?.['application/json']?.schema;
  if (!answer) out.push(`${e.method} ${e.path} documents no JSON answer for ${e.ok}`);
  else {
    // What the SDK accepts (input of its parse) must admit everything the server may send.
    const sdk = jsonSchemaOf(e.response, 'input');
    const both = (s: Json) =>
      s.$ref && String(s.$ref).startsWith('#/$defs') ? resolver(sdk)(s) : serverDefs(s);
    out.push(...incompatibilities(sdk, answer, both).map((m) => `answer ${e.ok} ${m}`));
  }
  if (e.request !== undefined) {
    const accepted = op.requestBody?.content?.['application/json']?.schema;
    if (!accepted) out.push(`${e.method} ${e.path} documents no JSON request body`);
    else {
      const sent = jsonSchemaOf(e.request, 'output');
      const both = (s: Json) =>
        s.$ref && String(s.$ref).startsWith('#/$defs') ? resolver(sent)(s) : serverDefs(s);
      out.push(...incompatibilities(accepted, sent, both).map((m) => `request ${m}`));
    }
  }
  return out;
}

describe('SDK and OpenAPI document', () => {
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

  it.each(Object.entries(endpoints))('%s matches the document', (_name, e) => {
    expect(drift(doc, e as Endpoint)).toEqual([]);
  });

  describe('the checker finds drift', () => {
    const copy = (): OpenApi => structuredClone(doc);
    const answerOf = (d: OpenApi, path: string, method: string, status: string): Json =>
      d.paths[path]![method]!.responses![status]!.content!['application/json']!.schema!;

    it('a route that moved', () => {
      const d = copy();
      d.paths['/v1/approvals/{approvalId}'] = d.paths['/v1/approvals/{id}']!;
      delete d.paths['/v1/approvals/{id}'];
      expect(drift(d, endpoints.getApproval)).toEqual([
        'GET /v1/approvals/{id} is not in the OpenAPI document',
      ]);
    });

    it('a changed success status', () => {
      const d = copy();
      const responses = d.paths['/v1/agent-permission-requests']!.post!.responses!;
      responses['200'] = responses['201']!;
      delete responses['201'];
      expect(drift(d, endpoints.requestCapability)).toEqual([
        'POST /v1/agent-permission-requests documents no JSON answer for 201',
      ]);
    });

    it('a required field the server stops sending, or sends as null', () => {
      const d = copy();
      const token = answerOf(d, '/v1/agents/token', 'post', '200');
      token.required = (token.required as string[]).filter((n) => n !== 'access_token');
      expect(drift(d, endpoints.token)).toEqual([
        'answer 200 $.access_token: required, but not always present',
      ]);
      const d2 = copy();
      const props = answerOf(d2, '/v1/agents/token', 'post', '200').properties as Record<string, Json>;
      props.expires_in = { type: ['integer', 'null'] };
      expect(drift(d2, endpoints.token)).toEqual(['answer 200 $.expires_in: may be null, expected integer']);
    });

    it('a new enum value the SDK does not know', () => {
      const d = copy();
      const approval = (answerOf(d, '/v1/approvals/{id}', 'get', '200').properties as Record<string, Json>)
        .approval!;
      const status = (serverProps(d, approval).status ?? {}) as Json;
      status.enum = [...(status.enum as string[]), 'escalated'];
      expect(drift(d, endpoints.getApproval)).toEqual(['answer 200 $.approval.status: may be "escalated"']);
    });

    it('a request field the server no longer accepts', () => {
      const d = copy();
      const body = d.paths['/v1/agents/bootstrap']!.post!.requestBody!.content!['application/json']!.schema!;
      (body.properties as Record<string, Json>).bootstrapSecret = { type: 'integer' };
      expect(drift(d, endpoints.bootstrap)).toEqual([
        'request $.bootstrapSecret: may be string, expected integer',
      ]);
    });
  });
});

/** An object schema's properties, through a `$ref` into the document's components. */
function serverProps(d: OpenApi, s: Json): Record<string, Json> {
  return (resolver(d as unknown as Json)(s).properties ?? {}) as Record<string, Json>;
}
