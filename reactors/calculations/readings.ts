import { sql, type Kysely } from 'kysely';
import type { Database } from '../../projections/database.js';
import type { Reading, ResultValue, WindowStats } from '../../domain/calculations/aggregate.js';
import type { Position } from '../../domain/shared/events.js';
import { loadCheckpoint } from '../../domain/eventstore/subscriber.js';

/**
 * The order of readings: by `reportedAt`, and readings of one device field
 * with the same `reportedAt` by value, so `first`, `last` and the latest
 * reading never depend on how the database happens to scan them.
 */
const ASC = sql`h.time ASC, h.num ASC, h.str ASC`;
const DESC = sql`h.time DESC, h.num DESC, h.str DESC`;

export interface WindowQuery {
  deviceId: string;
  field: string;
  /** The window's end (ISO 8601), included; its start, `end − seconds`, is not. */
  end: string;
  seconds: number;
}

/**
 * The statistics of each window, in one statement for all of them. Every
 * part reads one field's series (`device_series`, inlined by PostgreSQL), an
 * index range over `device_history (device_id, time)`, so first, last and the
 * reading before the window stop at the first report holding the field.
 */
export async function windowStats(db: Kysely<Database>, queries: WindowQuery[]): Promise<WindowStats[]> {
  if (queries.length === 0) return [];
  const series = sql`device_series(r.d, r.f) h`;
  const inside = sql`h.time > r.t - make_interval(secs => r.s) AND h.time <= r.t`;
  const { rows } = await sql<{
    i: number;
    count: number;
    numbers: number;
    sum: number | null;
    mean: number | null;
    min: number | null;
    max: number | null;
    first: ResultValue | null;
    last: ResultValue | null;
    first_num: number | null;
    last_num: number | null;
    before: number | null;
  }>`SELECT r.i, w.count, w.numbers, w.sum, w.mean, w.min, w.max,
      (SELECT h.value FROM ${series} WHERE ${inside} ORDER BY ${ASC} LIMIT 1) AS first,
      (SELECT h.value FROM ${series} WHERE ${inside} ORDER BY ${DESC} LIMIT 1) AS last,
      (SELECT h.num FROM ${series} WHERE ${inside} AND h.num IS NOT NULL ORDER BY ${ASC} LIMIT 1) AS first_num,
      (SELECT h.num FROM ${series} WHERE ${inside} AND h.num IS NOT NULL ORDER BY ${DESC} LIMIT 1) AS last_num,
      (SELECT h.num FROM ${series} WHERE h.num IS NOT NULL AND h.time <= r.t - make_interval(secs => r.s) ORDER BY ${DESC} LIMIT 1) AS before
    FROM unnest(${queries.map((_, i) => i)}::int[], ${queries.map((q) => q.deviceId)}::text[], ${queries.map((q) => q.field)}::text[],
      ${queries.map((q) => q.end)}::timestamptz[], ${queries.map((q) => q.seconds)}::float8[]) AS r(i, d, f, t, s)
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS count, count(h.num)::int AS numbers, sum(h.num) AS sum, sum(h.num) / nullif(count(h.num), 0) AS mean, min(h.num) AS min, max(h.num) AS max
      FROM ${series} WHERE ${inside}) w`.execute(db);
  const out: WindowStats[] = new Array(queries.length);
  for (const r of rows) {
    out[r.i] = { count: r.count, numbers: r.numbers, sum: r.sum, mean: r.mean, min: r.min, max: r.max, first: r.first, last: r.last, firstNum: r.first_num, lastNum: r.last_num, before: r.before };
  }
  return out;
}

export interface LatestQuery {
  deviceId: string;
  field: string;
  /** The latest reading at or before this time counts (ISO 8601). */
  at: string;
}

/** The most recent reading of each field at its time, or null where there is none; one statement for all. */
export async function latestReadings(db: Kysely<Database>, queries: LatestQuery[]): Promise<(Reading | null)[]> {
  if (queries.length === 0) return [];
  const { rows } = await sql<{ i: number; num: number | null; value: ResultValue | null }>`
    SELECT r.i, v.num, v.value
    FROM unnest(${queries.map((_, i) => i)}::int[], ${queries.map((q) => q.deviceId)}::text[], ${queries.map((q) => q.field)}::text[],
      ${queries.map((q) => q.at)}::timestamptz[]) AS r(i, d, f, t)
    LEFT JOIN LATERAL (
      SELECT h.num, h.value FROM device_series(r.d, r.f) h
      WHERE h.time <= r.t ORDER BY ${DESC} LIMIT 1) v ON true`.execute(db);
  const out: (Reading | null)[] = new Array(queries.length).fill(null);
  for (const r of rows) if (r.value !== null) out[r.i] = { num: r.num, value: r.value };
  return out;
}

