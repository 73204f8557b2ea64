#!/usr/bin/env node
// The vlt-mcp command: runs the bundled server (dist/vlt-mcp.js, made by the build). Nothing is
// written to stdout here: in stdio mode it belongs to the protocol.
import { existsSync } from 'node:fs';

const bundle = new URL('../dist/vlt-mcp.js', import.meta.url);
if (existsSync(bundle)) {
  await import(bundle.href);
} else {
  console.error(
    'vlt-mcp: dist/vlt-mcp.js is missing; build the package first, or run from source with ' +
      '`node --import tsx clients/mcp-server/src/main.ts` in the repository.',
  );
  process.exitCode = 1;
}
