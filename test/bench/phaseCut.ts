/**
 * A platform CPU profile cut into the phases of a benchmark's load: the
 * reading behind `npm run bench:phases` (phases.ts), kept apart from its
 * command line so that it can be tested.
 */
interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

/** A V8 CPU profile, as `--cpu-prof` writes it: sample times in microseconds on the machine's monotonic clock. */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** One phase as a benchmark noted it. */
export interface PhaseMark {
  phase: string;
  pid: number;
  from: number;
  to: number;
  messages: number;
}

/** What one phase (all its spans together) spent. */
export interface PhaseCut {
  messages: number;
  /** Microseconds of samples that were not idle. */
  busy: number;
  /** Own time by function. */
  functions: Map<string, number>;
  /** Inclusive time by file. */
  files: Map<string, number>;
}

const ROOT = new URL('../..', import.meta.url).pathname;

/** A frame's file: a package by its name, a file of this repository by its path, a Node module by its URL, a native frame by its name. */
export function fileOf(frame: CallFrame): string {
  const { url } = frame;
  if (url === '') return frame.functionName.startsWith('(') ? frame.functionName : `(${frame.functionName || 'native'})`;
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + 'node_modules/'.length).split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  const path = url.startsWith('file://') ? url.slice('file://'.length) : url;
  return path.startsWith(ROOT) ? path.slice(ROOT.length) : path;
}

/** A function by its name, file and line; a native frame by its name alone. */
const functionOf = (frame: CallFrame): string =>
  frame.url === '' ? fileOf(frame) : `${frame.functionName || '(anonymous)'} ${fileOf(frame)}${frame.lineNumber >= 0 ? `:${frame.lineNumber + 1}` : ''}`;

/**
 * Gives every sample of `profile` to the phase of `marks` it fell in; samples
 * outside every mark are left out. Adds to `cuts`, so the profiles of several
 * platform processes (a benchmark's separate runs) add up phase by phase.
 */
export function cutProfile(profile: CpuProfile, marks: PhaseMark[], cuts = new Map<string, PhaseCut>()): Map<string, PhaseCut> {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const spans = [...marks].sort((a, b) => a.from - b.from);
  for (const m of spans) {
    const cut = cuts.get(m.phase) ?? { messages: 0, busy: 0, functions: new Map(), files: new Map() };
    cut.messages += m.messages;
    cuts.set(m.phase, cut);
  }
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);
  let t = profile.startTime;
  let span = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    // Sample times only grow: the span is searched from the last one on.
    while (span < spans.length && t > spans[span]!.to) span++;
    const mark = spans[span];
    if (!mark || t < mark.from) continue;
    const us = profile.timeDeltas[i + 1] ?? 0;
    const leaf = nodes.get(profile.samples[i]!)!;
    if (leaf.callFrame.functionName === '(idle)') continue;
    const cut = cuts.get(mark.phase)!;
    cut.busy += us;
    add(cut.functions, functionOf(leaf.callFrame), us);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const file = fileOf(nodes.get(id)!.callFrame);
      if (file === '(root)' || seen.has(file)) continue;
      seen.add(file);
      add(cut.files, file, us);
    }
  }
  return cuts;
}

/** A phase's microseconds per message, to the hundredth. */
export const perMessage = (us: number, cut: PhaseCut): number => Math.round((us / Math.max(1, cut.messages)) * 100) / 100;

/** The keys `b` spends more on per message than `a`, most first. */
export function compare(a: PhaseCut, b: PhaseCut, of: 'files' | 'functions', rows: number): { name: string; a: number; b: number; more: number }[] {
  const names = new Set([...a[of].keys(), ...b[of].keys()]);
  return [...names]
    .map((name) => {
      const x = perMessage(a[of].get(name) ?? 0, a);
      const y = perMessage(b[of].get(name) ?? 0, b);
      return { name, a: x, b: y, more: Math.round((y - x) * 100) / 100 };
    })
    .sort((p, q) => q.more - p.more || (p.name < q.name ? -1 : 1))
    .slice(0, rows);
}
