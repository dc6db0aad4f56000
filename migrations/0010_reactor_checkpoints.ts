import { sql, type Kysely } from 'kysely';

/**
 * Downlinks became events that a reactor delivers from its own checkpoint
 * (`commands`). On an installation that already has events, that checkpoint
 * starts at the end of the log: earlier downlinks were published when they
 * were stored, and must not be sent again.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`INSERT INTO es.checkpoints (name, commit_position, prepare_position, updated_at)
    SELECT 'commands', transaction_id::text::numeric, global_position, now() FROM es.events
    ORDER BY transaction_id DESC, global_position DESC LIMIT 1
    ON CONFLICT (name) DO NOTHING`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DELETE FROM es.checkpoints WHERE name = 'commands'`.execute(db);
}
