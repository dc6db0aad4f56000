import { sql, type Kysely } from 'kysely';

/**
 * Dashboards (read model: one row per dashboard, widgets as a JSON array in
 * their stored order; `json`, not `jsonb`: nothing queries inside them, and a
 * read hands back the stored text without conversion), images (read model), and image bytes. `image_blobs`
 * is write-side storage, not a read model: the bytes are written before the
 * `ImageUploaded` event that points at them, and a rebuild keeps them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE dashboards (
    id text PRIMARY KEY,
    name text NOT NULL,
    title text,
    description text,
    header_settings json,
    widgets json NOT NULL,
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX dashboards_created ON dashboards (created_at, id)`.execute(db);
  await sql`CREATE TABLE images (
    id text PRIMARY KEY,
    name text NOT NULL,
    category text NOT NULL,
    content_type text NOT NULL,
    size integer NOT NULL,
    sha256 text NOT NULL,
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE TABLE image_blobs (
    image_id text PRIMARY KEY,
    sha256 text NOT NULL,
    bytes bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE image_blobs, images, dashboards`.execute(db);
}
