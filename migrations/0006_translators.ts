import { sql, type Kysely } from 'kysely';

/** The translator catalogue: one row per uploaded version. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE translators (
    id text PRIMARY KEY,
    name text NOT NULL,
    version text NOT NULL,
    major bigint NOT NULL,
    minor bigint NOT NULL,
    patch bigint NOT NULL,
    prerelease boolean NOT NULL,
    api_version text NOT NULL,
    description text NOT NULL,
    match jsonb NOT NULL,
    device_model_name text,
    parameters jsonb NOT NULL,
    spec jsonb NOT NULL,
    code text NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX translators_name ON translators (name)`.execute(db);
  await sql`CREATE INDEX translators_model ON translators (device_model_name) WHERE device_model_name IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE IF EXISTS translators`.execute(db);
}