/** A series: one source field of one device, with the windows (all of one length) a batch needs over it. */
export interface SeriesQuery {
  deviceId: string;
  field: string;
  seconds: number;
  /** The windows' ends (ISO 8601). */
  ends: string[];
}

interface Row {
  /** `reportedAt` in microseconds since the epoch: the resolution of `timestamptz`, so window bounds compare exactly. */
  us: number;
  num: number | null;
  value: ResultValue;
}

const micros = (iso: string): number => Date.parse(iso) * 1000;

/**
 * The statistics of many windows over the same series, for a batch in which
 * a source reported several times: its readings from the earliest window's
 * start to the latest window's end are read once (one statement for every
 * series), and each window is aggregated here, in time order as the
 * database would. Per window the cost is a pass over its readings in
 * memory, instead of a scan of the index.
 */
export async function seriesWindowStats(db: Kysely<Database>, series: SeriesQuery[]): Promise<WindowStats[][]> {
  if (series.length === 0) return [];
  const bounds = series.map((s) => {
    const ends = s.ends.map(micros);
    // Loops, not Math.min(...ends): a spread has a stack's worth of arguments at most.
    const first = ends.reduce((a, b) => Math.min(a, b));
    const last = ends.reduce((a, b) => Math.max(a, b));
    return { from: new Date((first - s.seconds * 1e6) / 1000).toISOString(), to: new Date(last / 1000).toISOString() };
  });
  const params = sql`unnest(${series.map((_, i) => i)}::int[], ${series.map((s) => s.deviceId)}::text[], ${series.map((s) => s.field)}::text[],
      ${bounds.map((b) => b.from)}::timestamptz[], ${bounds.map((b) => b.to)}::timestamptz[]) AS r(g, d, f, a, b)`;
  const [{ rows }, { rows: before }] = await Promise.all([
    sql<{ g: number; us: string; num: number | null; value: ResultValue }>`
      SELECT r.g, (extract(epoch FROM h.time) * 1000000)::bigint::text AS us, h.num, h.value
      FROM ${params} CROSS JOIN LATERAL device_series(r.d, r.f) h WHERE h.time > r.a AND h.time <= r.b
      ORDER BY r.g, ${ASC}`.execute(db),
    sql<{ g: number; us: string | null; num: number | null }>`
      SELECT r.g, (extract(epoch FROM p.time) * 1000000)::bigint::text AS us, p.num FROM ${params}
      LEFT JOIN LATERAL (SELECT h.time, h.num FROM device_series(r.d, r.f) h WHERE h.num IS NOT NULL AND h.time <= r.a
        ORDER BY ${DESC} LIMIT 1) p ON true`.execute(db),
  ]);
  const readings: Row[][] = series.map(() => []);
  for (const r of rows) readings[r.g]!.push({ us: Number(r.us), num: r.num, value: r.value });
  return series.map((s, g) => {
    const all = readings[g]!;
    const previous = before.find((b) => b.g === g);
    return s.ends.map((end) => aggregate(all, micros(end) - s.seconds * 1e6, micros(end), previous?.num ?? null));
  });
}

