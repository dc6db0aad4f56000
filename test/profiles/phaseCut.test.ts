import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { compare, cutProfile, fileOf, type CpuProfile, type PhaseMark } from '../bench/phaseCut.js';

const phases = suite('a benchmark profile cut into phases');

const ROOT = new URL('../..', import.meta.url).href;
const frame = (functionName: string, url: string) => ({ functionName, url, lineNumber: 0 });

/**
 * The platform's main thread, sampled every 10 µs from 1,000: a handler in
 * ingest/pipeline.ts calling into `pg`, which calls back into the same file;
 * idle time; the garbage collector.
 */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)', ''), children: [2, 3, 6] },
    { id: 2, callFrame: frame('(idle)', '') },
    { id: 3, callFrame: frame('handle', `${ROOT}ingest/pipeline.ts`), children: [4] },
    { id: 4, callFrame: frame('write', `${ROOT}node_modules/pg/lib/client.js`), children: [5] },
    { id: 5, callFrame: frame('parse', `${ROOT}ingest/pipeline.ts`) },
    { id: 6, callFrame: frame('(garbage collector)', '') },
  ],
  startTime: 1000,
  // At 1010, 1020, … 1090.
  samples: [4, 2, 5, 6, 6, 4, 4, 5, 2],
  timeDeltas: [10, 10, 10, 10, 10, 10, 10, 10, 10],
};
const marks: PhaseMark[] = [
  { phase: 'none', pid: 7, from: 1000, to: 1035, messages: 10 },
  { phase: 'with', pid: 7, from: 1045, to: 1085, messages: 5 },
];

phases('given two phases, then each sample counts for the phase it fell in, idle time and time between phases for none', () => {
  const cuts = cutProfile(profile, marks);
  const none = cuts.get('none')!;
  const wit = cuts.get('with')!;
  assert.equal([none.messages, none.busy], [10, 20]);
  assert.equal([wit.messages, wit.busy], [5, 40]);
  // The collection at 1040 fell between the phases.
  assert.is(none.files.get('(garbage collector)'), undefined);
  assert.is(wit.files.get('(garbage collector)'), 10);
});

phases('given a stack that passes through one file twice, then the file counts the sample once', () => {
  const none = cutProfile(profile, marks).get('none')!;
  assert.is(none.files.get('ingest/pipeline.ts'), 20);
  assert.is(none.files.get('pg'), 20);
  assert.is(none.functions.get('parse ingest/pipeline.ts:1'), 10);
  assert.is(none.functions.get('write pg:1'), 10);
});

phases('given two phases compared, then what the second spends more per message comes first', () => {
  const cuts = cutProfile(profile, marks);
  const [a, b] = [cuts.get('none')!, cuts.get('with')!];
  assert.equal(compare(a, b, 'functions', 3), [
    { name: 'write pg:1', a: 1, b: 4, more: 3 },
    { name: '(garbage collector)', a: 0, b: 2, more: 2 },
    { name: 'parse ingest/pipeline.ts:1', a: 1, b: 2, more: 1 },
  ]);
  assert.equal(
    compare(a, b, 'files', 5).map((r) => [r.name, r.more]),
    [
      ['ingest/pipeline.ts', 4],
      ['pg', 4],
      ['(garbage collector)', 2],
    ],
  );
});

phases('given spans of one phase in several rounds, then their messages and samples add up', () => {
  const cuts = cutProfile(profile, [
    { phase: 'none', pid: 7, from: 1000, to: 1015, messages: 4 },
    { phase: 'none', pid: 7, from: 1025, to: 1035, messages: 6 },
  ]);
  assert.equal([cuts.get('none')!.messages, cuts.get('none')!.busy], [10, 20]);
});

phases('given the profiles of two platform processes cut into one map, then each phase adds up over both', () => {
  const cuts = cutProfile(profile, marks);
  cutProfile(profile, marks.map((m) => ({ ...m, pid: 8 })), cuts);
  assert.equal([cuts.get('none')!.messages, cuts.get('none')!.busy, cuts.get('with')!.busy], [20, 40, 80]);
  assert.is(cuts.get('with')!.files.get('pg'), 60);
});

phases('given frames of packages, of this repository and of Node, then each is named by its file or package', () => {
  assert.is(fileOf(frame('x', `${ROOT}node_modules/@jitl/quickjs-wasmfile-release-sync/dist/emscripten-module.mjs`)), '@jitl/quickjs-wasmfile-release-sync');
  assert.is(fileOf(frame('x', `${ROOT}node_modules/.pnpm/pg@8/node_modules/pg/lib/client.js`)), 'pg');
  assert.is(fileOf(frame('x', `${ROOT}projections/devices.ts`)), 'projections/devices.ts');
  assert.is(fileOf(frame('writev', '')), '(writev)');
  assert.is(fileOf(frame('(garbage collector)', '')), '(garbage collector)');
  assert.is(fileOf(frame('emit', 'node:events')), 'node:events');
});

phases.run();
