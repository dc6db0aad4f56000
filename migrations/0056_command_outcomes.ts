import { sql, type Kysely } from 'kysely';

/**
 * `command_outcomes`: which command each downlink outcome event (`DownlinkSent`,
 * `DownlinkAcked`, `DownlinkFailed`, `DownlinkFlushed`) was recorded on, by the
 * event's id. A network server's report matched by content (LORIOT's `txd`, an
 * uplink's ACK bit, ThingPark's downlink reports) gets an event id derived from
 * the report, and a report delivered again is found here, recorded, instead of
 * moving the next command that matches it.
 *
 * Outcomes stored before have random ids, which no report repeats: the table
 * starts empty, and `npm run rebuild -- commands` fills it from the log.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE command_outcomes (
    id uuid PRIMARY KEY,
    command_id text NOT NULL
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE command_outcomes`.execute(db);
}
