import { sql, type Kysely } from 'kysely';

/**
 * Calculations (read model): one row per calculation ever created, a deleted
 * one kept with `deleted_at` so the calculations reactor knows, after a
 * restart, which calculations were live at its checkpoint. `updated_at` is
 * when the definition was last set (created or replaced); `halted` says why
 * the calculation does not run (its owner lost a right it needs); the last
 * result is guarded by the global position of its event.
 *
 * The reactor's checkpoint starts at the end of the log of an installation
 * that already has events: no calculation existed before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE calculations (
    id text PRIMARY KEY,
    name text NOT NULL,
    type text NOT NULL,
    definition jsonb NOT NULL,
    schedule text NOT NULL,
    created_by text NOT NULL,
    revision bigint NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    halted text,
    halted_at timestamptz,
    last_value jsonb,
    last_reported_at timestamptz,
    last_commit numeric,
    last_prepare numeric,
    deleted_at timestamptz
  )`.execute(db);
  await sql`CREATE INDEX calculations_live ON calculations (created_at, id) WHERE deleted_at IS NULL`.execute(db);
  await sql`INSERT INTO es.checkpoints (name, commit_position, prepare_position, updated_at)
    SELECT 'calculations', transaction_id::text::numeric, global_position, now() FROM es.events
    ORDER BY transaction_id DESC, global_position DESC LIMIT 1
    ON CONFLICT (name) DO NOTHING`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DELETE FROM es.checkpoints WHERE name = 'calculations'`.execute(db);
  await sql`DROP TABLE calculations`.execute(db);
}
