import { sql, type Kysely } from 'kysely';
import { ANALYTICS_ROLE } from './0052_analytics.js';

/**
 * History as one row per report instead of one row per field: `fields` maps
 * each value's dotted path to the value as reported (a number, a boolean or a
 * string). A report of eight fields was eight rows and eight entries of the
 * `(device_id, field, time)` index, about 40 µs of PostgreSQL per report; it
 * is now one row and one index entry, about 12 µs (docs/benchmarks.md).
 *
 * Readers take one field's series through `device_series(device, field)`, a
 * SQL function PostgreSQL inlines into the calling query: the columns the
 * per-field rows had (`time`, `num` with booleans as 0 and 1, `bool`, `str`)
 * and `value`, the value as reported (JSON), so conditions on `time` still
 * become the bounds of an index range over `(device_id, time)`.
 *
 * The rows already stored are regrouped by device and `reportedAt`. Every
 * reading is kept: readings of one field at one time (two reports with the
 * same `reportedAt`, or a report bringing a path twice) go to rows of their
 * own with that time, as the projection writes them. Only the boundaries
 * between reports of one device at one time are not known any more, and no
 * reader uses them; `npm run rebuild -- device_history` makes the history
 * again from the events, one row per report.
 */

/** The per-field columns of a value in `fields`, as the readers and the analytics view see them. */
const COLUMNS = (value: string) => `
  CASE jsonb_typeof(${value}) WHEN 'number' THEN (${value})::float8 WHEN 'boolean' THEN ((${value})::boolean)::int::float8 END AS num,
  CASE WHEN jsonb_typeof(${value}) = 'boolean' THEN (${value})::boolean END AS bool,
  CASE WHEN jsonb_typeof(${value}) = 'string' THEN (${value}) #>> '{}' END AS str`;

/** The default privileges of `0052_analytics` grant a new view already; this covers a role created after them. */
async function grantToAnalytics(db: Kysely<unknown>): Promise<void> {
  await sql`DO $$
    BEGIN
      IF EXISTS (SELECT FROM pg_roles WHERE rolname = ${sql.lit(ANALYTICS_ROLE)}) THEN
        GRANT SELECT ON analytics.device_history TO ${sql.raw(ANALYTICS_ROLE)};
      END IF;
    END $$`.execute(db);
}

const ANALYTICS_VIEW = (columns: string) => sql.raw(`CREATE VIEW analytics.device_history AS ${columns}`);

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DROP VIEW analytics.device_history`.execute(db);
  await sql`ALTER TABLE device_history RENAME TO device_history_fieldwise`.execute(db);
  await sql`CREATE TABLE device_history (
    device_id text NOT NULL,
    time timestamptz NOT NULL,
    fields jsonb NOT NULL
  )`.execute(db);
  await sql`INSERT INTO device_history (device_id, time, fields)
    SELECT device_id, time, jsonb_object_agg(field, CASE WHEN bool IS NOT NULL THEN to_jsonb(bool) WHEN num IS NOT NULL THEN to_jsonb(num) ELSE to_jsonb(str) END)
    FROM (SELECT *, row_number() OVER (PARTITION BY device_id, field, time) AS n FROM device_history_fieldwise) h
    GROUP BY device_id, time, n`.execute(db);
  await sql`DROP TABLE device_history_fieldwise`.execute(db);
  await sql`CREATE INDEX device_history_reports ON device_history (device_id, time)`.execute(db);

  await sql.raw(`CREATE FUNCTION device_series(text, text) RETURNS TABLE ("time" timestamptz, num float8, bool boolean, str text, value jsonb)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
      SELECT h.time, ${COLUMNS('h.fields -> $2')}, h.fields -> $2
      FROM device_history h WHERE h.device_id = $1 AND h.fields ? $2
    $$`).execute(db);

  await ANALYTICS_VIEW(`SELECT h.device_id, e.key AS field, h.time, e.num AS value, e.str AS value_text, e.bool AS value_bool
    FROM public.device_history h CROSS JOIN LATERAL (SELECT key, ${COLUMNS('value')} FROM jsonb_each(h.fields)) e`).execute(db);
  await grantToAnalytics(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP VIEW analytics.device_history`.execute(db);
  await sql`DROP FUNCTION device_series(text, text)`.execute(db);
  await sql`ALTER TABLE device_history RENAME TO device_history_reportwise`.execute(db);
  await sql`CREATE TABLE device_history (
    device_id text NOT NULL,
    field text NOT NULL,
    time timestamptz NOT NULL,
    num double precision,
    bool boolean,
    str text
  )`.execute(db);
  await sql.raw(`INSERT INTO device_history (device_id, field, time, num, bool, str)
    SELECT h.device_id, e.key, h.time, e.num, e.bool, e.str
    FROM device_history_reportwise h CROSS JOIN LATERAL (SELECT key, ${COLUMNS('value')} FROM jsonb_each(h.fields)) e`).execute(db);
  await sql`DROP TABLE device_history_reportwise`.execute(db);
  await sql`CREATE INDEX device_history_series ON device_history (device_id, field, time)`.execute(db);
  await ANALYTICS_VIEW(`SELECT h.device_id, h.field, h.time, h.num AS value, h.str AS value_text, h.bool AS value_bool
    FROM public.device_history h`).execute(db);
  await grantToAnalytics(db);
}
