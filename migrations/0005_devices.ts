import { sql, type Kysely } from 'kysely';

/**
 * Devices and the data path: devices (with a PostGIS point for geographic
 * queries), credentials sets, reserved topics, connectors, channels, device
 * groups, history, and log entries.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE EXTENSION IF NOT EXISTS postgis`.execute(db);
  await sql`CREATE TABLE devices (
    id text PRIMARY KEY,
    doc jsonb NOT NULL,
    name text NOT NULL,
    category text,
    secret text,
    credentials_set_id text,
    lnglat geometry(Point, 4326),
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    reported_at timestamptz
  )`.execute(db);
  await sql`CREATE INDEX devices_lnglat ON devices USING gist (lnglat)`.execute(db);
  await sql`CREATE INDEX devices_secret ON devices (secret) WHERE secret IS NOT NULL`.execute(db);
  await sql`CREATE INDEX devices_name ON devices (lower(name))`.execute(db);
  await sql`CREATE INDEX devices_category ON devices (category)`.execute(db);

  await sql`CREATE TABLE credentials_sets (
    id text PRIMARY KEY,
    username text NOT NULL,
    password_hash text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX credentials_sets_username ON credentials_sets (username)`.execute(db);

  await sql`CREATE TABLE reserved_topics (
    id text PRIMARY KEY,
    topic text NOT NULL,
    credentials_set_id text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX reserved_topics_topic ON reserved_topics (topic)`.execute(db);

  await sql`CREATE TABLE connectors (
    id text PRIMARY KEY,
    doc jsonb NOT NULL,
    secrets jsonb NOT NULL DEFAULT '{}',
    created_by text NOT NULL,
    created_at timestamptz NOT NULL
  )`.execute(db);

  await sql`CREATE TABLE device_groups (
    id text PRIMARY KEY,
    name text NOT NULL,
    revision bigint NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE TABLE device_group_members (
    group_id text NOT NULL REFERENCES device_groups (id) ON DELETE CASCADE,
    device_id text NOT NULL,
    position int NOT NULL,
    PRIMARY KEY (group_id, device_id)
  )`.execute(db);
  await sql`CREATE INDEX device_group_members_device ON device_group_members (device_id)`.execute(db);

  await sql`CREATE TABLE channels (
    id text PRIMARY KEY,
    doc jsonb NOT NULL,
    secrets jsonb NOT NULL DEFAULT '{}',
    iotnode text,
    device_group text,
    protocol text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL
  )`.execute(db);

  await sql`CREATE TABLE device_history (
    device_id text NOT NULL,
    field text NOT NULL,
    time timestamptz NOT NULL,
    num double precision,
    bool boolean,
    str text
  )`.execute(db);
  await sql`CREATE INDEX device_history_series ON device_history (device_id, field, time)`.execute(db);
  await sql`CREATE TABLE device_history_fields (
    device_id text NOT NULL,
    field text NOT NULL,
    PRIMARY KEY (device_id, field)
  )`.execute(db);

  await sql`CREATE TABLE device_logs (
    id uuid PRIMARY KEY,
    resource_id text NOT NULL,
    resource_type text NOT NULL,
    type text NOT NULL,
    priority text NOT NULL,
    category text NOT NULL,
    message text NOT NULL,
    time timestamptz NOT NULL,
    expires_at timestamptz,
    data jsonb
  )`.execute(db);
  await sql`CREATE INDEX device_logs_resource ON device_logs (resource_id, time DESC, id DESC)`.execute(db);
  await sql`CREATE INDEX device_logs_time ON device_logs (time DESC, id DESC)`.execute(db);
  await sql`CREATE INDEX device_logs_expiry ON device_logs (expires_at) WHERE expires_at IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE device_logs, device_history_fields, device_history, channels, device_group_members, device_groups,
    connectors, reserved_topics, credentials_sets, devices`.execute(db);
}
