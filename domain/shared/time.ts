/**
 * The instants the platform stores: years 0001 to 9999 in UTC. PostgreSQL's
 * `timestamptz` has no year 0, and times kept as ISO text compare in order only
 * with four-digit years; a local time near either end can cross it in UTC
 * (`9999-12-31T23:59:59-01:00` is in year 10000).
 */
const FIRST = Date.parse('0001-01-01T00:00:00Z');
const LAST = Date.parse('9999-12-31T23:59:59.999Z');

/** True when `ms` (milliseconds since the epoch) is an instant the platform can store. */
export const storable = (ms: number): boolean => ms >= FIRST && ms <= LAST;
