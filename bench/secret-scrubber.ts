/**
 * Secret scrubber benchmark: what removing the injected credential from a response body costs.
 *
 *   pnpm tsx bench/secret-scrubber.ts
 *
 * Every brokered response body passes through the scrubber (libs/upstream/src/secret-scrubber.ts),
 * which searches the credential in every spelling a reflection produces. Baselines measured in
 * the same run, on the same bytes and chunks:
 * - one native search per form: the searches the scrubber made before ADR 0070, without its
 *   hold-back of a chunk's tail (so a lower bound for that scrubber);
 * - one native search for the raw secret alone: what any scrubbing costs at least.
 *
 * Credentials: an issue-tracker login (`user:token` and the token, as the data plane passes it)
 * and an LLM API key. Bodies, in 16 KiB chunks: an LLM event stream (8 MiB) and plain text (4 MiB).
 */
import { randomBytes } from 'node:crypto';
import { compileSecretForms } from '@vlt/upstream';
import { createSecretScrubber } from '@vlt/upstream/internal';
import { llmEvents, rechunk, textChunks } from './workloads.js';

const BUDGET_MS = 1_500;

/** Best time over repeated passes of `fn` for about BUDGET_MS, in ms per MiB of `bytes`. */
function msPerMiB(bytes: number, fn: () => void): number {
  for (let i = 0; i < 3; i++) fn(); // warm up the JIT
  let best = Number.POSITIVE_INFINITY;
  const end = performance.now() + BUDGET_MS;
  while (performance.now() < end) {
    const t = process.hrtime.bigint();
    fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e6);
  }
  return best / (bytes / (1 << 20));
}

const credentials = {
  'issue tracker': (() => {
    const token = `itk_${randomBytes(12).toString('hex')}`;
    return [`bench@tracker.test:${token}`, token];
  })(),
  'LLM API key': [`sk-proj-${randomBytes(36).toString('base64url')}`],
};
const bodies = {
  'LLM stream': rechunk(llmEvents(40_000), 16_384),
  'plain text': textChunks(4 << 20),
};

console.log('ms per MiB (best pass); ratios: the scrubber against each baseline, same bytes and chunks\n');
console.log(
  `${'credential'.padEnd(14)} ${'body'.padEnd(11)} ${'forms'.padStart(5)} ${'searched'.padStart(8)} ` +
    `${'scrubber'.padStart(8)} ${'per form'.padStart(8)} ${'raw only'.padStart(8)}   scrubber ÷ per form   scrubber ÷ raw only`,
);
for (const [credential, secrets] of Object.entries(credentials)) {
  const forms = compileSecretForms(secrets);
  // The body has no NUL byte, so no UTF-16 form can occur in it; both strategies skip those.
  const utf8 = forms.bytes.filter((f) => !f.needsNul).map((f) => f.bytes);
  const searched = forms.roots.filter((r) => !r.form.needsNul).length;
  const raw = Buffer.from(secrets.at(-1)!);
  for (const [name, chunks] of Object.entries(bodies)) {
    const bytes = chunks.reduce((n, c) => n + c.length, 0);
    const scrubber = msPerMiB(bytes, () => {
      const s = createSecretScrubber(forms)!;
      for (const c of chunks) s.push(c);
      s.end();
    });
    const perForm = msPerMiB(bytes, () => {
      for (const c of chunks) {
        c.indexOf(0);
        for (const f of utf8) c.indexOf(f);
      }
    });
    const rawOnly = msPerMiB(bytes, () => {
      for (const c of chunks) c.indexOf(raw);
    });
    console.log(
      `${credential.padEnd(14)} ${name.padEnd(11)} ${String(utf8.length).padStart(5)} ${String(searched).padStart(8)} ` +
        `${scrubber.toFixed(3).padStart(8)} ${perForm.toFixed(3).padStart(8)} ${rawOnly.toFixed(3).padStart(8)}   ` +
        `${(scrubber / perForm).toFixed(2).padStart(19)}× ${(scrubber / rawOnly).toFixed(2).padStart(19)}×`,
    );
  }
}
