import { sql, type Kysely } from 'kysely';

/**
 * Rules (rule v2): one row per rule with its definition, and per schedule
 * trigger the last slot that was decided (run or recorded as missed), so a
 * restart knows which slots passed while the platform was down. The rules
 * reactor follows the log from its own checkpoint (`rules`); on an
 * installation that already has events it starts at the end of the log:
 * no rule existed before, so nothing earlier can trigger one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE rules_v2 (
    id text PRIMARY KEY,
    name text NOT NULL,
    definition jsonb NOT NULL,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    revision bigint NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX rules_v2_name ON rules_v2 (name, id)`.execute(db);
  await sql`CREATE TABLE rule_schedules (
    rule_id text NOT NULL,
    node_id text NOT NULL,
    last_slot timestamptz NOT NULL,
    PRIMARY KEY (rule_id, node_id)
  )`.execute(db);
  await sql`INSERT INTO es.checkpoints (name, commit_position, prepare_position, updated_at)
    SELECT 'rules', transaction_id::text::numeric, global_position, now() FROM es.events
    ORDER BY transaction_id DESC, global_position DESC LIMIT 1
    ON CONFLICT (name) DO NOTHING`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DELETE FROM es.checkpoints WHERE name = 'rules'`.execute(db);
  await sql`DROP TABLE rule_schedules`.execute(db);
  await sql`DROP TABLE rules_v2`.execute(db);
}
