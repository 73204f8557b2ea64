/**
 * A throw-away certificate authority and one server certificate for local HTTPS upstreams.
 * The CA PEM is written to a file because the services trust it only through
 * NODE_EXTRA_CA_CERTS (read once at process start), exactly like an operator would.
 */
import { mkdtemp, writeFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';

export interface TestPki {
  /** PEM of the CA, for undici `connect.ca` in the test process. */
  caPem: string;
  /** File holding `caPem`, for NODE_EXTRA_CA_CERTS. */
  caPath: string;
  /** Server key and certificate (SAN: IP 127.0.0.1, DNS localhost). */
  key: string;
  cert: string;
  dispose(): Promise<void>;
}

export async function createTestPki(): Promise<TestPki> {
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + 7 * 24 * 3600_000);
  const ca = await generate([{ name: 'commonName', value: 'vlt e2e test CA' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const leaf = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  const dir = await mkdtemp(path.join(tmpdir(), 'vlt-pki-'));
  const caPath = path.join(dir, 'ca.pem');
  await writeFile(caPath, ca.cert);
  return {
    caPem: ca.cert,
    caPath,
    key: leaf.private,
    cert: leaf.cert,
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}
