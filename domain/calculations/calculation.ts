import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { PROTECTED_FROM_REPORTS } from '../devices/device.js';

/**
 * A calculation derives a value from device readings and writes it back to a
 * destination device as an ordinary report (docs/calculations.md):
 * - `lastValue`: an aggregation of the most recent reading of a field over
 *   one or more source devices;
 * - `window`: an aggregation of the readings of one source field over a time
 *   window that ends at the trigger, taken over the readings' `reportedAt`.
 * It runs on every report of a source field (`onChange`) or at fixed times
 * (`interval`, aligned on the Unix epoch).
 */
export const LAST_VALUE_AGGREGATIONS = ['sum', 'mean', 'min', 'max', 'count'] as const;
export const WINDOW_AGGREGATIONS = [...LAST_VALUE_AGGREGATIONS, 'first', 'last', 'difference'] as const;
export type LastValueAggregation = (typeof LAST_VALUE_AGGREGATIONS)[number];
export type WindowAggregation = (typeof WINDOW_AGGREGATIONS)[number];

/** Caps, also in the OpenAPI document and docs/calculations.md. */
export const CALCULATION_LIMITS = {
  sources: 100,
  /** Interval schedules: at least 10 s apart, at most 31 days. */
  minIntervalSeconds: 10,
  maxIntervalSeconds: 31 * 86_400,
  /** Windows: 1 s to 31 days. */
  maxWindowSeconds: 31 * 86_400,
  /**
   * Every result is a report, which sets off the calculations that read it: one report may set off at most this
   * many runs in all, through chains at most `chainDepth` calculations long. Layers of calculations each reading
   * every result of the layer before turn one report into w + w² + … runs, shared by every tenant's reactor.
   */
  runsPerReport: 1000,
  chainDepth: 8,
};

/** A field of a device: a top-level field, or a dotted path into a nested report (`sensors.0.temperature`). */
export interface FieldRef {
  deviceId: string;
  field: string;
}

export type Schedule = { type: 'onChange' } | { type: 'interval'; seconds: number };

/** A definition written without a schedule runs on every report of a source field. */
export const DEFAULT_SCHEDULE: Schedule = { type: 'onChange' };

type Written<D> = D extends unknown ? Omit<D, 'schedule'> & { schedule?: Schedule } : never;
/** A definition as written: the schedule is optional. */
export type CalculationWrite = Written<CalculationDefinition>;

export const withDefaults = (written: CalculationWrite): CalculationDefinition => ({ ...written, schedule: written.schedule ?? DEFAULT_SCHEDULE }) as CalculationDefinition;

export type CalculationDefinition =
  | { name: string; type: 'lastValue'; sources: FieldRef[]; destination: FieldRef; aggregation: LastValueAggregation; schedule: Schedule }
  | { name: string; type: 'window'; source: FieldRef; window: { seconds: number }; destination: FieldRef; aggregation: WindowAggregation; schedule: Schedule };

export type CalculationEvent =
  | { type: 'CalculationCreated'; data: { id: string; createdBy: string; definition: CalculationDefinition; at: string } }
  | { type: 'CalculationReplaced'; data: { id: string; definition: CalculationDefinition; at: string } }
  | { type: 'CalculationHalted'; data: { id: string; reason: string; at: string } }
  | { type: 'CalculationResumed'; data: { id: string; at: string } }
  | { type: 'CalculationDeleted'; data: { id: string; at: string } };

/** Another calculation as the cycle check sees it: what it reads and where it writes. */
export interface CalculationLink {
  id: string;
  name: string;
  sources: FieldRef[];
  destination: FieldRef;
}

export type CalculationCommand =
  | { type: 'CreateCalculation'; id: string; definition: CalculationDefinition; createdBy: string; others: CalculationLink[]; at: string }
  | { type: 'ReplaceCalculation'; id: string; definition: CalculationDefinition; others: CalculationLink[]; at: string }
  /** The owner lost a right the calculation needs (recorded by the calculations reactor). */
  | { type: 'HaltCalculation'; id: string; reason: string; at: string }
  /** A run succeeded again after a halt. */
  | { type: 'ResumeCalculation'; id: string; at: string }
  | { type: 'DeleteCalculation'; id: string; at: string };

export type CalculationState =
  | { status: 'none' | 'deleted' }
  | { status: 'active'; id: string; createdBy: string; definition: CalculationDefinition; halted: string | null };

export const calculationStream = (id: string) => `calculation-${id}`;

export const CALCULATION_NOT_FOUND = 'Calculation not found';

/** The actor of a calculation's results, and the `topic` of their `DeviceReported`. */
export const calculationActor = (id: string) => `calculation:${id}`;

