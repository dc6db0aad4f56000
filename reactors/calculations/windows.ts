import { comparePositions, type Position } from '../../domain/shared/events.js';
import type { ResultValue, WindowStats } from '../../domain/calculations/aggregate.js';
import type { WindowAggregation } from '../../domain/calculations/calculation.js';

/**
 * The windows of `onChange` calculations, kept in memory by the calculations
 * reactor so that a run reads no database.
 *
 * A series (one device field) is seeded once from `device_history`, in one
 * snapshot together with the read models' checkpoint, so the seed holds
 * exactly the readings of the events up to that position. From then on the
 * reactor feeds it the readings of every later `DeviceReported` of the
 * device, in log order, as the devices projection writes them to
 * `device_history`; an event at or before the series' position is already
 * in it and is skipped, so no reading is counted twice (a batch handled
 * again, or a seed taken while the read models were ahead of the reactor).
 *
 * A series holds every reading with `reportedAt` after `from`, in the
 * order the database's window statistics use (`reportedAt`, then the
 * numeric value, numbers before strings), and the last numeric reading at or
 * before `from` (for `difference`). A window starting before `from` (a
 * very late report), a `first` or `last` that only the database's collation
 * or scan order could decide, and a time this module cannot place to the
 * microsecond are answered `null`: the caller asks the database, as it does
 * for a series it does not hold.
 */

const NUMBER = 0;
const BOOLEAN = 1;
const TEXT = 2;

/** The most readings one series may hold; a larger one is aggregated by the database. */
export const SERIES_READINGS = 100_000;

/** How long a series that did not fit stays with the database before a seed is tried again. */
const RETRY_MS = 60_000;

/** Seconds a series keeps beyond its longest window, so a report that comes a little late is still answered here. */
export const slackOf = (horizon: number): number => Math.max(60, Math.ceil(horizon / 10));

const ISO = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?Z$/;

/**
 * An ISO 8601 time in microseconds since the epoch, the resolution of
 * `timestamptz`, or NaN for a form this cannot place exactly as PostgreSQL
 * would (an offset, more than six decimals, a leap second, a day that does
 * not exist, a time too far from 1970 for a double to count its microseconds).
 */
export function micros(iso: string): number {
  const m = ISO.exec(iso);
  if (!m) return Number.NaN;
  const ms = Date.parse(`${m[1]}Z`);
  if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 19) !== m[1]) return Number.NaN;
  const us = ms * 1000 + Number((m[2] ?? '').padEnd(6, '0'));
  return Number.isSafeInteger(us) ? us : Number.NaN;
}

/** The ISO 8601 form of a time in microseconds, all six decimals kept. */
export function isoOfMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  return `${new Date(ms).toISOString().slice(0, -1)}${String(us - ms * 1000).padStart(3, '0')}Z`;
}

/** A reading's kind and number, as `device_history` splits it: booleans count as 0 and 1, strings have no number. */
const split = (value: ResultValue): [kind: number, num: number] =>
  typeof value === 'number' ? [NUMBER, value + 0] : typeof value === 'boolean' ? [BOOLEAN, value ? 1 : 0] : [TEXT, Number.NaN];

/** One device field's readings after `from`, in order, with the last numeric one at or before `from`. */
export class Series {
  private us = new Float64Array(64);
  private num = new Float64Array(64);
  private kind = new Uint8Array(64);
  /** Strings by index, once the series has had one. */
  private text: (string | undefined)[] | null = null;
  private head = 0;
  private tail = 0;
  /** The last numeric reading at or before `from`, as `[µs, number]`. */
  private prior: [number, number] | null = null;
  /** The event the last fed readings came from: one report may bring the same field twice (`a.b` and `{a: {b}}`). */
  private lastEvent: string | null = null;
  /** The latest window end a run asked for (µs): with the clock, how far readings may be let go. */
  lastEnd = Number.NEGATIVE_INFINITY;

  constructor(
    /** Every reading with `reportedAt` after this (µs) is held. */
    public from: number,
    /** Every event up to here is in the series. */
    public position: Position,
    /** The longest window (seconds) of the calculations it serves. */
    public horizon: number,
  ) {}

  get size(): number {
    return this.tail - this.head;
  }

  /** Whether a report at `position` (event `id`) is new to the series. */
  fresh(position: Position, id: string): boolean {
    return comparePositions(position, this.position) > 0 || this.lastEvent === id;
  }

  /** Takes a reading of the event at `position` (checked with `fresh` first). */
  add(position: Position, id: string, us: number, value: ResultValue): void {
    this.position = position;
    this.lastEvent = id;
    const [kind, num] = split(value);
    if (us <= this.from) {
      // Older than what is held: it can only become the reading before every window held here.
      if (kind !== TEXT && (this.prior === null || us > this.prior[0] || (us === this.prior[0] && num > this.prior[1]))) this.prior = [us, num];
      return;
    }
    this.insert(us, kind, num, typeof value === 'string' ? value : undefined);
  }

