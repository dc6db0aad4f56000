import { sql, type Kysely } from 'kysely';

/** The PostgreSQL event store and the projection checkpoints. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE SCHEMA IF NOT EXISTS es`.execute(db);
  await sql`CREATE TABLE es.streams (
    stream_id text PRIMARY KEY,
    revision bigint NOT NULL
  )`.execute(db);
  await sql`CREATE TABLE es.events (
    global_position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
    stream_id text NOT NULL,
    revision bigint NOT NULL,
    event_id uuid NOT NULL UNIQUE,
    type text NOT NULL,
    data jsonb NOT NULL,
    metadata jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stream_id, revision)
  )`.execute(db);
  await sql`CREATE INDEX events_global_order ON es.events (transaction_id, global_position)`.execute(db);
  await sql`CREATE TABLE es.checkpoints (
    name text PRIMARY KEY,
    commit_position numeric(20) NOT NULL,
    prepare_position numeric(20) NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP SCHEMA es CASCADE`.execute(db);
}
