/**
 * What every end-to-end file sets up around the services: the test CA, the mock sites, the
 * tripwires and the env every process shares. Kept in one place so the shapes differ only in
 * which processes they start.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startMockIssueTracker, type MockIssueTracker } from './mock-issue-tracker.js';
import { createTestPki, type TestPki } from './test-pki.js';
import { startTripwires, type Tripwires } from './tripwire.js';

export interface E2eFixtures {
  pki: TestPki;
  mock: MockIssueTracker;
  mockDown: MockIssueTracker;
  mockAccount: { email: string; apiToken: string };
  mockDownAccount: { email: string; apiToken: string };
  tripwires: Tripwires;
  masterKey: string;
  /** Env shared by every process of the shape. */
  commonEnv: Record<string, string>;
  tempDir(): Promise<string>;
  dispose(): Promise<void>;
}

export async function startE2eFixtures(): Promise<E2eFixtures> {
  const pki = await createTestPki();
  const mockAccount = {
    email: `bot-${randomBytes(3).toString('hex')}@tracker.test`,
    apiToken: `itk_${randomBytes(18).toString('hex')}`,
  };
  const mockDownAccount = {
    email: `bot2-${randomBytes(3).toString('hex')}@tracker.test`,
    apiToken: `itk_${randomBytes(18).toString('hex')}`,
  };
  const tls = { key: pki.key, cert: pki.cert };
  const mock = await startMockIssueTracker({ ...mockAccount, tls });
  const mockDown = await startMockIssueTracker({ ...mockDownAccount, tls });
  // Same port as the real site where the OS allows: an alias differs from it only by address.
  const tripwires = await startTripwires(mock.port);
  const masterKey = randomBytes(32).toString('base64');
  const dirs: string[] = [];
  return {
    pki,
    mock,
    mockDown,
    mockAccount,
    mockDownAccount,
    tripwires,
    masterKey,
    commonEnv: {
      HOST: '127.0.0.1',
      VLT_SSRF_ALLOW_CIDRS: '127.0.0.1/32',
      NODE_EXTRA_CA_CERTS: pki.caPath,
      // Tests stand in for the edge proxy, so per-IP limits see the addresses the tests send.
      VLT_TRUST_PROXY: '127.0.0.1/32',
      LOG_LEVEL: process.env.VLT_E2E_LOG_LEVEL ?? 'debug',
    },
    tempDir: async () => {
      const d = await mkdtemp(path.join(tmpdir(), 'vlt-e2e-'));
      dirs.push(d);
      return d;
    },
    dispose: async () => {
      await Promise.allSettled([mock.close(), mockDown.close(), tripwires.close()]);
      await Promise.allSettled([pki.dispose(), ...dirs.map((d) => rm(d, { recursive: true, force: true }))]);
    },
  };
}
