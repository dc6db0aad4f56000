import { sql, type Kysely } from 'kysely';
import type { Database } from '../../projections/database.js';
import type { Reading, ResultValue, WindowStats } from '../../domain/calculations/aggregate.js';

/** A reading's value as reported: the boolean, the number or the string `device_history` holds. */
const VALUE = sql`CASE WHEN h.bool IS NOT NULL THEN to_jsonb(h.bool) WHEN h.num IS NOT NULL THEN to_jsonb(h.num) ELSE to_jsonb(h.str) END`;

export interface WindowQuery {
  deviceId: string;
  field: string;
  /** The window's end (ISO 8601), included; its start, `end − seconds`, is not. */
  end: string;
  seconds: number;
}

/**
 * The statistics of each window, in one statement for all of them. Every
 * part is an index range over `device_history (device_id, field, time)`, so
 * first, last and the reading before the window are single index lookups.
 */
export async function windowStats(db: Kysely<Database>, queries: WindowQuery[]): Promise<WindowStats[]> {
  if (queries.length === 0) return [];
  const series = sql`h.device_id = r.d AND h.field = r.f`;
  const inside = sql`${series} AND h.time > r.t - make_interval(secs => r.s) AND h.time <= r.t`;
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
      (SELECT ${VALUE} FROM device_history h WHERE ${inside} ORDER BY h.time ASC LIMIT 1) AS first,
      (SELECT ${VALUE} FROM device_history h WHERE ${inside} ORDER BY h.time DESC LIMIT 1) AS last,
      (SELECT h.num FROM device_history h WHERE ${inside} AND h.num IS NOT NULL ORDER BY h.time ASC LIMIT 1) AS first_num,
      (SELECT h.num FROM device_history h WHERE ${inside} AND h.num IS NOT NULL ORDER BY h.time DESC LIMIT 1) AS last_num,
      (SELECT h.num FROM device_history h WHERE ${series} AND h.num IS NOT NULL AND h.time <= r.t - make_interval(secs => r.s) ORDER BY h.time DESC LIMIT 1) AS before
    FROM unnest(${queries.map((_, i) => i)}::int[], ${queries.map((q) => q.deviceId)}::text[], ${queries.map((q) => q.field)}::text[],
      ${queries.map((q) => q.end)}::timestamptz[], ${queries.map((q) => q.seconds)}::float8[]) AS r(i, d, f, t, s)
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS count, count(h.num)::int AS numbers, sum(h.num) AS sum, avg(h.num) AS mean, min(h.num) AS min, max(h.num) AS max
      FROM device_history h WHERE ${inside}) w`.execute(db);
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
      SELECT h.num, ${VALUE} AS value FROM device_history h
      WHERE h.device_id = r.d AND h.field = r.f AND h.time <= r.t ORDER BY h.time DESC LIMIT 1) v ON true`.execute(db);
  const out: (Reading | null)[] = new Array(queries.length).fill(null);
  for (const r of rows) if (r.value !== null) out[r.i] = { num: r.num, value: r.value };
  return out;
}