export const sourcesOf = (d: CalculationDefinition): FieldRef[] => (d.type === 'lastValue' ? d.sources : [d.source]);

const sameField = (a: FieldRef, b: FieldRef) => a.deviceId === b.deviceId && a.field === b.field;
const fieldKey = (f: FieldRef) => `${f.deviceId}/${f.field}`;

/**
 * The rules the OpenAPI schema cannot say. The shape (types, enums, sizes)
 * was checked at the edge; this is the domain's own word on a definition.
 */
export function checkDefinition(d: CalculationDefinition): void {
  if (d.schedule.type === 'interval') {
    const seconds = (d.schedule as { seconds?: unknown }).seconds;
    if (seconds === undefined) throw ValidationError.field('schedule.seconds', 'is required when schedule.type is interval');
    if (!Number.isInteger(seconds) || (seconds as number) < CALCULATION_LIMITS.minIntervalSeconds || (seconds as number) > CALCULATION_LIMITS.maxIntervalSeconds) {
      throw ValidationError.field('schedule.seconds', `must be a whole number of seconds from ${CALCULATION_LIMITS.minIntervalSeconds} to ${CALCULATION_LIMITS.maxIntervalSeconds}`);
    }
  } else if ('seconds' in d.schedule) {
    throw ValidationError.field('schedule.seconds', 'is only for schedule.type interval; an onChange calculation runs on every report of a source field');
  }
  if (d.type === 'lastValue') {
    if (!(LAST_VALUE_AGGREGATIONS as readonly string[]).includes(d.aggregation)) {
      throw ValidationError.field('aggregation', `must be one of ${LAST_VALUE_AGGREGATIONS.join(', ')} for a lastValue calculation`);
    }
    if (d.sources.length === 0 || d.sources.length > CALCULATION_LIMITS.sources) throw ValidationError.field('sources', `must have 1 to ${CALCULATION_LIMITS.sources} items`);
    d.sources.forEach((s, i) => {
      const j = d.sources.findIndex((o) => sameField(o, s));
      if (j < i) throw ValidationError.field(`sources.${i}`, `repeats sources.${j}`);
    });
  } else {
    if (!(WINDOW_AGGREGATIONS as readonly string[]).includes(d.aggregation)) throw ValidationError.field('aggregation', `must be one of ${WINDOW_AGGREGATIONS.join(', ')}`);
    const s = d.window.seconds;
    if (!Number.isInteger(s) || s < 1 || s > CALCULATION_LIMITS.maxWindowSeconds) throw ValidationError.field('window.seconds', `must be a whole number of seconds from 1 to ${CALCULATION_LIMITS.maxWindowSeconds}`);
  }
  const field = d.destination.field;
  if (field.includes('.')) throw ValidationError.field('destination.field', 'must be a top-level field name, without dots');
  if (PROTECTED_FROM_REPORTS.has(field) || field === 'lnglat') {
    throw ValidationError.field('destination.field', `${field} is kept by the platform or set through the REST API; a calculation cannot write it`);
  }
  const sources = sourcesOf(d);
  const self = sources.findIndex((s) => sameField(s, d.destination));
  if (self >= 0) {
    const where = d.type === 'lastValue' ? `sources.${self}` : 'source';
    throw ValidationError.field('destination', `is also the calculation's ${where}: the calculation would feed itself`);
  }
}

/** The calculations that read each field, by `fieldKey`. */
function readersOf(links: CalculationLink[]): Map<string, CalculationLink[]> {
  const readers = new Map<string, CalculationLink[]>();
  for (const c of links) {
    for (const s of c.sources) {
      const list = readers.get(fieldKey(s));
      if (list) list.push(c);
      else readers.set(fieldKey(s), [c]);
    }
  }
  return readers;
}

/**
 * The calculations a new result would pass through before it comes back to
 * one of the calculation's own sources, or null when it never does. The
 * graph: a calculation leads from each of its sources to its destination;
 * a result feeds every calculation that has the destination among its sources.
 */
export function feedbackPath(id: string, d: CalculationDefinition, others: CalculationLink[]): CalculationLink[] | null {
  const mine = new Set(sourcesOf(d).map(fieldKey));
  const readers = readersOf(others.filter((o) => o.id !== id));
  // Breadth first from the destination; `via` keeps the first path that reached each field.
  const via = new Map<string, CalculationLink[]>([[fieldKey(d.destination), []]]);
  const queue = [fieldKey(d.destination)];
  while (queue.length) {
    const at = queue.shift()!;
    const path = via.get(at)!;
    if (mine.has(at)) return path;
    for (const next of readers.get(at) ?? []) {
      const key = fieldKey(next.destination);
      if (via.has(key)) continue;
      via.set(key, [...path, next]);
      queue.push(key);
    }
  }
  return null;
}

