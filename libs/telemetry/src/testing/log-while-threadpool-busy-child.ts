/**
 * Child process of logger.test.ts. With UV_THREADPOOL_SIZE=1, an open() of a FIFO that nobody
 * writes to holds the libuv threadpool's only thread. The child logs one line with the default
 * destination meanwhile and reports on stderr whether the line was in its stdout (a file) when
 * the call returned. Then it opens the FIFO for writing, which releases the held thread.
 */
import { closeSync, open, openSync, readFileSync } from 'node:fs';
import { createLogger } from '../logger.js';

const [fifo, stdoutFile] = process.argv.slice(2) as [string, string];
const MESSAGE = 'logged while the threadpool is busy';

open(fifo, 'r', (err, fd) => {
  if (!err) closeSync(fd);
});
createLogger({ service: 'probe' }).info(MESSAGE);
const written = readFileSync(stdoutFile, 'utf8').includes(MESSAGE);
process.stderr.write(written ? 'line written\n' : 'line not written\n');
closeSync(openSync(fifo, 'w'));
