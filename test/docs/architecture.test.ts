/**
 * docs/architecture.md keeps up with the code: every stream the domain builds
 * an id for is in the "Events and streams" table with every event its decider
 * can emit, and every read-model table is named there.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { OWNED_RESOURCES } from '../../domain/access/resources.js';
import { allProjections } from '../../projections/index.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const doc = readFileSync(join(repo, 'docs/architecture.md'), 'utf8');
const section = doc.slice(doc.indexOf('## Events and streams'), doc.indexOf('\n## ', doc.indexOf('## Events and streams') + 1));
const rows = section.split('\n').filter((line) => line.startsWith('| `'));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** `export const fooStream = (x: string) => \`prefix-${…}\`` in domain/, with the event types declared in the same file. */
const streams = sources(join(repo, 'domain')).flatMap((file) => {
  const text = readFileSync(file, 'utf8');
  const prefixes = [...text.matchAll(/export const \w+Stream = \([^)]*\) => `([a-z-]+-)\$\{/g)].map((m) => m[1]!);
  const union = /export type \w+Event =([\s\S]*?)\n\n/.exec(text)?.[1] ?? '';
  const events = [...union.matchAll(/type: '(\w+)'/g)].map((m) => m[1]!);
  return prefixes.map((prefix) => ({ file, prefix, events }));
});

const test = suite('docs/architecture.md');

test('every stream the domain names has a row in the Events and streams table, listing each of its events', () => {
  assert.ok(streams.length >= 16, `found the domain's stream ids (${streams.length})`);
  for (const { file, prefix, events } of streams) {
    const row = rows.find((r) => r.startsWith(`| \`${prefix}`));
    assert.ok(row, `${prefix}… (${file.slice(repo.length)}) has a row`);
    assert.ok(events.length > 0, `the events of ${prefix}… are found in ${file.slice(repo.length)}`);
    for (const type of events) assert.ok(row!.includes(type), `the ${prefix}… row names ${type}`);
  }
});

test('every read-model table and every creation and deletion of an owned resource is named in the table', () => {
  for (const table of allProjections().flatMap((p) => p.tables)) assert.ok(section.includes(`\`${table}\``), `${table} is named`);
  for (const { created, deleted } of OWNED_RESOURCES) {
    assert.ok(section.includes(created), `${created} is named`);
    assert.ok(section.includes(deleted), `${deleted} is named`);
  }
});

test('the capability documents it links to exist', () => {
  for (const name of ['access.md', 'mqtt.md', 'translators.md']) {
    assert.ok(doc.includes(`](${name})`), `links ${name}`);
    assert.ok(readFileSync(join(repo, 'docs', name), 'utf8').length > 0);
  }
});

test.run();
