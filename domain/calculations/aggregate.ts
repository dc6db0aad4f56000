import type { LastValueAggregation, WindowAggregation } from './calculation.js';

/** A result value: a number, or for `first` and `last` whatever the reading was. */
export type ResultValue = number | string | boolean;

/**
 * A reading as `device_history` keeps it: `num` for numbers and booleans (as
 * 0 or 1, so numeric aggregations cover both), `value` as reported.
 */
export interface Reading {
  num: number | null;
  value: ResultValue;
}

/**
 * What the window's readings add up to, computed by the database over
 * `reportedAt` in (end − seconds, end]: `count` readings of any type,
 * `numbers` of them numeric, their sum, mean, min and max, the first and
 * last reading, the first and last numeric one, and the last numeric reading
 * before the window (for `difference`).
 */
export interface WindowStats {
  count: number;
  numbers: number;
  sum: number | null;
  mean: number | null;
  min: number | null;
  max: number | null;
  first: ResultValue | null;
  last: ResultValue | null;
  firstNum: number | null;
  lastNum: number | null;
  before: number | null;
}

const finite = (v: number | null): number | null => (v !== null && Number.isFinite(v) ? v : null);

/**
 * A window's result, or null when there is nothing to write (no numeric
 * reading for a numeric aggregation, no reading for `first` or `last`).
 * `count` is 0 for an empty window. `difference` is the change over the
 * window: its last numeric reading minus the last one before it, or minus
 * its own first when none came before (as `GET …/stats` buckets do).
 */
export function windowResult(aggregation: WindowAggregation, s: WindowStats): ResultValue | null {
  switch (aggregation) {
    case 'count':
      return s.count;
    case 'sum':
      return s.numbers ? finite(s.sum) : null;
    case 'mean':
      return s.numbers ? finite(s.mean) : null;
    case 'min':
      return s.numbers ? finite(s.min) : null;
    case 'max':
      return s.numbers ? finite(s.max) : null;
    case 'first':
      return s.first;
    case 'last':
      return s.last;
    case 'difference':
      return s.lastNum === null ? null : finite(s.lastNum - (s.before ?? s.firstNum ?? s.lastNum));
    default: {
      const _: never = aggregation;
      return _;
    }
  }
}

/**
 * A `lastValue` result over the most recent reading of each source (null
 * where a source has none yet): `count` is how many sources have a reading;
 * the others aggregate the numeric ones, and are null when there is none.
 */
export function lastValueResult(aggregation: LastValueAggregation, latest: (Reading | null)[]): ResultValue | null {
  const present = latest.filter((r): r is Reading => r !== null);
  if (aggregation === 'count') return present.length;
  const nums = present.flatMap((r) => (r.num !== null && Number.isFinite(r.num) ? [r.num] : []));
  if (nums.length === 0) return null;
  switch (aggregation) {
    case 'sum':
      return finite(nums.reduce((a, b) => a + b, 0));
    case 'mean':
      return finite(nums.reduce((a, b) => a + b, 0) / nums.length);
    case 'min':
      return Math.min(...nums);
    case 'max':
      return Math.max(...nums);
    default: {
      const _: never = aggregation;
      return _;
    }
  }
}
