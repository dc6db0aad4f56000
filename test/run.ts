/**
 * The test runner: starts one throw-away PostgreSQL cluster with PostGIS for the
 * whole run, loads every `*.test.ts` under test/ (or those whose path contains
 * one of the arguments) into uvu, runs them, and ends with the line
 * `N passed, N failed, N skipped`, whatever went wrong on the way: a file that
 * throws on import, a suite that throws out of uvu, an unhandled rejection or
 * an uncaught exception each count as a failure, with their error printed.
 * The exit code is non-zero unless something ran and nothing failed.
 */
import { readdirSync, statSync, writeSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startTestCluster } from './support/cluster.js';

const root = new URL('.', import.meta.url).pathname;
const filters = process.argv.slice(2);

function find(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'bench' || name === 'support' ? [] : find(path);
    return name.endsWith('.test.ts') ? [path] : [];
  });
}

const files = find(root)
  .filter((f) => filters.length === 0 || filters.some((x) => relative(root, f).includes(x)))
  .sort();
if (files.length === 0) {
  console.error(`no test files match ${filters.join(' ')}`);
  process.exit(1);
}

/** Counted here, from each suite's own result, so the closing line never depends on uvu finishing its report. */
const tally = { total: 0, passed: 0, skipped: 0, broken: 0 };
/** Seconds each file's suites took, for the closing list of the slowest: the suite must stay within CI's budget. */
const seconds = new Map<string, number>();

function report(what: string, error: unknown): void {
  tally.broken++;
  const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
  // Written synchronously: an uncaught exception ends the run right after, and an asynchronous write to a pipe would be lost.
  writeSync(2, `\n  FAIL ${what}\n    ${text.split('\n').join('\n    ')}\n\n`);
}

let cluster: { stop(): Promise<void> } | null = null;
let finished = false;

async function finish(): Promise<never> {
  if (!finished) {
    finished = true;
    try {
      await cluster?.stop();
    } catch (error) {
      report('stopping the test cluster', error);
    }
  }
  const slowest = [...seconds].sort((a, b) => b[1] - a[1]).slice(0, 10);
  if (slowest.length > 1) console.log(`\nslowest files: ${slowest.map(([file, s]) => `${file} ${s.toFixed(1)} s`).join(', ')}`);
  const failed = tally.total - tally.passed + tally.broken;
  console.log(`${tally.passed} passed, ${failed} failed, ${tally.skipped} skipped`);
  process.exit(failed > 0 || tally.total === 0 ? 1 : 0);
}

process.on('unhandledRejection', (reason) => report('unhandled promise rejection', reason));
process.on('uncaughtException', (error) => {
  report('uncaught exception', error);
  void finish();
});

type SuiteRun = () => Promise<[true | string, number, number, number]>;
type QueueEntry = [string | null, ...SuiteRun[]];

/** Wraps each queued suite so that one throwing out of uvu is counted and reported, and the run goes on. */
function guard(entry: QueueEntry): void {
  const file = entry[0];
  for (let i = 1; i < entry.length; i++) {
    const run = entry[i] as SuiteRun;
    entry[i] = async () => {
      const started = performance.now();
      try {
        const result = await run();
        const [errors, passed, skipped, total] = result;
        tally.total += total;
        tally.passed += passed;
        tally.skipped += skipped;
        // uvu drops an error thrown by a `before` hook; the tests it kept from running are failures, named here.
        if (errors === true && passed < total) console.error(`\n  ${file}: ${total - passed} test(s) did not run; a before hook threw\n`);
        return result;
      } catch (error) {
        report(`a suite in ${file} threw out of the test runner`, error);
        return [true, 0, 0, 0];
      } finally {
        if (file) seconds.set(file, (seconds.get(file) ?? 0) + (performance.now() - started) / 1000);
      }
    };
  }
}

try {
  cluster = await startTestCluster();
  (globalThis as any).UVU_DEFER = 1;
  (globalThis as any).UVU_QUEUE = [];
  const uvu = await import('uvu');
  for (const [index, file] of files.entries()) {
    const name = relative(root, file);
    (globalThis as any).UVU_QUEUE.push([name]);
    (globalThis as any).UVU_INDEX = index;
    try {
      await import(pathToFileURL(file).href);
    } catch (error) {
      report(`${name} could not be loaded`, error);
    }
  }
  for (const entry of (globalThis as any).UVU_QUEUE as QueueEntry[]) guard(entry);
  await uvu.exec();
} catch (error) {
  report('the test run', error);
}
// Let a rejection left unhandled by the last test surface before counting.
await new Promise((resolve) => setTimeout(resolve, 10));
await finish();
