import { sql, type Kysely } from 'kysely';

/**
 * `device_refusals`: reports a device's document left out because they would
 * take it past its limits (`DOC_LIMITS`), at most one a minute per device (by
 * the reports' times), written by the devices projection. The logs projection
 * turns the rows of each batch into device log entries, found by their place
 * in the log; `time` spaces them per device.
 *
 * The table starts empty: reports refused before it existed were none, since
 * the limit came with it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE device_refusals (
    event_id uuid PRIMARY KEY,
    device_id text NOT NULL,
    topic text NOT NULL,
    limit_passed text NOT NULL,
    time timestamptz NOT NULL,
    commit_position bigint NOT NULL,
    prepare_position bigint NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX device_refusals_position ON device_refusals (commit_position, prepare_position)`.execute(db);
  await sql`CREATE INDEX device_refusals_device ON device_refusals (device_id, time)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE device_refusals`.execute(db);
}
