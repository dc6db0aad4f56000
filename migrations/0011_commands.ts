import { sql, type Kysely } from 'kysely';

/**
 * Commands and the downlink queue (read model): one row per command, with
 * the downlink it carries, its status through the network server's events,
 * and what the network server calls it (to match its later events). A
 * connector gets the health of its outbound connections.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE commands (
    id text PRIMARY KEY,
    device_id text,
    connector_id text NOT NULL,
    integration text NOT NULL,
    command text NOT NULL,
    kind text NOT NULL,
    status text NOT NULL,
    f_port integer,
    hex text,
    confirmed boolean,
    reference text,
    network_item_id text,
    items jsonb,
    error text,
    attempts integer NOT NULL DEFAULT 0,
    retry_at timestamptz,
    requested_by text NOT NULL,
    requested_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    revision bigint NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX commands_device ON commands (device_id, requested_at DESC, id) WHERE device_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX commands_network_item ON commands (connector_id, network_item_id) WHERE network_item_id IS NOT NULL`.execute(db);
  await sql`CREATE INDEX commands_open ON commands (retry_at) WHERE status IN ('requested', 'pending')`.execute(db);
  await sql`ALTER TABLE connectors ADD COLUMN integration text`.execute(db);
  await sql`UPDATE connectors SET integration = doc->>'integration'`.execute(db);
  await sql`ALTER TABLE connectors ADD COLUMN status text NOT NULL DEFAULT 'ok'`.execute(db);
  await sql`ALTER TABLE connectors ADD COLUMN last_error text`.execute(db);
  await sql`ALTER TABLE connectors ADD COLUMN last_error_at timestamptz`.execute(db);
  await sql`ALTER TABLE connectors ADD COLUMN status_at timestamptz`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE connectors DROP COLUMN integration, DROP COLUMN status, DROP COLUMN last_error, DROP COLUMN last_error_at, DROP COLUMN status_at`.execute(db);
  await sql`DROP TABLE commands`.execute(db);
}
