/**
 * Builders for tests: a valid stored policy with overrides, and its hydrated runtime. Not
 * exported from the package index.
 */
import type { Transform } from 'node:stream';
import type { PolicyDocument } from '@vlt/contracts';
import type { PolicyRuntime } from './compile.js';
import type { ExecutionContext, ExecutionDecision } from './pipeline.js';
import { compilePolicy, hydratePolicy } from './compile.js';

export const IDS = {
  policy: '6f1c2b9e-3d4a-4e5f-8a7b-9c0d1e2f3a4b',
  workspace: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
  agent: '1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e',
  connection: '2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
} as const;

export type PolicyInput = Omit<Partial<PolicyDocument>, 'rules'> & {
  rules?: { request?: unknown[]; response?: unknown[] };
};

export function policyDoc(overrides: PolicyInput = {}): PolicyDocument {
  return {
    id: IDS.policy,
    workspaceId: IDS.workspace,
    agentId: IDS.agent,
    connectionId: IDS.connection,
    allowedModels: ['A', 'B'],
    defaultMode: 'read_write',
    stepUpApproval: 'never',
    allowlists: [
      {
        baseUrl: 'https://api.example.com',
        methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
        pathPatterns: ['/*'],
      },
    ],
    rateLimits: null,
    timeWindows: [],
    providerConstraints: null,
    version: 1,
    ...overrides,
    rules: { request: [], response: [], ...(overrides.rules ?? {}) } as PolicyDocument['rules'],
  };
}

export function runtime(
  overrides: PolicyInput = {},
  connection = { provider: 'code_host', service: 'code_host' },
): PolicyRuntime {
  return hydratePolicy(compilePolicy(policyDoc(overrides), connection));
}

/** Writes `text` through a stream stage in chunks of the given sizes (bytes may split anywhere). */
export async function throughChunks(stage: Transform, text: string, sizes: number[]): Promise<string> {
  const bytes = Buffer.from(text, 'utf8');
  const out: Buffer[] = [];
  stage.on('data', (c: Buffer) => out.push(c));
  const done = new Promise((r) => stage.on('end', r));
  for (let p = 0, i = 0; p < bytes.length; i++) {
    const n = sizes[i % sizes.length]!;
    stage.write(bytes.subarray(p, p + n));
    p += n;
  }
  stage.end();
  await done;
  return Buffer.concat(out).toString('utf8');
}

/** A decision in one comparable string: `allow`, `deny:<step>:<code>`, `approval:<code>`. */
export function outcome(d: ExecutionDecision): string {
  if (d.outcome === 'deny') return `deny:${d.step}:${d.code}`;
  if (d.outcome === 'require_approval') return `approval:${d.code}`;
  return d.outcome;
}

/** The reason a decision gives, or '' for one that gives none. */
export function reasonOf(d: ExecutionDecision): string {
  return d.outcome === 'deny' || d.outcome === 'require_approval' || d.outcome === 'bad_request'
    ? d.reason
    : '';
}

/** A context at a fixed time, nothing counted yet, the host resolving to one public address. */
export const PUBLIC_HOST_CTX: Readonly<ExecutionContext> = Object.freeze({
  now: new Date('2024-01-01T12:00:00Z'),
  requestsInLastHour: 0,
  ssrfAllowCidrs: [],
  model: 'B',
  resolvedAddresses: ['93.184.216.34'],
});
