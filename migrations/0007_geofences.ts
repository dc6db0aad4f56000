import { sql, type Kysely } from 'kysely';

/**
 * Geofences (read model): the polygon as sent, for answering, and as a
 * PostGIS geometry with a GiST index, for containment queries. `geofence_presence`
 * (read model) lists which assets are inside which tracker device's fences, so a
 * position report finds the trackers an asset may be leaving without a scan.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE EXTENSION IF NOT EXISTS postgis`.execute(db);
  await sql`CREATE TABLE geofences (
    id text PRIMARY KEY,
    fence jsonb NOT NULL,
    geom geometry(Polygon, 4326) NOT NULL,
    ref text,
    ref_type text,
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX geofences_geom ON geofences USING gist (geom)`.execute(db);
  await sql`CREATE INDEX geofences_ref ON geofences (ref) WHERE ref IS NOT NULL`.execute(db);
  await sql`CREATE INDEX geofences_created ON geofences (created_at, id)`.execute(db);
  await sql`CREATE TABLE geofence_presence (
    tracker_id text NOT NULL,
    asset_id text NOT NULL,
    PRIMARY KEY (tracker_id, asset_id)
  )`.execute(db);
  await sql`CREATE INDEX geofence_presence_asset ON geofence_presence (asset_id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE geofence_presence, geofences`.execute(db);
}
