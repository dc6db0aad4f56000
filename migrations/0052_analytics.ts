import { sql, type Kysely } from 'kysely';

/** The read-only role analytics readers log in through (or are granted); cluster-wide, like every PostgreSQL role. */
export const ANALYTICS_ROLE = 'platform_analytics';

/**
 * The `analytics` schema: documented views over the read models
 * (docs/analytics.md), the interface for analytics readers. The tables behind
 * them may change; the views change only by adding columns
 * (`docs/analytics.contract.json`, checked by a test). A view depends on the
 * columns it reads, so a later migration that drops or retypes one of them
 * fails until it recreates the view with the same columns.
 *
 * The role `platform_analytics` may read these views and nothing else of the
 * platform: it is created here when missing (when the platform's user may
 * create roles; otherwise a warning says how), left as it is when it exists,
 * and given `USAGE` on the schema and `SELECT` on its views.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE SCHEMA analytics`.execute(db);

  await sql`CREATE VIEW analytics.devices AS
    SELECT d.id AS device_id, d.name, d.category,
      d.doc->>'connector' AS connector_id, d.doc->>'deviceModelName' AS device_model_name,
      d.lnglat AS position, ST_X(d.lnglat) AS longitude, ST_Y(d.lnglat) AS latitude,
      d.doc - 'secret' - 'rabbitRouting' AS fields,
      d.created_by, d.created_at, d.updated_at, d.reported_at
    FROM public.devices d`.execute(db);

  await sql`CREATE VIEW analytics.device_history AS
    SELECT h.device_id, h.field, h.time, h.num AS value, h.str AS value_text, h.bool AS value_bool
    FROM public.device_history h`.execute(db);

  await sql`CREATE VIEW analytics.dashboards AS
    SELECT d.id AS dashboard_id, d.name, d.title, d.description, json_array_length(d.widgets) AS widget_count,
      d.created_by, d.created_at, d.updated_at
    FROM public.dashboards d`.execute(db);

  await sql`CREATE VIEW analytics.widgets AS
    SELECT d.id AS dashboard_id, w.value->>'id' AS widget_id, w.value->>'template' AS template,
      (w.value->>'x')::int AS x, (w.value->>'y')::int AS y, (w.value->>'width')::int AS width, (w.value->>'height')::int AS height,
      (w.value->'settings')::jsonb AS settings, (w.ordinality - 1)::int AS position
    FROM public.dashboards d, json_array_elements(d.widgets) WITH ORDINALITY AS w(value, ordinality)`.execute(db);

  await sql`CREATE VIEW analytics.logs AS
    SELECT l.id AS log_id, l.resource_id, l.resource_type, l.time, l.type, l.priority, l.category, l.message, l.data, l.expires_at
    FROM public.device_logs l
    WHERE l.expires_at IS NULL OR l.expires_at > now()`.execute(db);

  await sql`CREATE VIEW analytics.geofences AS
    SELECT g.id AS geofence_id, g.geom AS fence, g.fence AS fence_geojson, g.ref AS tracker_device_id, g.created_by, g.created_at, g.updated_at
    FROM public.geofences g`.execute(db);

  await sql`CREATE VIEW analytics.translators AS
    SELECT t.id AS translator_id, t.name, t.version, t.major, t.minor, t.patch, t.prerelease, t.api_version, t.description,
      t.device_model_name, t.created_by, t.created_at
    FROM public.translators t`.execute(db);

  // Which translator versions devices run now, resolved as ingest resolves them (domain/translators/preferences.ts):
  // the first preference is the decoder, the others chained; without preferences, the release matching deviceModelName.
  await sql`CREATE VIEW analytics.translators_in_use AS
    WITH listed AS (
      SELECT d.id AS device_id, p.value AS preference, p.ordinality
      FROM public.devices d,
        jsonb_array_elements(CASE WHEN jsonb_typeof(d.doc->'translatorPreferences') = 'array' THEN d.doc->'translatorPreferences' ELSE '[]'::jsonb END)
          WITH ORDINALITY AS p(value, ordinality)
      WHERE jsonb_typeof(p.value) = 'object' AND jsonb_typeof(p.value->'name') = 'string'
        AND jsonb_typeof(p.value->'version') = 'string' AND jsonb_typeof(p.value->'upgradePolicy') = 'string'
    ),
    wanted AS (
      SELECT l.device_id, (row_number() OVER (PARTITION BY l.device_id ORDER BY l.ordinality) - 1)::int AS position, l.preference,
        v[1]::bigint AS major, v[2]::bigint AS minor, v[3]::bigint AS patch, v[4] IS NOT NULL AS prerelease,
        split_part(l.preference->>'version', '+', 1) AS precedence
      FROM listed l
        LEFT JOIN LATERAL regexp_match(l.preference->>'version', '^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\\+[0-9A-Za-z.-]+)?$') v ON true
    ),
    by_preference AS (
      SELECT DISTINCT ON (w.device_id, w.position) w.device_id, t.id AS translator_id, w.position
      FROM wanted w
      JOIN public.translators t ON t.name = w.preference->>'name'
        AND (NOT w.preference ? 'userId' OR t.created_by = w.preference->>'userId')
        AND w.major IS NOT NULL
        AND (split_part(t.version, '+', 1) = w.precedence
          OR (NOT t.prerelease
            AND ((t.major, t.minor, t.patch) > (w.major, w.minor, w.patch) OR ((t.major, t.minor, t.patch) = (w.major, w.minor, w.patch) AND w.prerelease))
            AND CASE w.preference->>'upgradePolicy'
                  WHEN 'patch' THEN t.major = w.major AND t.minor = w.minor
                  WHEN 'minor' THEN t.major = w.major
                  WHEN 'all' THEN true
                  ELSE false END))
      ORDER BY w.device_id, w.position, t.major DESC, t.minor DESC, t.patch DESC, t.prerelease, t.created_at, t.id
    ),
    by_model AS (
      SELECT DISTINCT ON (d.id) d.id AS device_id, t.id AS translator_id
      FROM public.devices d
      JOIN public.translators t ON t.device_model_name = d.doc->>'deviceModelName' AND NOT t.prerelease
      WHERE NOT EXISTS (SELECT 1 FROM listed l WHERE l.device_id = d.id)
      ORDER BY d.id, t.major DESC, t.minor DESC, t.patch DESC, t.created_at, t.id
    )
    SELECT u.device_id, u.translator_id, t.name AS translator_name, t.version,
      CASE WHEN u.position = 0 THEN 'decoder' ELSE 'chained' END AS role, u.position, u.resolved_by
    FROM (
      SELECT device_id, translator_id, position, 'translatorPreferences' AS resolved_by FROM by_preference
      UNION ALL
      SELECT device_id, translator_id, 0, 'deviceModelName' FROM by_model
    ) u JOIN public.translators t ON t.id = u.translator_id`.execute(db);

  await sql`DO $$
    BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = ${sql.lit(ANALYTICS_ROLE)}) THEN
        BEGIN
          CREATE ROLE ${sql.raw(ANALYTICS_ROLE)} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;
        EXCEPTION
          WHEN duplicate_object OR unique_violation THEN NULL; -- created meanwhile by another database's migration
          WHEN insufficient_privilege THEN
            RAISE WARNING 'the role ${sql.raw(ANALYTICS_ROLE)} was not created: this user may not create roles; create it (docs/analytics.md) and grant it USAGE on schema analytics and SELECT on its views';
        END;
      END IF;
      IF EXISTS (SELECT FROM pg_roles WHERE rolname = ${sql.lit(ANALYTICS_ROLE)}) THEN
        GRANT USAGE ON SCHEMA analytics TO ${sql.raw(ANALYTICS_ROLE)};
        GRANT SELECT ON ALL TABLES IN SCHEMA analytics TO ${sql.raw(ANALYTICS_ROLE)};
        ALTER DEFAULT PRIVILEGES IN SCHEMA analytics GRANT SELECT ON TABLES TO ${sql.raw(ANALYTICS_ROLE)};
      END IF;
    END $$`.execute(db);
}

/** Drops the schema and what was granted on it; the role stays, since roles belong to the cluster and may serve other databases. */
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DO $$
    BEGIN
      IF EXISTS (SELECT FROM pg_roles WHERE rolname = ${sql.lit(ANALYTICS_ROLE)}) THEN
        ALTER DEFAULT PRIVILEGES IN SCHEMA analytics REVOKE SELECT ON TABLES FROM ${sql.raw(ANALYTICS_ROLE)};
      END IF;
    END $$`.execute(db);
  await sql`DROP SCHEMA analytics CASCADE`.execute(db);
}
