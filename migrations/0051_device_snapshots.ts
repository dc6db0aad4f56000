import { sql, type Kysely } from 'kysely';

/**
 * Snapshots of device documents every `SNAPSHOT_EVERY` events of a device's
 * stream (`projections/devices.ts`), so time travel to a device with a long
 * history folds a few hundred events, not all of them. A read model: a
 * rebuild makes them again from the events.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE device_snapshots (
    device_id text NOT NULL,
    revision bigint NOT NULL,
    time text NOT NULL,
    doc jsonb NOT NULL,
    PRIMARY KEY (device_id, revision)
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE device_snapshots`.execute(db);
}
