/**
 * `npm run bench:phases -- <dir> [<phase> <phase>] [<rows>]`: the platform's
 * CPU profile of a benchmark run with `BENCH_PROFILE=<dir>`, cut into the
 * phases of its load. Prints one JSON object.
 *
 * A benchmark that alternates loads (`bench:rules`' `none` and `with`,
 * `bench:translators`' variants, `bench:integrations`' `mqtt` and `webhook`)
 * runs them all on one platform process, so its profile mixes them. Each
 * phase the benchmark measured is noted in `<dir>/phases.ndjson` (`cpuMeter`
 * in processes.ts: its name, the platform's pid, its span on the profile's
 * clock and its messages). Here every sample of the platform's main thread
 * is given to the phase it fell in (the set-ups between phases to none), and
 * each phase's busy time (every sample but `(idle)`) is divided by its
 * messages.
 *
 * - With no phases named: each phase's messages and busy µs per message,
 *   and the files (a package, a file of this repository, a Node module, or a
 *   native frame such as the garbage collector) each phase spends most in.
 * - With two: the same for both, and the files (inclusive time: a stack counts
 *   once for every file in it) and the functions (their own time) that the
 *   second phase spends more on per message than the first, most first.
 *
 * The profile samples wall time: on a machine whose cores are all busy, a
 * frame the platform was preempted in (a system call such as `writev`) is
 * charged the wait. The processes' CPU counters, which the benchmarks print,
 * are the figures; this says where they go.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compare, cutProfile, perMessage, type CpuProfile, type PhaseCut, type PhaseMark } from './phaseCut.js';
import { PHASES_FILE } from './processes.js';

function top(cut: PhaseCut, rows: number): { name: string; microsPerMessage: number }[] {
  return [...cut.files.entries()]
    .sort((p, q) => q[1] - p[1])
    .slice(0, rows)
    .map(([name, us]) => ({ name, microsPerMessage: perMessage(us, cut) }));
}

/** The main thread's profile of process `pid` in `dir` (`CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile`, thread 0). */
function profileOf(dir: string, pid: number): string {
  const name = readdirSync(dir).find((f) => f.endsWith('.cpuprofile') && f.split('.')[3] === String(pid) && f.split('.')[4] === '0');
  if (!name) throw new Error(`no CPU profile of process ${pid} in ${dir}: it is written when the platform exits`);
  return join(dir, name);
}

function main(args: string[]): void {
  const [dir, first, second, rowsArg] = args;
  if (!dir || (first !== undefined && second === undefined)) {
    console.error('usage: npm run bench:phases -- <BENCH_PROFILE dir> [<phase> <phase>] [<rows>]');
    process.exit(2);
  }
  const marks = readFileSync(join(dir, PHASES_FILE), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as PhaseMark);
  const rows = Number(rowsArg ?? 25);
  const cuts = new Map<string, PhaseCut>();
  const profiles: string[] = [];
  for (const pid of new Set(marks.map((m) => m.pid))) {
    const file = profileOf(dir, pid);
    profiles.push(file);
    cutProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, marks.filter((m) => m.pid === pid), cuts);
  }
  const phases = Object.fromEntries([...cuts].map(([name, cut]) => [name, { messages: cut.messages, busyMicrosPerMessage: perMessage(cut.busy, cut) }]));
  if (first === undefined) {
    console.log(JSON.stringify({ profiles, phases, files: Object.fromEntries([...cuts].map(([name, cut]) => [name, top(cut, rows)])) }, null, 2));
    return;
  }
  const a = cuts.get(first);
  const b = cuts.get(second!);
  if (!a || !b) throw new Error(`the phases in ${join(dir, PHASES_FILE)} are ${[...cuts.keys()].join(', ')}`);
  console.log(JSON.stringify({ profiles, phases, compared: [first, second], files: compare(a, b, 'files', rows), functions: compare(a, b, 'functions', rows) }, null, 2));
}

main(process.argv.slice(2));