function checkNoCycle(id: string, d: CalculationDefinition, others: CalculationLink[]): void {
  const path = feedbackPath(id, d, others);
  if (!path) return;
  const chain = path.map((c) => `${c.id} (${c.name})`).join(' → ');
  throw ValidationError.field('destination', `feeds back into this calculation's sources through calculation ${chain}: calculations must not form a cycle`);
}

/**
 * What one report of a field sets off, once `d` is among the calculations: the runs of every calculation that
 * reads the field, of every one that reads their results, and so on (the graph has no cycle), and the longest
 * such chain. Refuses, naming the field, a definition with which either passes its limit.
 */
function checkChains(id: string, d: CalculationDefinition, others: CalculationLink[]): void {
  const readers = readersOf([...others.filter((o) => o.id !== id), { id, name: d.name, sources: sourcesOf(d), destination: d.destination }]);
  const known = new Map<string, { runs: number; depth: number }>();
  const open = new Set<string>();
  // Depth first from each field, remembered per field. This calculation joins no cycle (`checkNoCycle` ran first);
  // a cycle among the others, stored before cycles were refused, is walked around once.
  const reach = (field: string): { runs: number; depth: number } => {
    const seen = known.get(field);
    if (seen) return seen;
    if (open.has(field)) return { runs: 0, depth: 0 };
    open.add(field);
    let runs = 0;
    let depth = 0;
    for (const c of readers.get(field) ?? []) {
      const after = reach(fieldKey(c.destination));
      runs += 1 + after.runs;
      depth = Math.max(depth, 1 + after.depth);
    }
    const out = { runs: Math.min(runs, Number.MAX_SAFE_INTEGER), depth };
    open.delete(field);
    known.set(field, out);
    return out;
  };
  let most: [string, { runs: number; depth: number }] | null = null;
  let deepest: [string, { runs: number; depth: number }] | null = null;
  for (const field of readers.keys()) {
    const r = reach(field);
    if (!most || r.runs > most[1].runs) most = [field, r];
    if (!deepest || r.depth > deepest[1].depth) deepest = [field, r];
  }
  if (deepest && deepest[1].depth > CALCULATION_LIMITS.chainDepth) {
    throw ValidationError.field('destination', `would make a chain of ${deepest[1].depth} calculations from ${deepest[0]} (each reading the result of the one before); at most ${CALCULATION_LIMITS.chainDepth} are allowed`);
  }
  if (most && most[1].runs > CALCULATION_LIMITS.runsPerReport) {
    throw ValidationError.field('sources', `would let one report of ${most[0]} set off ${most[1].runs} calculation runs (the calculations that read it, those that read their results, and so on); at most ${CALCULATION_LIMITS.runsPerReport} are allowed`);
  }
}

export const calculationDecider: Decider<CalculationCommand, CalculationState, CalculationEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (command.type === 'CreateCalculation') {
      if (state.status !== 'none') throw new ConflictError(`Calculation ${command.id} already exists`);
      checkDefinition(command.definition);
      checkNoCycle(command.id, command.definition, command.others);
      checkChains(command.id, command.definition, command.others);
      return [{ type: 'CalculationCreated', data: { id: command.id, createdBy: command.createdBy, definition: command.definition, at: command.at } }];
    }
    if (state.status !== 'active') throw new NotFoundError(CALCULATION_NOT_FOUND);
    switch (command.type) {
      case 'ReplaceCalculation':
        checkDefinition(command.definition);
        checkNoCycle(command.id, command.definition, command.others);
        checkChains(command.id, command.definition, command.others);
        return [{ type: 'CalculationReplaced', data: { id: command.id, definition: command.definition, at: command.at } }];
      case 'HaltCalculation':
        if (state.halted === command.reason) return [];
        return [{ type: 'CalculationHalted', data: { id: command.id, reason: command.reason, at: command.at } }];
      case 'ResumeCalculation':
        if (state.halted === null) return [];
        return [{ type: 'CalculationResumed', data: { id: command.id, at: command.at } }];
      case 'DeleteCalculation':
        return [{ type: 'CalculationDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'CalculationCreated':
        return { status: 'active', id: event.data.id, createdBy: event.data.createdBy, definition: event.data.definition, halted: null };
      case 'CalculationReplaced':
        return state.status === 'active' ? { ...state, definition: event.data.definition } : state;
      case 'CalculationHalted':
        return state.status === 'active' ? { ...state, halted: event.data.reason } : state;
      case 'CalculationResumed':
        return state.status === 'active' ? { ...state, halted: null } : state;
      case 'CalculationDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
