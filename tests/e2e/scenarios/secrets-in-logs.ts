/**
 * No secret any scenario handled — passwords, cookies, JWTs, PATs, bootstrap secrets, agent
 * tokens, provider credentials, the master key — appears in any line any process printed.
 * Registered last, it searches for the secrets of every scenario of the shape; run alone it
 * first handles a set of its own.
 */
import { expect, it } from 'vitest';
import { expectStatus } from '../../support/api-client.js';
import { newBroker, replica, type Scenario } from './setup.js';

export function secretsInLogsScenario(sc: Scenario): void {
  it('never prints a secret in any process log', async () => {
    const env = sc.env();
    // Secrets of its own, handled the way every scenario handles them, so that the check
    // never passes for lack of anything to look for.
    const b = await newBroker(sc, 'logs');
    expectStatus(
      await b.call('myself', replica(sc, 0), {
        connectionId: b.connId,
        method: 'GET',
        url: `${env.mock.baseUrl}/rest/api/3/myself`,
      }),
      200,
    );
    sc.secrets.add('VLT_MASTER_KEY', env.masterKey);
    const lines = env.logs();
    expect(lines.length, 'the processes logged something to search').toBeGreaterThan(0);
    expect(sc.secrets.size).toBeGreaterThan(10);
    const leaks = sc.secrets.scanLines(lines);
    expect(
      leaks,
      `secrets found in logs (labels: ${[...new Set(leaks.map((l) => l.label))].join(', ')})`,
    ).toEqual([]);
  });
}
