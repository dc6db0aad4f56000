/**
 * The test runner: starts one throw-away PostgreSQL cluster with PostGIS for the
 * whole run, loads every `*.test.ts` under test/ (or those whose path contains
 * one of the arguments) into uvu, runs them, and ends with the line
 * `N passed, N failed, N skipped`.
 */
import { readdirSync, statSync } from 'node:fs';
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

const cluster = await startTestCluster();
let summary = '';
const write = process.stdout.write.bind(process.stdout);
try {
  (globalThis as any).UVU_DEFER = 1;
  (globalThis as any).UVU_QUEUE = [];
  const uvu = await import('uvu');
  for (const [index, file] of files.entries()) {
    (globalThis as any).UVU_QUEUE.push([relative(root, file)]);
    (globalThis as any).UVU_INDEX = index;
    await import(pathToFileURL(file).href);
  }
  // uvu prints its own totals; keep a copy to turn into the closing line.
  process.stdout.write = ((chunk: any, ...rest: any[]) => {
    summary += String(chunk);
    return write(chunk, ...rest);
  }) as typeof process.stdout.write;
  await uvu.exec();
} finally {
  process.stdout.write = write;
  await cluster.stop();
}

const plain = summary.replace(/\x1b\[[0-9;]*m/g, '');
const count = (label: string) => Number(plain.match(new RegExp(`${label}:\\s+(\\d+)`))?.[1] ?? 0);
const total = count('Total');
const passed = count('Passed');
const skipped = count('Skipped');
console.log(`${passed} passed, ${total - passed} failed, ${skipped} skipped`);
process.exit(total - passed > 0 || total === 0 ? 1 : 0);
