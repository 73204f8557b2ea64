/**
 * A local HTTPS stand-in for the issue tracker (provider `issues`): the `/rest/api/3/*` paths the
 * spec lists, an in-memory store, HTTP Basic checked against one configured account, and a
 * record of every request so tests can assert what the gateway really sent upstream.
 */
import https from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** Path exactly as received on the wire (no normalisation). */
  rawPath: string;
  /** Decoded path without the query. */
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: string;
  /** Whether the Basic credentials matched the configured account. */
  authorized: boolean;
}

export interface CannedResponse {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface MockIssueTrackerOptions {
  email: string;
  apiToken: string;
  tls: { key: string; cert: string };
  host?: string;
  port?: number;
  /** Off in the benchmark, where millions of records would only cost memory. */
  record?: boolean;
  /**
   * How long an idle connection stays open (Node's default: 5 s). The benchmark keeps them
   * longer than the pause between two rounds of one mode, as a provider under steady traffic
   * would, so no round pays for new TLS handshakes.
   */
  keepAliveTimeoutMs?: number;
}

export interface MockIssue {
  id: string;
  key: string;
  fields: {
    summary: string;
    description?: unknown;
    project: { id: string; key: string; name: string };
    issuetype: { name: string };
    status: { name: string };
  };
  comments: { id: string; body: unknown; author: { emailAddress: string }; created: string }[];
}

export interface MockIssueTracker {
  readonly baseUrl: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  readonly issues: Map<string, MockIssue>;
  /** The exact header value the gateway must inject. */
  readonly expectedAuthorization: string;
  /** Answers the next request (after recording it) with this instead of the normal route. */
  respondOnce(response: CannedResponse): void;
  close(): Promise<void>;
}

const PROJECTS = [
  { id: '10000', key: 'VLT', name: 'Vault' },
  { id: '10001', key: 'OPS', name: 'Operations' },
];

const TRANSITIONS = [
  { id: '11', name: 'To Do', to: { name: 'To Do' } },
  { id: '21', name: 'In Progress', to: { name: 'In Progress' } },
  { id: '31', name: 'Done', to: { name: 'Done' } },
];

export async function startMockIssueTracker(opts: MockIssueTrackerOptions): Promise<MockIssueTracker> {
  const host = opts.host ?? '127.0.0.1';
  const record = opts.record ?? true;
  const expectedAuthorization = `Basic ${Buffer.from(`${opts.email}:${opts.apiToken}`).toString('base64')}`;
  const requests: RecordedRequest[] = [];
  const issues = new Map<string, MockIssue>();
  const canned: CannedResponse[] = [];
  let nextId = 10000;
  const perProject = new Map<string, number>();
  let baseUrl = '';

  const findIssue = (idOrKey: string) =>
    issues.get(idOrKey) ?? [...issues.values()].find((i) => i.id === idOrKey);
  const issueView = (i: MockIssue) => ({
    id: i.id,
    key: i.key,
    self: `${baseUrl}/rest/api/3/issue/${i.id}`,
    fields: i.fields,
  });

  function route(req: RecordedRequest): CannedResponse {
    const m = req.method;
    const p = req.path;
    if (p === '/rest/api/3/myself' && m === 'GET') {
      return {
        status: 200,
        body: { accountId: 'acc-1', emailAddress: opts.email, displayName: 'E2E Bot', active: true },
      };
    }
    if (p === '/rest/api/3/project' && m === 'GET') return { status: 200, body: PROJECTS };
    if (p === '/rest/api/3/search' && m === 'GET') {
      // Enough JQL for tests: `project = KEY` narrows, anything else returns every issue.
      const jql = req.query.jql ?? '';
      const proj = /project\s*=\s*"?([A-Za-z0-9]+)"?/i.exec(jql)?.[1]?.toUpperCase();
      const found = [...issues.values()].filter((i) => !proj || i.fields.project.key === proj);
      return {
        status: 200,
        body: { startAt: 0, maxResults: 50, total: found.length, issues: found.map(issueView) },
      };
    }
    if (p === '/rest/api/3/issue' && m === 'POST') {
      const fields = (parseJson(req.body) as { fields?: Record<string, unknown> } | undefined)?.fields;
      const projectKey = (fields?.project as { key?: string } | undefined)?.key;
      const project = PROJECTS.find((x) => x.key === projectKey);
      const summary = fields?.summary;
      const issuetype = (fields?.issuetype as { name?: string } | undefined)?.name;
      const errors: Record<string, string> = {};
      if (!project) errors.project = 'valid project is required';
      if (typeof summary !== 'string' || !summary)
        errors.summary = 'You must specify a summary of the issue.';
      if (!issuetype) errors.issuetype = 'valid issue type is required';
      if (!project || Object.keys(errors).length) return { status: 400, body: { errorMessages: [], errors } };
      const n = (perProject.get(project.key) ?? 0) + 1;
      perProject.set(project.key, n);
      const issue: MockIssue = {
        id: String(nextId++),
        key: `${project.key}-${n}`,
        fields: {
          summary: summary as string,
          description: fields?.description,
          project,
          issuetype: { name: issuetype! },
          status: { name: 'To Do' },
        },
        comments: [],
      };
      issues.set(issue.key, issue);
      return { status: 201, body: { id: issue.id, key: issue.key, self: issueView(issue).self } };
    }
    const im = /^\/rest\/api\/3\/issue\/([^/]+)(\/comment|\/transitions)?$/.exec(p);
    if (im) {
      const issue = findIssue(im[1]!);
      if (!issue) {
        return {
          status: 404,
          body: {
            errorMessages: ['Issue does not exist or you do not have permission to see it.'],
            errors: {},
          },
        };
      }
      const sub = im[2];
      if (!sub && m === 'GET') return { status: 200, body: issueView(issue) };
      if (!sub && m === 'PUT') {
        const fields = (parseJson(req.body) as { fields?: { summary?: string } } | undefined)?.fields;
        if (typeof fields?.summary === 'string') issue.fields.summary = fields.summary;
        return { status: 204 };
      }
      if (!sub && m === 'DELETE') {
        issues.delete(issue.key);
        return { status: 204 };
      }
      if (sub === '/comment' && m === 'GET') {
        return {
          status: 200,
          body: { startAt: 0, maxResults: 50, total: issue.comments.length, comments: issue.comments },
        };
      }
      if (sub === '/comment' && m === 'POST') {
        const body = (parseJson(req.body) as { body?: { type?: string } } | undefined)?.body;
        if (body?.type !== 'doc') {
          return { status: 400, body: { errorMessages: ['Comment body must be a document.'], errors: {} } };
        }
        const comment = {
          id: String(nextId++),
          body,
          author: { emailAddress: opts.email },
          created: new Date().toISOString(),
        };
        issue.comments.push(comment);
        return { status: 201, body: comment };
      }
      if (sub === '/transitions' && m === 'GET') return { status: 200, body: { transitions: TRANSITIONS } };
      if (sub === '/transitions' && m === 'POST') {
        const id = (parseJson(req.body) as { transition?: { id?: string } } | undefined)?.transition?.id;
        const t = TRANSITIONS.find((x) => x.id === id);
        if (!t) return { status: 400, body: { errorMessages: ['Transition id is not valid.'], errors: {} } };
        issue.fields.status = { name: t.to.name };
        return { status: 204 };
      }
    }
    return { status: 404, body: { errorMessages: [`No route for ${m} ${p}`], errors: {} } };
  }

  const server = https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, (req, res) => {
    void handle(req, res);
  });
  if (opts.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = opts.keepAliveTimeoutMs;

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const rawPath = req.url ?? '/';
    const url = new URL(rawPath, 'https://mock.invalid');
    const rec: RecordedRequest = {
      method: req.method ?? 'GET',
      rawPath,
      path: safeDecode(url.pathname),
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      authorized: req.headers.authorization === expectedAuthorization,
    };
    if (record) requests.push(rec);
    let out: CannedResponse;
    const once = canned.shift();
    if (once) out = once;
    else if (!rec.authorized) {
      out = {
        status: 401,
        headers: { 'www-authenticate': 'Basic realm="mock"' },
        body: { errorMessages: ['Client must be authenticated to access this resource.'], errors: {} },
      };
    } else out = route(rec);
    const headers: Record<string, string> = { ...out.headers };
    let payload: string | undefined;
    if (out.body !== undefined) {
      payload = JSON.stringify(out.body);
      headers['content-type'] ??= 'application/json;charset=UTF-8';
    }
    res.writeHead(out.status, headers);
    res.end(payload);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  baseUrl = `https://${host}:${port}`;

  return {
    baseUrl,
    port,
    requests,
    issues,
    expectedAuthorization,
    respondOnce: (r) => void canned.push(r),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function safeDecode(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
