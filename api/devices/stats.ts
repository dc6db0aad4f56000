import { Router } from 'express';
import { sql, type RawBuilder } from 'kysely';
import type { Deps } from '../deps.js';
import { principalOf } from '../http.js';
import { requireAccess } from '../access.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { DEVICE_NOT_FOUND } from '../../domain/devices/device.js';

export const CALCULATIONS = ['mean', 'timeWeightedMean', 'min', 'max', 'first', 'last', 'count', 'sum', 'difference'] as const;
export type Calculation = (typeof CALCULATIONS)[number];

/** At most this many raw points or buckets per answer. */
const MAX_POINTS = 100_000;
const DAY = 86_400;

interface Query {
  device: string;
  field: string;
  start: number;
  end: number;
  distance: number;
}

/** PostgreSQL's `numeric_value_out_of_range`. */
const OUT_OF_RANGE = '22003';

/** One SQL statement per calculation; buckets are `distance` seconds wide, aligned on `start`, and empty ones are left out. */
function bucketed(q: Query, calculation: Calculation): RawBuilder<{ time: Date; value: unknown }> {
  const width = sql`make_interval(secs => ${q.distance})`;
  const origin = sql`to_timestamp(${q.start})`;
  // One field's readings (migrations/0053_history_per_report.ts), inlined by PostgreSQL: `time` bounds an index range.
  const series = sql`device_series(${q.device}, ${q.field})`;
  const range = sql`time >= to_timestamp(${q.start}) AND time < to_timestamp(${q.end})`;
  const bucket = sql`date_bin(${width}, time, ${origin})`;
  const simple = (agg: RawBuilder<unknown>, numeric = true) =>
    sql<{ time: Date; value: unknown }>`SELECT ${bucket} AS time, ${agg} AS value FROM ${series}
      WHERE ${range} ${numeric ? sql`AND num IS NOT NULL` : sql``} GROUP BY 1 ORDER BY 1`;
  switch (calculation) {
    case 'mean':
      // In numeric: float8's avg also sums the squares, which overflow from about 1e154 though the mean is in range.
      return simple(sql`avg(num::numeric)::float8`);
    case 'min':
      return simple(sql`min(num)`);
    case 'max':
      return simple(sql`max(num)`);
    case 'sum':
      return simple(sql`sum(num)`);
    case 'count':
      return simple(sql`count(*)`, false);
    case 'first':
      return simple(sql`(array_agg(value ORDER BY time))[1]`, false);
    case 'last':
      return simple(sql`(array_agg(value ORDER BY time DESC))[1]`, false);
    case 'difference':
      // The change over a bucket: its last value minus the last value before it (the previous bucket's, or the last before `start`).
      return sql<{ time: Date; value: unknown }>`WITH b AS (
          SELECT ${bucket} AS bucket, (array_agg(num ORDER BY time))[1] AS first, (array_agg(num ORDER BY time DESC))[1] AS last
          FROM ${series} WHERE ${range} AND num IS NOT NULL GROUP BY 1),
        before AS (SELECT num FROM ${series} WHERE num IS NOT NULL AND time < to_timestamp(${q.start}) ORDER BY time DESC LIMIT 1)
        SELECT bucket AS time, last - coalesce(lag(last) OVER (ORDER BY bucket), (SELECT num FROM before), first) AS value FROM b ORDER BY bucket`;
    case 'timeWeightedMean':
      // Each value holds until the next one (the last until `end` or now); the value before `start` holds into the first bucket.
      return sql<{ time: Date; value: unknown }>`WITH pts AS (
          (SELECT to_timestamp(${q.start}) AS t, num FROM ${series}
            WHERE num IS NOT NULL AND time < to_timestamp(${q.start}) ORDER BY time DESC LIMIT 1)
          UNION ALL
          SELECT time, num FROM ${series} WHERE ${range} AND num IS NOT NULL),
        seg AS (SELECT t AS t0, lead(t, 1, least(to_timestamp(${q.end}), now())) OVER (ORDER BY t) AS t1, num FROM pts),
        parts AS (
          SELECT b AS bucket, num, extract(epoch FROM least(t1, b + ${width}) - greatest(t0, b))::float8 AS w
          FROM seg CROSS JOIN LATERAL generate_series(date_bin(${width}, t0, ${origin}), t1, ${width}) AS b
          WHERE t1 > t0)
        SELECT bucket AS time, (sum(num::numeric * w::numeric) / sum(w::numeric))::float8 AS value FROM parts WHERE w > 0 GROUP BY bucket ORDER BY bucket`;
    default: {
      const _: never = calculation;
      return _;
    }
  }
}

export function statsRoutes(deps: Deps): Router {
  const router = Router();

  router.get('/api/iotnodes/:id/stats/fields', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', DEVICE_NOT_FOUND);
    const rows = await deps.db.selectFrom('device_history_fields').select('field').where('device_id', '=', id).orderBy('field').execute();
    res.json(rows.map((r) => r.field));
  });

  router.get('/api/iotnodes/:id/stats', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', DEVICE_NOT_FOUND);
    const end = req.query.end !== undefined ? Number(req.query.end) : Math.ceil(deps.clock().getTime() / 1000);
    const start = req.query.start !== undefined ? Number(req.query.start) : end - DAY;
    if (start >= end) throw ValidationError.field('start', 'must be before end');
    const distance = req.query.distance !== undefined ? Number(req.query.distance) : null;
    const query = { device: id, field: String(req.query.measurement), start, end, distance: distance ?? 0 };
    let rows: { time: Date; value: unknown }[];
    if (distance === null) {
      ({ rows } = await sql<{ time: Date; value: unknown }>`SELECT time, value FROM device_series(${id}, ${query.field})
        WHERE time >= to_timestamp(${start}) AND time < to_timestamp(${end})
        ORDER BY time LIMIT ${MAX_POINTS}`.execute(deps.db));
    } else {
      if ((end - start) / distance > MAX_POINTS) throw ValidationError.field('distance', `gives more than ${MAX_POINTS} buckets between start and end`);
      const calculation = (req.query.calculation ?? 'mean') as Calculation;
      try {
        ({ rows } = await bucketed(query, calculation).execute(deps.db));
      } catch (err) {
        // A sum or a difference of values near the limits of a 64-bit float has no 64-bit answer.
        if ((err as { code?: string }).code === OUT_OF_RANGE) throw ValidationError.field('calculation', `${calculation} of ${query.field} is out of the range of a 64-bit floating-point number`);
        throw err;
      }
    }
    res.json(rows.map((r) => ({ time: new Date(r.time).toISOString(), value: r.value })));
  });

  return router;
}
