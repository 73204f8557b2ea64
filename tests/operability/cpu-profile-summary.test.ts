/**
 * bench/cpu-profile.ts: the per-process profile summaries `bench/gateway.ts --profile` prints.
 * What they count must be what the process did while the bench measured, and nothing else.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import {
  codeOwner,
  cpuProfileArgs,
  monotonicUs,
  readCpuProfiles,
  summarizeCpuProfile,
} from '../../bench/cpu-profile.js';

const frame = (id: number, functionName: string, url = '') => ({
  id,
  callFrame: { functionName, url, lineNumber: 0 },
});

describe('CPU profile summaries', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  it('name the owner of each frame', () => {
    expect(codeOwner('evaluate', 'file:///work/main/libs/policy-engine/src/pipeline.ts')).toBe(
      'ours libs/policy-engine',
    );
    expect(codeOwner('run', 'file:///app/services/data-plane/src/modules/execute/service.ts')).toBe(
      'ours services/data-plane',
    );
    expect(
      codeOwner(
        'Request',
        'file:///r/node_modules/.pnpm/undici@7.30.2/node_modules/undici/lib/core/request.js',
      ),
    ).toBe('lib undici');
    expect(
      codeOwner('query', 'file:///r/node_modules/.pnpm/@prisma+client@7/node_modules/@prisma/client/x.js'),
    ).toBe('lib @prisma/client');
    expect(codeOwner('emit', 'node:events')).toBe('node');
    expect(codeOwner('(garbage collector)', '')).toBe('(garbage collector)');
    expect(codeOwner('writev', '')).toBe('native');
  });

  it('count busy time by owner and function, within the window only, never idle samples', () => {
    const profile = {
      nodes: [
        frame(1, '(root)'),
        frame(2, '(idle)'),
        frame(3, 'decide', 'file:///r/services/data-plane/src/modules/execute/service.ts'),
        frame(4, 'writev'),
      ],
      startTime: 1_000,
      // Sample times: 1,100 (decide), 1,300 (idle), 1,400 (writev), 1,700 (decide), 2,100 (writev).
      samples: [3, 2, 4, 3, 4],
      timeDeltas: [100, 200, 100, 300, 400],
    };
    const all = summarizeCpuProfile(profile);
    // A sample stands for the time since the previous one; the idle one counts for nothing.
    expect(all.busyMs).toBeCloseTo(0.9, 6);
    expect(all.groups).toEqual([
      { name: 'native', ms: 0.5 },
      { name: 'ours services/data-plane', ms: 0.4 },
    ]);
    expect(all.functions.map((f) => f.name)).toEqual([
      'writev',
      'decide (services/data-plane/src/modules/execute/service.ts:1)',
    ]);

    const window = summarizeCpuProfile(profile, { fromUs: 1_350, toUs: 1_800 });
    expect(window.busyMs).toBeCloseTo(0.4, 6);
    expect(window.functions).toEqual([
      { name: 'decide (services/data-plane/src/modules/execute/service.ts:1)', ms: 0.3 },
      { name: 'writev', ms: 0.1 },
    ]);
  });

  it("place a real process's samples on the clock the bench reads", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'vlt-cpu-profile-'));
    dirs.push(dir);
    const before = monotonicUs();
    const script =
      'function burn(){let x=0;const end=Date.now()+300;while(Date.now()<end)x+=Math.sqrt(x+1);return x}burn()';
    await promisify(execFile)(process.execPath, [...cpuProfileArgs(dir), '-e', script]);
    const after = monotonicUs();

    const threads = await readCpuProfiles(dir, 0);
    const main = threads.find((t) => t.thread === 0);
    expect(main).toBeDefined();
    const during = summarizeCpuProfile(main!.profile, { fromUs: before, toUs: after });
    // The loop spins for 300 ms; samples may wait for a core on a busy machine, never vanish.
    expect(during.busyMs).toBeGreaterThan(150);
    expect(during.functions[0]!.name).toMatch(/^burn /);
    // A window that closed before the process started holds none of its samples.
    expect(summarizeCpuProfile(main!.profile, { fromUs: before - 60_000_000, toUs: before }).busyMs).toBe(0);
  });
});
