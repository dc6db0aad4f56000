import { sql, type Kysely } from 'kysely';

/**
 * The audit log's reads. `audit_streams` (a read model) names the resource
 * each stream is about, for visibility and the resource filters. The event
 * store gets indexes for the audit filters that pick few events out of many:
 * a request's correlation id and the actor.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE audit_streams (
    stream_id text PRIMARY KEY,
    resource_type text NOT NULL,
    resource_id text NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX audit_streams_resource ON audit_streams (resource_id, resource_type)`.execute(db);
  await sql`CREATE INDEX audit_streams_type ON audit_streams (resource_type)`.execute(db);
  await sql`CREATE INDEX events_correlation ON es.events ((metadata->>'correlationId'), transaction_id, global_position)`.execute(db);
  await sql`CREATE INDEX events_actor ON es.events ((metadata->>'actor'), transaction_id, global_position)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX es.events_actor`.execute(db);
  await sql`DROP INDEX es.events_correlation`.execute(db);
  await sql`DROP TABLE audit_streams`.execute(db);
}