  /** Seeds readings given in time order (`us` ascending); `before` is the last numeric one at or before `from`. */
  seed(rows: { us: number; value: ResultValue }[], before: [number, number] | null): void {
    this.prior = before;
    for (const r of rows) {
      const [kind, num] = split(r.value);
      this.insert(r.us, kind, num, typeof r.value === 'string' ? r.value : undefined);
    }
  }

  /** Lets go of the readings at or before `us`, keeping the last numeric one of them as the reading before. */
  forget(us: number): number {
    if (us <= this.from) return 0;
    const start = this.head;
    while (this.head < this.tail && this.us[this.head]! <= us) {
      if (this.kind[this.head] !== TEXT) this.prior = [this.us[this.head]!, this.num[this.head]!];
      if (this.text) this.text[this.head] = undefined;
      this.head++;
    }
    this.from = us;
    return this.head - start;
  }

  /**
   * The statistics of the readings with `reportedAt` in (`start`, `end`] (µs),
   * as the database computes them, or null when only the database can tell:
   * the window starts before `from`, or `aggregation` is `first` or `last`
   * and its reading ties at its time with another one that PostgreSQL would
   * order by collation or scan order.
   */
  stats(start: number, end: number, aggregation: WindowAggregation): WindowStats | null {
    if (start < this.from) return null;
    const lo = this.after(start);
    const hi = Math.max(lo, this.after(end));
    if (aggregation === 'first' && hi > lo && this.tied(lo, 1)) return null;
    if (aggregation === 'last' && hi > lo && this.tied(hi - 1, -1)) return null;
    let before: number | null = this.prior ? this.prior[1] : null;
    for (let i = lo - 1; i >= this.head; i--) {
      if (this.kind[i] !== TEXT) {
        before = this.num[i]!;
        break;
      }
    }
    const stats: WindowStats = { count: hi - lo, numbers: 0, sum: null, mean: null, min: null, max: null, first: null, last: null, firstNum: null, lastNum: null, before };
    if (hi === lo) return stats;
    stats.first = this.value(lo);
    stats.last = this.value(hi - 1);
    // In time order, one addition after another, as the database's sum and avg over an index range add them.
    let numbers = 0;
    let sum = 0;
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    let first = Number.NaN;
    let last = Number.NaN;
    for (let i = lo; i < hi; i++) {
      if (this.kind[i] === TEXT) continue;
      const n = this.num[i]!;
      if (numbers === 0) first = n;
      numbers++;
      sum += n;
      last = n;
      if (n < min) min = n;
      if (n > max) max = n;
    }
    if (numbers) Object.assign(stats, { numbers, sum, mean: sum / numbers, min, max, firstNum: first, lastNum: last });
    return stats;
  }

  private value(i: number): ResultValue {
    const kind = this.kind[i];
    return kind === NUMBER ? this.num[i]! : kind === BOOLEAN ? this.num[i] === 1 : this.text![i]!;
  }

  /**
   * Whether the reading at `i`, the first (`step` 1) or last (`step` -1) of
   * a window, shares its time and its place in the database's order with a
   * different one: strings ordered by the database's collation, or a number
   * and a boolean of equal value, which only the scan order separates.
   */
  private tied(i: number, step: 1 | -1): boolean {
    const us = this.us[i]!;
    const kind = this.kind[i]!;
    for (let j = i + step; j >= this.head && j < this.tail && this.us[j] === us; j += step) {
      if (kind === TEXT) {
        if (this.kind[j] !== TEXT) return false;
        if (this.text![j] !== this.text![i]) return true;
      } else {
        if (this.kind[j] === TEXT || this.num[j] !== this.num[i]) return false;
        if (this.kind[j] !== kind) return true;
      }
    }
    return false;
  }

  /** The first index whose reading is later than `us`. */
  private after(us: number): number {
    let lo = this.head;
    let hi = this.tail;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.us[mid]! <= us) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Puts a reading in its place: after every reading at an earlier time, and among those at its time by value, numbers first. */
  private insert(us: number, kind: number, num: number, text: string | undefined): void {
    if (this.tail === this.us.length) this.room();
    let at = this.after(us);
    while (at > this.head && this.us[at - 1] === us && this.later(at - 1, kind, num, text)) at--;
    if (at < this.tail) {
      this.us.copyWithin(at + 1, at, this.tail);
      this.num.copyWithin(at + 1, at, this.tail);
      this.kind.copyWithin(at + 1, at, this.tail);
      this.text?.splice(at, 0, undefined);
    }
    this.us[at] = us;
    this.num[at] = num;
    this.kind[at] = kind;
    if (text !== undefined) {
      this.text ??= [];
      this.text[at] = text;
    }
    this.tail++;
  }

  /** Whether the reading at `i` comes after (kind, num, text) at the same time. */
  private later(i: number, kind: number, num: number, text: string | undefined): boolean {
    const other = this.kind[i]!;
    if (other === TEXT) return kind !== TEXT || this.text![i]! > text!;
    return kind !== TEXT && this.num[i]! > num;
  }