/** The first index whose reading is later than `us` (readings in time order). */
function after(rows: Row[], us: number): number {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (rows[mid]!.us <= us) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The statistics of the readings in (start, end]; `earlier` is the last numeric reading before the fetched ones. */
function aggregate(rows: Row[], start: number, end: number, earlier: number | null): WindowStats {
  const lo = after(rows, start);
  const hi = after(rows, end);
  let before = earlier;
  for (let i = lo - 1; i >= 0; i--) {
    if (rows[i]!.num !== null) {
      before = rows[i]!.num;
      break;
    }
  }
  const stats: WindowStats = { count: hi - lo, numbers: 0, sum: null, mean: null, min: null, max: null, first: null, last: null, firstNum: null, lastNum: null, before };
  if (hi > lo) {
    stats.first = rows[lo]!.value;
    stats.last = rows[hi - 1]!.value;
  }
  let sum = 0;
  for (let i = lo; i < hi; i++) {
    const n = rows[i]!.num;
    if (n === null) continue;
    if (stats.numbers === 0) {
      stats.firstNum = n;
      stats.min = n;
      stats.max = n;
    }
    stats.numbers++;
    sum += n;
    stats.lastNum = n;
    if (n < stats.min!) stats.min = n;
    if (n > stats.max!) stats.max = n;
  }
  if (stats.numbers) {
    stats.sum = sum;
    stats.mean = sum / stats.numbers;
  }
  return stats;
}

/** A series to hold in memory: its readings with `reportedAt` after `after` (ISO 8601, to the microsecond), if there are at most `limit`. */
export interface SeedQuery {
  deviceId: string;
  field: string;
  after: string;
  limit: number;
}

export interface Seed {
  /** Whether the device exists: the read models keep no readings of a deleted one. */
  exists: boolean;
  /** The readings after `after`, in time order; empty when unfit. */
  rows: { us: number; value: ResultValue }[];
  /** Not to be held: more than `limit` readings, or a time too far from 1970 for a double to count its microseconds. */
  unfit: boolean;
  /** The last numeric reading at or before `after`, as `[µs, number]`. */
  before: [number, number] | null;
}

/**
 * Seeds for the windows in memory (`windows.ts`), in one snapshot with the
 * read models' checkpoint (`checkpoint`, the projection runner's name): the
 * readings are exactly those of the events up to the position returned, so
 * the reactor can feed every later event without counting one twice.
 */
export async function seedSeries(db: Kysely<Database>, checkpoint: string, queries: SeedQuery[]): Promise<{ position: Position | null; seeds: Seed[] }> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (tx) => {
      const position = await loadCheckpoint(tx, checkpoint);
      const params = sql`unnest(${queries.map((_, i) => i)}::int[], ${queries.map((q) => q.deviceId)}::text[], ${queries.map((q) => q.field)}::text[],
        ${queries.map((q) => q.after)}::timestamptz[], ${queries.map((q) => q.limit)}::int[]) AS r(g, d, f, a, n)`;
      const { rows } = await sql<{ g: number; us: string; value: ResultValue }>`
        SELECT r.g, h.us, h.value FROM ${params}
        CROSS JOIN LATERAL (SELECT (extract(epoch FROM h.time) * 1000000)::bigint::text AS us, h.value FROM device_series(r.d, r.f) h
          WHERE h.time > r.a ORDER BY h.time LIMIT r.n + 1) h`.execute(tx);
      const { rows: before } = await sql<{ g: number; us: string | null; num: number | null }>`
        SELECT r.g, p.us, p.num FROM ${params}
        LEFT JOIN LATERAL (SELECT (extract(epoch FROM h.time) * 1000000)::bigint::text AS us, h.num FROM device_series(r.d, r.f) h
          WHERE h.num IS NOT NULL AND h.time <= r.a ORDER BY ${DESC} LIMIT 1) p ON true`.execute(tx);
      const ids = [...new Set(queries.map((q) => q.deviceId))];
      const existing = new Set((await tx.selectFrom('devices').select('id').where('id', 'in', ids).execute()).map((r) => r.id));
      const seeds: Seed[] = queries.map((q) => ({ exists: existing.has(q.deviceId), rows: [], unfit: false, before: null }));
      for (const r of rows) {
        const us = Number(r.us);
        if (!Number.isSafeInteger(us)) seeds[r.g]!.unfit = true;
        seeds[r.g]!.rows.push({ us, value: r.value });
      }
      for (const r of before) {
        if (r.us === null || r.num === null) continue;
        const us = Number(r.us);
        if (!Number.isSafeInteger(us)) seeds[r.g]!.unfit = true;
        seeds[r.g]!.before = [us, r.num];
      }
      for (const [g, seed] of seeds.entries()) {
        if (seed.rows.length > queries[g]!.limit) seed.unfit = true;
        if (seed.unfit) seed.rows = [];
      }
      return { position, seeds };
    });
}
