import { sql, type Kysely } from 'kysely';

/**
 * Events a projection or a reactor could not handle, set aside so they do
 * not hold up every later event: which subscriber, which event, where, why.
 * A rebuild (with the cause fixed) applies them again.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE es.parked_events (
    subscriber text NOT NULL,
    event_id uuid NOT NULL,
    stream_id text NOT NULL,
    type text NOT NULL,
    commit_position numeric(20) NOT NULL,
    prepare_position numeric(20) NOT NULL,
    error text NOT NULL,
    parked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subscriber, event_id)
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE es.parked_events`.execute(db);
}