  /** Space for one more reading at the end: moves the held readings to the front, or doubles the arrays. */
  private room(): void {
    const size = this.size;
    const capacity = size * 2 > this.us.length ? this.us.length * 2 : this.us.length;
    const move = <T extends Float64Array | Uint8Array>(a: T, make: (n: number) => T): T => {
      if (capacity === a.length) {
        a.copyWithin(0, this.head, this.tail);
        return a;
      }
      const next = make(capacity);
      next.set(a.subarray(this.head, this.tail));
      return next;
    };
    this.us = move(this.us, (n) => new Float64Array(n));
    this.num = move(this.num, (n) => new Float64Array(n));
    this.kind = move(this.kind, (n) => new Uint8Array(n));
    if (this.text) this.text = this.text.slice(this.head, this.tail);
    this.head = 0;
    this.tail = size;
  }
}

/** What the windows in memory hold and how runs were answered, for `/metrics`. */
export interface WindowMemoryStats {
  series: number;
  readings: number;
  runs: { memory: number; database: number };
}

/**
 * Every series held for the reactor, within a budget of readings: a series
 * that would pass it, or that alone passes `SERIES_READINGS`, is let go and
 * left to the database for a minute before it is seeded again.
 */
export class WindowMemory {
  private readonly held = new Map<string, Series>();
  /** Series let go for their size → when (process time, ms) a seed may be tried again. */
  private readonly denied = new Map<string, number>();
  /** The longest window of the `onChange` window calculations reading each series. */
  private readonly horizons = new Map<string, number>();
  private readings = 0;
  readonly runs = { memory: 0, database: 0 };

  constructor(private readonly budget: number) {}

  get enabled(): boolean {
    return this.budget > 0;
  }

  private get seriesLimit(): number {
    return Math.min(SERIES_READINGS, this.budget);
  }

  stats(): WindowMemoryStats {
    return { series: this.held.size, readings: this.readings, runs: { ...this.runs } };
  }

  /** Forgets everything (leadership gained or lost: the next runs seed again). */
  clear(): void {
    this.held.clear();
    this.denied.clear();
    this.horizons.clear();
    this.readings = 0;
  }

  /** The longest window over a series now; 0: no `onChange` window calculation reads it any more. */
  follow(key: string, horizon: number): void {
    const series = this.held.get(key);
    if (horizon === 0) this.horizons.delete(key);
    else this.horizons.set(key, horizon);
    if (!series) return;
    // A longer window reaches before what is held: seeded again at its next run.
    if (horizon === 0 || horizon > series.horizon) this.drop(key);
    else series.horizon = horizon;
  }

  get(key: string): Series | undefined {
    return this.held.get(key);
  }

  /** Whether a run over `key` should seed it: followed, not held, not waiting after a failed fit. */
  wants(key: string, now: number): boolean {
    if (!this.enabled || !this.horizons.has(key) || this.held.has(key)) return false;
    const retry = this.denied.get(key);
    if (retry !== undefined && retry > now) return false;
    this.denied.delete(key);
    return true;
  }

  horizonOf(key: string): number {
    return this.horizons.get(key) ?? 0;
  }

  /** The most readings a seed of one series may bring. */
  room(): number {
    return Math.min(this.seriesLimit, this.budget - this.readings);
  }

  /** Holds a seeded series, or leaves it to the database when it does not fit. */
  admit(key: string, series: Series, now: number): boolean {
    if (series.size > this.room()) {
      this.denied.set(key, now + RETRY_MS);
      return false;
    }
    this.held.set(key, series);
    this.readings += series.size;
    return true;
  }

  /** Feeds a reading of the event at `position` to its series, if held; lets the series go when it outgrows the budget. */
  feed(key: string, position: Position, id: string, reportedAt: string, value: ResultValue, now: number): void {
    const series = this.held.get(key);
    if (!series || !series.fresh(position, id)) return;
    const us = micros(reportedAt);
    if (Number.isNaN(us)) {
      this.drop(key, now);
      return;
    }
    const size = series.size;
    series.add(position, id, us, value);
    this.readings += series.size - size;
    if (series.size > this.seriesLimit || this.readings > this.budget) this.drop(key, now);
  }

  /** Lets go of readings no run is expected to need: before the longest window and its slack, from the clock or the latest run, whichever is earlier. */
  forget(key: string, clock: number): void {
    const series = this.held.get(key);
    if (!series) return;
    const bound = Math.min(clock, series.lastEnd) - (series.horizon + slackOf(series.horizon)) * 1e6;
    if (Number.isFinite(bound)) this.readings -= series.forget(bound);
  }

  /** Lets a series go: seeded again at its next run (after `RETRY_MS` when `denied` at `now`). */
  drop(key: string, now?: number): void {
    const series = this.held.get(key);
    if (series) {
      this.readings -= series.size;
      this.held.delete(key);
    }
    if (now !== undefined) this.denied.set(key, now + RETRY_MS);
  }

  /** Lets go of every series of a device (deleted, or registered again): the next run seeds from the read models. */
  dropDevice(deviceId: string): void {
    const prefix = `${deviceId}/`;
    for (const key of [...this.held.keys()]) if (key.startsWith(prefix)) this.drop(key);
  }
}
