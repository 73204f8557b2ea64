#!/usr/bin/env node
// The vlt-setup executable. Runs the bundled build (dist/vlt-setup.js) when there is one;
// otherwise the TypeScript source, which needs a TypeScript loader in the process
// (`node --import tsx clients/setup-cli/bin/vlt-setup.mjs ...`).
import { existsSync } from 'node:fs';

const built = new URL('../dist/vlt-setup.js', import.meta.url);
if (existsSync(built)) {
  await import(built.href);
} else {
  try {
    await import(new URL('../src/main.ts', import.meta.url).href);
  } catch (err) {
    if (err && typeof err === 'object' && err.code === 'ERR_UNKNOWN_FILE_EXTENSION') {
      console.error(
        'error: vlt-setup is not built (no dist/vlt-setup.js); build it, or run it from source with: ' +
          'node --import tsx clients/setup-cli/src/main.ts',
      );
      process.exitCode = 1;
    } else {
      throw err;
    }
  }
}
